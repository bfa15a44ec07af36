package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

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
}
