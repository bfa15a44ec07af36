package dev.rustbookie.interop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Every process the harness starts is registered here: a JVM shutdown hook kills whatever is
 * still alive, and each process has a pid file under its run directory (RUN/pids/NAME.pid) so
 * that scripts/interop can sweep leftovers even when this JVM itself was killed with SIGKILL.
 */
public final class Procs {
    private static final List<Entry> ALL = new ArrayList<>();

    private record Entry(Process process, Path pidFile) {}

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(Procs::killAll, "procs-cleanup"));
    }

    private Procs() {}

    /** Starts a process (output appended to log) and registers it. */
    public static Process start(ProcessBuilder pb, Path log, Path pidFile) throws IOException {
        Files.createDirectories(log.getParent());
        Files.createDirectories(pidFile.getParent());
        pb.redirectErrorStream(true);
        pb.redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()));
        pb.redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
        Process p = pb.start();
        Files.writeString(pidFile, Long.toString(p.pid()) + "\n");
        synchronized (ALL) {
            ALL.add(new Entry(p, pidFile));
        }
        return p;
    }

    /** Forgets an exited process and removes its pid file. */
    public static void forget(Process p) {
        synchronized (ALL) {
            ALL.removeIf(e -> {
                if (e.process == p) {
                    try {
                        Files.deleteIfExists(e.pidFile);
                    } catch (IOException ignored) {
                        // best effort
                    }
                    return true;
                }
                return false;
            });
        }
    }

    /**
     * The sockets on these local ports and their processes, as `ss -tanp` prints them (for a
     * report of who took a port the harness had drawn free), or why that could not be told.
     */
    public static String portHolders(int... ports) {
        StringBuilder filter = new StringBuilder();
        for (int port : ports) {
            filter.append(filter.length() == 0 ? "( " : " or ").append("sport = :").append(port);
        }
        filter.append(" )");
        try {
            Process p = new ProcessBuilder("ss", "-Htanp", filter.toString()).redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
            p.waitFor(5, TimeUnit.SECONDS);
            out = out.strip().replace('\n', ';');
            return out.isEmpty() ? "none now" : out;
        } catch (IOException e) {
            return "unknown (" + e.getMessage() + ")";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "unknown (interrupted)";
        }
    }

    /** SIGTERM, then SIGKILL after the grace period. */
    public static void stop(Process p, long graceMillis) {
        if (p == null) {
            return;
        }
        p.destroy();
        try {
            if (!p.waitFor(graceMillis, TimeUnit.MILLISECONDS)) {
                p.destroyForcibly();
                p.waitFor(10, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            p.destroyForcibly();
            Thread.currentThread().interrupt();
        }
        forget(p);
    }

    /** SIGKILL and wait. */
    public static void kill(Process p) {
        if (p == null) {
            return;
        }
        p.destroyForcibly();
        try {
            p.waitFor(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        forget(p);
    }

    public static void killAll() {
        List<Entry> copy;
        synchronized (ALL) {
            copy = new ArrayList<>(ALL);
        }
        for (Entry e : copy) {
            e.process.destroyForcibly();
        }
        for (Entry e : copy) {
            try {
                e.process.waitFor(5, TimeUnit.SECONDS);
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
            forget(e.process);
        }
    }
}
