package dev.rustbookie.interop;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Short-lived tool processes (BookieShell, our CLI), output captured. */
public final class Tools {
    private Tools() {}

    /** Runs a command to completion (120 s at most); returns its output; fails on a non-zero exit. */
    public static String run(Cluster c, String name, List<String> cmd) throws Exception {
        Path log = c.runDir.resolve("logs").resolve(name + ".log");
        Files.deleteIfExists(log);
        Process p = Procs.start(new ProcessBuilder(cmd), log, c.runDir.resolve("pids").resolve(name + ".pid"));
        boolean done = p.waitFor(120, TimeUnit.SECONDS);
        if (!done) {
            Procs.kill(p);
            throw new AssertionError(name + " did not finish in 120 s");
        }
        Procs.forget(p);
        String out = Files.readString(log, StandardCharsets.UTF_8);
        if (p.exitValue() != 0) {
            throw new AssertionError(name + " exited with " + p.exitValue() + ":\n" + out);
        }
        return out;
    }

    /** org.apache.bookkeeper.bookie.BookieShell -conf F ARGS in its own JVM. */
    public static String bookieShell(Cluster c, String... args) throws Exception {
        return bookieShellWith(c, java.util.Map.of(), args);
    }

    /** {@link #bookieShell} with more configuration keys (e.g. the "local" bookie's address). */
    public static String bookieShellWith(Cluster c, java.util.Map<String, String> extra, String... args)
            throws Exception {
        Path conf = c.runDir.resolve("shell-" + args[0] + ".conf");
        StringBuilder text = new StringBuilder("metadataServiceUri=" + c.metadataServiceUri() + "\nzkTimeout=10000\n");
        extra.forEach((k, v) -> text.append(k).append('=').append(v).append('\n'));
        Files.writeString(conf, text.toString());
        List<String> cmd = new ArrayList<>();
        cmd.add(Settings.javaBin());
        cmd.add("-Xmx256m");
        cmd.add("-XX:+UseSerialGC");
        cmd.addAll(Settings.jvmFlags());
        cmd.add("-Djava.io.tmpdir=" + c.runDir);
        cmd.add("-cp");
        cmd.add(Settings.classpath());
        cmd.add("org.apache.bookkeeper.bookie.BookieShell");
        cmd.add("-conf");
        cmd.add(conf.toString());
        cmd.addAll(List.of(args));
        return run(c, "bookieshell-" + args[0], cmd);
    }
}
