package dev.rustbookie.chaos;

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;

/**
 * One client's history of operations, as the checker reads it: one tab-separated line per event,
 * {@code time_ms client type ledger entry sha256 detail}, flushed line by line so that a client
 * killed mid-run leaves every event it saw. Types: create, createfail, invoke, ok, fail, unknown,
 * close (writers); lac, read, readbad, readfail (tailing readers); fence (recoverers).
 * An "invoke" carries the writer's own sequence number, which is the entry id the client assigns
 * (adds to one handle are numbered in the order they are issued).
 */
final class History implements AutoCloseable {
    record Event(long time, String client, String type, long ledger, long entry, String sha, String detail) {}

    private final BufferedWriter out;
    private final String client;

    History(Path file, String client) throws IOException {
        this.client = client;
        this.out = Files.newBufferedWriter(file, StandardCharsets.UTF_8, StandardOpenOption.CREATE,
                StandardOpenOption.APPEND);
    }

    synchronized void log(String type, long ledger, long entry, String sha, String detail) {
        try {
            out.write(System.currentTimeMillis() + "\t" + client + "\t" + type + "\t" + ledger + "\t" + entry + "\t"
                    + (sha.isEmpty() ? "-" : sha) + "\t" + detail.replace('\t', ' ').replace('\n', ' ') + "\n");
            out.flush();
        } catch (IOException e) {
            throw new IllegalStateException("cannot write the history of " + client, e);
        }
    }

    @Override
    public synchronized void close() throws IOException {
        out.close();
    }

    /** Every event of a history file; a torn last line (client killed mid-write) is skipped. */
    static List<Event> read(Path file) throws IOException {
        List<Event> events = new ArrayList<>();
        for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
            String[] f = line.split("\t", -1);
            if (f.length != 7) {
                continue;
            }
            try {
                events.add(new Event(Long.parseLong(f[0]), f[1], f[2], Long.parseLong(f[3]), Long.parseLong(f[4]),
                        f[5].equals("-") ? "" : f[5], f[6]));
            } catch (NumberFormatException e) {
                // torn line
            }
        }
        return events;
    }
}
