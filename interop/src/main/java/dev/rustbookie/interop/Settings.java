package dev.rustbookie.interop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/** Where things are: the Rust bookie binary, the Maven classpath, the run directories. */
public final class Settings {
    private Settings() {}

    private static String prop(String sys, String env, String dflt) {
        String v = System.getProperty(sys);
        if (v == null || v.isBlank()) {
            v = System.getenv(env);
        }
        return v == null || v.isBlank() ? dflt : v;
    }

    /** The interop/ directory (the Maven base dir; surefire runs there). */
    public static Path interopDir() {
        return Paths.get(prop("interop.dir", "INTEROP_DIR", System.getProperty("user.dir"))).toAbsolutePath();
    }

    /** BOOKIE_BIN (env or system property bookie.bin), default ../target/release/bookie. */
    public static Path bookieBin() {
        String env = System.getenv("BOOKIE_BIN");
        String v = env != null && !env.isBlank() ? env : System.getProperty("bookie.bin");
        Path p = v == null || v.isBlank()
                ? interopDir().resolve("../target/release/bookie")
                : Paths.get(v);
        if (!p.isAbsolute()) {
            p = interopDir().resolve(p);
        }
        return p.normalize();
    }

    /** Extra arguments for `bookie serve` (BOOKIE_ARGS, whitespace-separated). */
    public static List<String> bookieArgs() {
        String v = prop("bookie.args", "BOOKIE_ARGS", "--no-pin");
        return new ArrayList<>(Arrays.asList(v.trim().split("\\s+")));
    }

    public static Path targetDir() {
        return Paths.get(prop("interop.target.dir", "INTEROP_TARGET_DIR", interopDir().resolve("target").toString()));
    }

    public static String classpath() throws IOException {
        Path f = Paths.get(prop("interop.classpath.file", "INTEROP_CLASSPATH_FILE",
                targetDir().resolve("classpath.txt").toString()));
        String cp = Files.readString(f).trim();
        // the harness's own classes, for tool mains
        Path classes = targetDir().resolve("classes");
        return classes + ":" + cp;
    }

    public static List<String> jvmFlags() {
        String v = prop("interop.jvm.flags", "INTEROP_JVM_FLAGS",
                "-Djava.net.preferIPv4Stack=true -Dio.netty.tryReflectionSetAccessible=true "
                        + "-Dio.netty.leakDetectionLevel=disabled --add-opens java.base/java.nio=ALL-UNNAMED "
                        + "--add-opens java.base/jdk.internal.misc=ALL-UNNAMED --add-opens java.base/java.io=ALL-UNNAMED "
                        + "--add-opens java.base/java.util.zip=ALL-UNNAMED");
        return new ArrayList<>(Arrays.asList(v.trim().split("\\s+")));
    }

    /**
     * The flags every JVM the harness starts takes: its temporary and Netty native directories
     * under {@code dir}, its log4j configuration, and the run it belongs to (found by a later
     * cleanup).
     */
    public static List<String> processFlags(Path dir, Path log4j, Path runDir) {
        return List.of(
                "-Djava.io.tmpdir=" + dir.resolve("tmp"),
                "-Dio.netty.native.workdir=" + dir.resolve("tmp"),
                "-Dlog4j.configurationFile=" + log4j,
                "-Dlog4j2.configurationFile=" + log4j,
                "-Dinterop.run=" + runDir);
    }

    public static String javaBin() {
        return Paths.get(System.getProperty("java.home"), "bin", "java").toString();
    }

    /** Writes a log4j2 configuration (console, one line per event, root at {@code level}) into
     *  {@code dir} for a child JVM, and returns its path. */
    public static Path log4j2Config(Path dir, String level) throws IOException {
        Path file = dir.resolve("log4j2-" + level + ".xml");
        Files.writeString(file, """
                <?xml version="1.0" encoding="UTF-8"?>
                <Configuration status="WARN">
                  <Appenders>
                    <Console name="out" target="SYSTEM_OUT">
                      <PatternLayout pattern="%d{HH:mm:ss.SSS} %-5p [%t] %c{1} - %m%n"/>
                    </Console>
                  </Appenders>
                  <Loggers>
                    <Root level="LEVEL"><AppenderRef ref="out"/></Root>
                  </Loggers>
                </Configuration>
                """.replace("LEVEL", level));
        return file;
    }
}
