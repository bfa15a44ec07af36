package dev.rustbookie.interop;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.bookkeeper.net.BookieId;

/** One bookie process (ours or Java's) with its own ports and directories. */
public abstract class Bookie {
    public final String name;
    public final Path dir;
    /**
     * The bookie port (its id) and admin HTTP port. Fixed once the bookie has started; before
     * that, a first start that finds a port taken draws new ones (see {@link #awaitReady}).
     */
    public volatile int port;
    public volatile int httpPort;
    protected final Cluster cluster;
    /** Extra or overriding bk_server.conf keys. */
    public final Map<String, String> extraConf = new LinkedHashMap<>();
    protected Process proc;
    /** The ZooKeeper session of a registration left behind by a SIGKILL (0: none). */
    private volatile long staleOwner;
    /** Whether the scenario expects this bookie up (for the end-of-scenario checks). */
    public volatile boolean expectUp;
    /** Whether it was launched; whether its directory was empty then; whether it ever registered. */
    private boolean launched;
    private boolean freshAtFirstLaunch;
    private volatile boolean everReady;
    /** First starts retried on new ports after a port was found taken. */
    private int portRetries;
    private static final int PORT_RETRIES = 3;

    protected Bookie(Cluster cluster, String name) {
        this.cluster = cluster;
        this.name = name;
        this.dir = cluster.runDir.resolve(name);
        this.port = Ports.free();
        this.httpPort = Ports.free();
    }

    public abstract boolean isJava();

    public String id() {
        return "127.0.0.1:" + port;
    }

    public BookieId bookieId() {
        return BookieId.parse(id());
    }

    public Path log() {
        return cluster.runDir.resolve("logs").resolve(name + ".log");
    }

    public Path confFile() {
        return dir.resolve("bk_server.conf");
    }

    protected Map<String, String> conf() {
        Map<String, String> c = new LinkedHashMap<>();
        c.put("bookiePort", Integer.toString(port));
        c.put("listeningInterface", "lo");
        c.put("advertisedAddress", "127.0.0.1");
        c.put("allowLoopback", "true");
        c.put("useHostNameAsBookieID", "false");
        c.put("metadataServiceUri", cluster.metadataServiceUri());
        c.put("zkTimeout", "6000");
        c.put("journalDirectories", dir.resolve("journal").toString());
        c.put("ledgerDirectories", dir.resolve("ledgers").toString());
        c.put("journalSyncData", "true");
        c.put("gcWaitTime", "60000");
        c.put("diskUsageThreshold", "0.99");
        c.put("diskUsageWarnThreshold", "0.98");
        c.put("readOnlyModeEnabled", "true");
        c.put("httpServerEnabled", "true");
        c.put("httpServerHost", "127.0.0.1");
        c.put("httpServerPort", Integer.toString(httpPort));
        return c;
    }

    protected abstract List<String> command() throws IOException;

    /**
     * The text of {@link #confFile()}: the harness's keys ({@link #conf()} and {@link #extraConf});
     * null when the bookie's configuration is written by other means (a stock file, an image).
     */
    protected String confText() throws IOException {
        Map<String, String> c = conf();
        c.putAll(extraConf);
        StringBuilder sb = new StringBuilder("# written by the interop harness for " + name + "\n");
        c.forEach((k, v) -> sb.append(k).append('=').append(v).append('\n'));
        return sb.toString();
    }

    /** Called at each launch before the configuration is written (an image's file tree). */
    protected void prepare() throws IOException {
    }

    /** The process's working directory. */
    protected Path workDir() {
        return dir;
    }

    /** Sets the process's environment (inherited from the harness unless changed here). */
    protected void environment(Map<String, String> env) throws IOException {
    }

    /** Writes the conf and starts the process (does not wait for registration). */
    public synchronized void launch() throws IOException {
        if (proc != null && proc.isAlive()) {
            throw new IllegalStateException(name + " is already running");
        }
        if (!launched) {
            launched = true;
            freshAtFirstLaunch = isEmptyDir(dir);
        }
        Files.createDirectories(dir.resolve("journal"));
        Files.createDirectories(dir.resolve("ledgers"));
        Files.createDirectories(dir.resolve("tmp"));
        prepare();
        String text = confText();
        if (text != null) {
            Files.writeString(confFile(), text, StandardCharsets.ISO_8859_1);
        }
        Files.createDirectories(log().getParent());
        Files.writeString(log(), "==== start " + java.time.Instant.now() + "\n", StandardCharsets.UTF_8,
                java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.APPEND);
        ProcessBuilder pb = new ProcessBuilder(command());
        pb.directory(workDir().toFile());
        environment(pb.environment());
        proc = Procs.start(pb, log(), cluster.runDir.resolve("pids").resolve(name + ".pid"));
        expectUp = true;
    }

    /** The process id while it runs, or -1 (for CpuSampler). */
    public synchronized long pid() {
        return proc != null && proc.isAlive() ? proc.pid() : -1;
    }

    /** Starts and waits until registered (and ready). */
    public void start() throws Exception {
        launch();
        awaitReady(Duration.ofSeconds(isJava() ? 90 : 30));
    }

    /** Waits until the bookie is registered in ZooKeeper (available or read-only). */
    public void awaitReady(Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            if (proc == null || !proc.isAlive()) {
                if (retryOnNewPorts()) {
                    deadline = System.nanoTime() + timeout.toNanos();
                    continue;
                }
                throw new IllegalStateException(name + " exited with " + (proc == null ? "?" : proc.exitValue())
                        + " before registering (" + lastError() + "); log tail:\n" + logTail(40));
            }
            long owner = cluster.registrationOwner(id());
            if (owner != 0 && owner != staleOwner && readyExtra()) {
                everReady = true;
                return;
            }
            Thread.sleep(100);
        }
        throw new IllegalStateException(name + " did not register within " + timeout + " (" + lastError()
                + "); log tail:\n" + logTail(40));
    }

    /**
     * A bookie's first start that failed on a taken port (its bookie port or HTTP port, drawn
     * free seconds before: some other process on the machine bound it in between) is launched
     * again on newly drawn ports, from an emptied directory (a Java bookie writes its cookie,
     * with the old port in its id, before it binds). Only a bookie that has never registered and
     * whose directory the harness created empty is retried: once started, its port is its
     * identity. Who held the port goes to the scenario's output.
     */
    private synchronized boolean retryOnNewPorts() throws IOException {
        if (everReady || !freshAtFirstLaunch || portRetries >= PORT_RETRIES || !currentLog().contains(
                "Address already in use")) {
            return false;
        }
        portRetries++;
        Cluster.log(name + ": a port was taken at its first start (" + lastError() + "); holders: "
                + Procs.portHolders(port, httpPort) + "; starting it again on new ports");
        port = Ports.free();
        httpPort = Ports.free();
        Procs.forget(proc);
        proc = null;
        deleteTree(dir);
        launch();
        return true;
    }

    /** The log since the last launch. */
    private String currentLog() {
        String all = logText();
        int at = all.lastIndexOf("==== start ");
        return at < 0 ? all : all.substring(at);
    }

    private static boolean isEmptyDir(Path d) throws IOException {
        if (!Files.exists(d)) {
            return true;
        }
        try (java.util.stream.Stream<Path> s = Files.list(d)) {
            return s.findAny().isEmpty();
        }
    }

    private static void deleteTree(Path d) throws IOException {
        if (!Files.exists(d)) {
            return;
        }
        try (java.util.stream.Stream<Path> s = Files.walk(d)) {
            for (Path p : (Iterable<Path>) s.sorted(java.util.Comparator.reverseOrder())::iterator) {
                Files.deleteIfExists(p);
            }
        }
    }

    /**
     * The log's last error line (or its last line): reports show an exception's first line
     * only, so a start failure names its cause there (the exception itself, not a stack frame
     * or a "Suppressed:" note after it).
     */
    public String lastError() {
        String[] all = logText().split("\n");
        for (int i = all.length - 1; i >= 0; i--) {
            String l = all[i].strip();
            if (l.startsWith("at ") || l.startsWith("Suppressed:") || l.startsWith("...")) {
                continue;
            }
            if (l.contains("ERROR") || l.contains("panicked at") || l.contains("Exception")) {
                return "last error: " + l;
            }
        }
        return all.length == 0 ? "empty log" : "last line: " + all[all.length - 1].strip();
    }

    protected boolean readyExtra() {
        return true;
    }

    /** Graceful stop: SIGTERM (unregisters), SIGKILL after 30 s. */
    public synchronized void stop() {
        expectUp = false;
        Procs.stop(proc, 30_000);
    }

    /** Crash: SIGKILL. */
    public synchronized void kill() {
        expectUp = false;
        staleOwner = cluster.registrationOwner(id());
        Procs.kill(proc);
    }

    public synchronized boolean isAlive() {
        return proc != null && proc.isAlive();
    }

    public synchronized int exitValue() {
        return proc.exitValue();
    }

    public String logText() {
        try {
            return Files.exists(log()) ? Files.readString(log(), StandardCharsets.ISO_8859_1) : "";
        } catch (IOException e) {
            return "";
        }
    }

    public String logTail(int lines) {
        String[] all = logText().split("\n");
        StringBuilder sb = new StringBuilder();
        for (int i = Math.max(0, all.length - lines); i < all.length; i++) {
            sb.append("    ").append(all[i]).append('\n');
        }
        return sb.toString();
    }

    /** Problems in the log (a Rust panic, a Java "Unexpected exception" error). */
    public List<String> logProblems() {
        List<String> out = new ArrayList<>();
        for (String line : logText().split("\n")) {
            if (line.contains("panicked at") || line.contains("RUST_BACKTRACE")
                    || (line.contains("ERROR") && line.contains("Unexpected exception"))) {
                out.add(line);
            }
        }
        return out;
    }

    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    /** The harness's TLS side when the admin server speaks HTTPS (httpServerTlsEnable); null: HTTP. */
    private volatile HttpClient adminHttps;

    /** Admin requests go over HTTPS with this client context (its certificate and trust). */
    public void adminTls(javax.net.ssl.SSLContext ctx) {
        adminHttps = HttpClient.newBuilder().sslContext(ctx).connectTimeout(Duration.ofSeconds(5)).build();
    }

    /** The admin server's base URL (https when {@link #adminTls} was set). */
    public String adminUrl() {
        return (adminHttps == null ? "http" : "https") + "://127.0.0.1:" + httpPort;
    }

    /** One admin HTTP request: returns "STATUS BODY". */
    public HttpResponse<String> http(String method, String path, String body) throws IOException, InterruptedException {
        return http(adminHttps == null ? HTTP : adminHttps, method, path, body);
    }

    /** One admin request with this client (e.g. one without a client certificate). */
    public HttpResponse<String> http(HttpClient client, String method, String path, String body)
            throws IOException, InterruptedException {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(adminUrl() + path))
                .timeout(Duration.ofSeconds(10));
        if (body == null) {
            b.method(method, HttpRequest.BodyPublishers.noBody());
        } else {
            b.header("Content-Type", "application/json").method(method, HttpRequest.BodyPublishers.ofString(body));
        }
        return client.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    /** PUT /api/v1/bookie/state/readonly {"readOnly":ro}; returns the status code. */
    public int setReadOnly(boolean ro) throws IOException, InterruptedException {
        return http("PUT", "/api/v1/bookie/state/readonly", "{\"readOnly\":" + ro + "}").statusCode();
    }

    @Override
    public String toString() {
        return name + "(" + (isJava() ? "java" : "rust") + " " + id() + ")";
    }
}
