package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.LongToIntFunction;
import java.util.stream.Stream;
import org.apache.bookkeeper.net.BookieId;

/** Our bookie started on a stopped Java bookie's own bk_server.conf: the takeover (issue 32). */
final class OursOnJava {
    private OursOnJava() {}

    /** Starts ours on J's configuration file and waits until it is registered as J's id. */
    static Process start(Cluster c, JavaBookie j, String name) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(Settings.bookieBin().toString(), "serve", "--conf",
                j.confFile().toString()));
        cmd.addAll(Settings.bookieArgs());
        Path log = c.runDir.resolve("logs").resolve(name + ".log");
        Process p = Procs.start(new ProcessBuilder(cmd).directory(j.dir.toFile()), log,
                c.runDir.resolve("pids").resolve(name + ".pid"));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
        while (System.nanoTime() < deadline) {
            assertTrue(p.isAlive(), "our bookie exited on the Java directories:\n" + Files.readString(log));
            boolean ready;
            try {
                ready = j.http("GET", "/api/v1/bookie/is_ready", null).statusCode() == 200
                        && c.isRegistered(j.id());
            } catch (Exception e) {
                ready = false;
            }
            if (ready) {
                Cluster.log(name + " serving on " + j.id());
                return p;
            }
            Thread.sleep(200);
        }
        throw new AssertionError("our bookie did not register on the Java directories:\n" + Files.readString(log));
    }

    /** Stops a started bookie (SIGTERM, then SIGKILL after 30 s) and forgets it. */
    static void stop(Process p) {
        if (p != null) {
            Procs.stop(p, 30_000);
            Procs.forget(p);
        }
    }

    /** Entries from..to of `ledger` read from `bookie` alone (raw reads): ids and payload byte for byte. */
    static void verifyRaw(Raw raw, BookieId bookie, long seed, LongToIntFunction size, long ledger, long from,
            long to) throws Exception {
        for (long e = from; e <= to; e++) {
            Raw.Result r = raw.read(bookie, ledger, e);
            assertEquals(0, r.rc(), "read of entry " + e + " of ledger " + ledger);
            assertNotNull(r.data());
            ByteBuffer b = ByteBuffer.wrap(r.data());
            assertEquals(ledger, b.getLong(0), "ledger id in entry " + e);
            assertEquals(e, b.getLong(8), "entry id in entry " + e);
            byte[] want = Payloads.payload(seed, ledger, e, size.applyAsInt(e));
            assertArrayEquals(want, Arrays.copyOfRange(r.data(), 36, r.data().length),
                    "payload of entry " + e + " of ledger " + ledger);
        }
    }

    /**
     * Path below `base` -> sha256 of every file in the Java bookie's `current/` directories. A file
     * removed while they are walked (our GC removing an entry log) makes the walk start over.
     */
    static Map<String, String> javaFiles(Path base) throws Exception {
        for (int attempt = 1; ; attempt++) {
            try {
                return javaFilesOnce(base);
            } catch (UncheckedIOException | NoSuchFileException e) {
                Throwable cause = e instanceof UncheckedIOException ? e.getCause() : e;
                if (!(cause instanceof NoSuchFileException) || attempt == 5) {
                    throw e;
                }
            }
        }
    }

    private static Map<String, String> javaFilesOnce(Path base) throws Exception {
        Map<String, String> out = new TreeMap<>();
        try (Stream<Path> files = Files.walk(base)) {
            for (Path f : (Iterable<Path>) files.filter(Files::isRegularFile)::iterator) {
                String rel = base.relativize(f).toString();
                if (rel.contains("/current/")) {
                    out.put(rel, Payloads.sha256(Files.readAllBytes(f)));
                }
            }
        }
        return out;
    }
}
