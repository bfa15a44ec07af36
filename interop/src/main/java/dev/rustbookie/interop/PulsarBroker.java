package dev.rustbookie.interop;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A real Apache Pulsar broker (tier "pulsar") in its own JVM over a Cluster's bookies: metadata
 * and configuration store in the cluster's ZooKeeper, BookKeeper metadata at the cluster's
 * ledgers root (zk://HOST:PORT/ROOT, where our bookies registered), E3 W3 A2 managed ledgers,
 * deduplication on, infinite retention, no functions worker. The broker, PulsarClusterMetadataSetup and the Pulsar
 * client driver (interop/pulsar, dev.rustbookie.interop.pulsar.PulsarDriver) run on the
 * classpath of the interop/pulsar module (Pulsar 4.0.8: BookKeeper 4.17 and Netty 4.1, which
 * cannot share the test JVM's BookKeeper 4.18.2 / Netty 4.2 classpath).
 */
public final class PulsarBroker implements AutoCloseable {
    public static final String CLUSTER = "interop";
    public final Cluster cluster;
    public final String name;
    public final Path dir;
    /** Its ports: fixed once it has been ready; a first start on a taken port draws new ones. */
    public volatile int brokerPort;
    public volatile int webPort;
    private boolean everReady;
    private int portRetries;
    public final Map<String, String> extraConf = new LinkedHashMap<>();
    private Process proc;
    private int driverCount;

    public PulsarBroker(Cluster cluster, String name) throws IOException {
        this.cluster = cluster;
        this.name = name;
        this.dir = cluster.runDir.resolve(name);
        this.brokerPort = Ports.free();
        this.webPort = Ports.free();
        Files.createDirectories(dir.resolve("tmp"));
    }

    public String serviceUrl() {
        return "pulsar://127.0.0.1:" + brokerPort;
    }

    public String webUrl() {
        return "http://127.0.0.1:" + webPort;
    }

    /** zk://HOST:PORT/ROOT: the ledgers root the cluster's bookies registered in. */
    public String bkMetadataServiceUri() {
        return "zk://" + cluster.zk.servers() + cluster.root;
    }

    public Path log() {
        return cluster.runDir.resolve("logs").resolve(name + ".log");
    }

    // ---- classpath (the interop/pulsar module) ----

    private static String classpath;

    /**
     * target/classes + the runtime classpath of interop/pulsar; built with Maven
     * (`mvn -s pulsar/settings.xml -f pulsar/pom.xml compile`) when missing.
     */
    public static synchronized String classpath() throws Exception {
        if (classpath != null) {
            return classpath;
        }
        Path module = Settings.interopDir().resolve("pulsar");
        String f = System.getProperty("interop.pulsar.classpath.file");
        Path cpFile = f == null || f.isBlank() ? module.resolve("target/pulsar-classpath.txt") : Paths.get(f);
        Path classes = cpFile.getParent().resolve("classes");
        if (!Files.exists(cpFile) || !Files.exists(classes.resolve("dev/rustbookie/interop/pulsar/PulsarDriver.class"))) {
            Cluster.log("building the Pulsar module (" + module + ")");
            Path log = Settings.targetDir().resolve("pulsar-mvn.log");
            Files.createDirectories(log.getParent());
            ProcessBuilder pb = new ProcessBuilder("mvn", "-B", "-q", "-s", module.resolve("settings.xml").toString(),
                    "-f", module.resolve("pom.xml").toString(), "compile");
            pb.redirectErrorStream(true);
            pb.redirectOutput(log.toFile());
            Process p = pb.start();
            if (!p.waitFor(15, TimeUnit.MINUTES) || p.exitValue() != 0) {
                p.destroyForcibly();
                throw new IllegalStateException("building interop/pulsar failed; see " + log);
            }
        }
        classpath = classes + ":" + Files.readString(cpFile).trim();
        return classpath;
    }

    private List<String> java(String heap, String log4jLevel) throws Exception {
        Path log4j = Settings.log4j2Config(dir, log4jLevel);
        List<String> cmd = new ArrayList<>();
        cmd.add(Settings.javaBin());
        cmd.add("-Xms" + heap);
        cmd.add("-Xmx" + heap);
        cmd.add("-XX:MaxDirectMemorySize=" + heap);
        cmd.add("-XX:+UseSerialGC");
        cmd.addAll(Settings.jvmFlags());
        // as Pulsar's bin/pulsar does on Java 17
        for (String o : new String[] {"java.base/sun.net", "java.management/sun.management",
                "jdk.management/com.sun.management.internal", "java.base/java.lang", "java.base/jdk.internal.platform"}) {
            cmd.add("--add-opens");
            cmd.add(o + "=ALL-UNNAMED");
        }
        cmd.add("-Dzookeeper.sasl.client=false");
        cmd.addAll(Settings.processFlags(dir, log4j, cluster.runDir));
        cmd.add("-cp");
        cmd.add(classpath());
        return cmd;
    }

    /** PulsarClusterMetadataSetup: cluster, tenant public, namespace public/default, existing BK metadata. */
    public String setupMetadata() throws Exception {
        List<String> cmd = java("256m", "INFO");
        cmd.add("org.apache.pulsar.PulsarClusterMetadataSetup");
        cmd.addAll(List.of("--cluster", CLUSTER,
                "--metadata-store", "zk:" + cluster.zk.servers(),
                "--configuration-metadata-store", "zk:" + cluster.zk.servers(),
                "--web-service-url", webUrl(),
                "--broker-service-url", serviceUrl(),
                "--existing-bk-metadata-service-uri", bkMetadataServiceUri()));
        return Tools.run(cluster, name + "-metadata-setup", cmd);
    }

    public Map<String, String> conf() {
        Map<String, String> c = new LinkedHashMap<>();
        c.put("clusterName", CLUSTER);
        c.put("metadataStoreUrl", "zk:" + cluster.zk.servers());
        c.put("configurationMetadataStoreUrl", "zk:" + cluster.zk.servers());
        c.put("metadataStoreSessionTimeoutMillis", "5000");
        c.put("bookkeeperMetadataServiceUri", bkMetadataServiceUri());
        c.put("advertisedAddress", "127.0.0.1");
        c.put("bindAddress", "127.0.0.1");
        c.put("brokerServicePort", Integer.toString(brokerPort));
        c.put("webServicePort", Integer.toString(webPort));
        c.put("managedLedgerDefaultEnsembleSize", "3");
        c.put("managedLedgerDefaultWriteQuorum", "3");
        c.put("managedLedgerDefaultAckQuorum", "2");
        c.put("managedLedgerCacheSizeMB", "64");
        c.put("brokerDeduplicationEnabled", "true");
        c.put("functionsWorkerEnabled", "false");
        c.put("webSocketServiceEnabled", "false");
        c.put("systemTopicEnabled", "false");
        c.put("topicLevelPoliciesEnabled", "false");
        c.put("brokerDeleteInactiveTopicsEnabled", "false");
        // keep consumed ledgers (the test checks the ledger recovered at the restart afterwards)
        c.put("defaultRetentionTimeInMinutes", "-1");
        c.put("defaultRetentionSizeInMB", "-1");
        c.put("allowAutoTopicCreationType", "non-partitioned");
        c.put("loadBalancerSheddingEnabled", "false");
        c.put("brokerShutdownTimeoutMs", "5000");
        c.put("numIOThreads", "2");
        c.put("numHttpServerThreads", "8");
        c.put("bookkeeperClientTimeoutInSeconds", "10");
        c.putAll(extraConf);
        return c;
    }

    /** Writes broker.conf and starts the broker (does not wait). */
    public synchronized void launch() throws Exception {
        if (proc != null && proc.isAlive()) {
            throw new IllegalStateException(name + " is already running");
        }
        StringBuilder sb = new StringBuilder("# written by the interop harness for " + name + "\n");
        conf().forEach((k, v) -> sb.append(k).append('=').append(v).append('\n'));
        Path confFile = dir.resolve("broker.conf");
        Files.writeString(confFile, sb.toString());
        Files.createDirectories(log().getParent());
        Files.writeString(log(), "==== start " + java.time.Instant.now() + "\n", StandardCharsets.UTF_8,
                StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        List<String> cmd = java("512m", "INFO");
        cmd.add("org.apache.pulsar.PulsarBrokerStarter");
        cmd.add("-c");
        cmd.add(confFile.toString());
        ProcessBuilder pb = new ProcessBuilder(cmd);
        pb.directory(dir.toFile());
        proc = Procs.start(pb, log(), cluster.runDir.resolve("pids").resolve(name + ".pid"));
    }

    /** The process id while it runs, or -1 (for CpuSampler). */
    public synchronized long pid() {
        return proc != null && proc.isAlive() ? proc.pid() : -1;
    }

    /** Starts the broker and waits until GET /admin/v2/brokers/ready answers 200. */
    public void start(Duration timeout) throws Exception {
        long t0 = System.nanoTime();
        launch();
        long deadline = t0 + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            if (!proc.isAlive()) {
                if (!everReady && portRetries < 3 && currentLog().contains("Address already in use")) {
                    // as Bookie.awaitReady: some other process bound a port drawn free for it
                    portRetries++;
                    Cluster.log(name + ": a port was taken at its first start; holders: "
                            + Procs.portHolders(brokerPort, webPort) + "; starting it again on new ports");
                    Procs.forget(proc);
                    brokerPort = Ports.free();
                    webPort = Ports.free();
                    launch();
                    deadline = System.nanoTime() + timeout.toNanos();
                    continue;
                }
                throw new IllegalStateException(name + " exited with " + proc.exitValue() + "; log tail:\n" + logTail(60));
            }
            try {
                if (http("GET", "/admin/v2/brokers/ready", null).statusCode() == 200) {
                    everReady = true;
                    Cluster.log("Pulsar broker " + name + " ready at " + serviceUrl() + " in "
                            + (System.nanoTime() - t0) / 1_000_000 + " ms");
                    return;
                }
            } catch (IOException e) {
                // not listening yet
            }
            Thread.sleep(250);
        }
        throw new IllegalStateException(name + " not ready within " + timeout + "; log tail:\n" + logTail(60));
    }

    /** The log since the last launch. */
    private String currentLog() {
        String all;
        try {
            all = Files.readString(log(), StandardCharsets.ISO_8859_1);
        } catch (IOException e) {
            return "";
        }
        int at = all.lastIndexOf("==== start ");
        return at < 0 ? all : all.substring(at);
    }

    /** SIGKILL: the broker's open ledgers stay open (the next owner recovers them). */
    public synchronized void kill() {
        Procs.kill(proc);
    }

    public synchronized boolean isAlive() {
        return proc != null && proc.isAlive();
    }

    /**
     * Waits until the ZooKeeper ephemerals of a killed broker are gone (its session expired):
     * its load-manager registration and namespace-bundle ownerships.
     */
    public void awaitSessionGone(Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            org.apache.zookeeper.data.Stat st = cluster.zk().exists("/loadbalance/brokers/127.0.0.1:" + webPort, false);
            if (st == null) {
                return;
            }
            Thread.sleep(200);
        }
        throw new IllegalStateException("the killed broker's registration did not expire within " + timeout);
    }

    public HttpResponse<String> http(String method, String path, String body) throws IOException, InterruptedException {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(webUrl() + path)).timeout(Duration.ofSeconds(30));
        if (body != null) {
            b.header("Content-Type", "application/json");
        }
        b.method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
        return HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    /** Starts the client driver (PulsarDriver ARGS...) in its own JVM; output in logs/NAME.log. */
    public Process driver(String what, List<String> args) throws Exception {
        return driver(what, args, "256m");
    }

    /** The driver with a heap of HEAP (large messages: chunking). */
    public Process driver(String what, List<String> args, String heap) throws Exception {
        return driver("dev.rustbookie.interop.pulsar.PulsarDriver", what, args, heap);
    }

    /**
     * Starts MAIN_CLASS ARGS... of interop/pulsar (a client driver: PulsarDriver, LatencyDriver)
     * in its own JVM on the broker's classpath; output in logs/pulsar-WHAT-N.log.
     */
    public Process driver(String mainClass, String what, List<String> args) throws Exception {
        return driver(mainClass, what, args, "256m");
    }

    private Process driver(String mainClass, String what, List<String> args, String heap) throws Exception {
        List<String> cmd = java(heap, "INFO");
        cmd.add(mainClass);
        cmd.addAll(args);
        String n = "pulsar-" + what + "-" + (++driverCount);
        return Procs.start(new ProcessBuilder(cmd), cluster.runDir.resolve("logs").resolve(n + ".log"),
                cluster.runDir.resolve("pids").resolve(n + ".pid"));
    }

    public String logTail(int lines) {
        try {
            List<String> all = Files.readAllLines(log(), StandardCharsets.UTF_8);
            return String.join("\n", all.subList(Math.max(0, all.size() - lines), all.size()));
        } catch (IOException e) {
            return "(no log: " + e + ")";
        }
    }

    @Override
    public synchronized void close() {
        Procs.stop(proc, 15_000);
    }

    @Override
    public String toString() {
        return name + "(pulsar " + serviceUrl() + ", web " + webPort + ")";
    }
}
