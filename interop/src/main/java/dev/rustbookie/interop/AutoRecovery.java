package dev.rustbookie.interop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * An autorecovery process of its own, Java's or ours, on the cluster's ZooKeeper:
 * <ul>
 * <li>{@link Kind#JAVA}: Apache BookKeeper's daemon (org.apache.bookkeeper.replication.AutoRecoveryMain
 * -c FILE) in its own JVM on the harness classpath, as `bin/bookkeeper autorecovery` runs it:
 * the auditor (elected through ZooKeeper) marks the ledgers of a lost bookie under-replicated,
 * the replication worker copies their fragments to other bookies (recovery adds) and rewrites
 * the ensembles in the ledger metadata;</li>
 * <li>{@link Kind#JAVA_AUDITOR}, {@link Kind#JAVA_WORKER}: one half of it, Java's own
 * AuditorElector or ReplicationWorker class alone ({@link JavaAutorecoveryRole}), for the mixed
 * clusters of issue 45 (Java has no flag for one half);</li>
 * <li>{@link Kind#OURS}, {@link Kind#OURS_AUDITOR}, {@link Kind#OURS_WORKER}: `bookie autorecovery
 * --conf FILE --role both|auditor|worker`.</li>
 * </ul>
 * Tuned to act at once: lostBookieRecoveryDelay=0, a 5 s grace period for open ledgers (Java's
 * default 30 s), 1 s backoff between attempts.
 */
public final class AutoRecovery implements AutoCloseable {
    public enum Kind {
        JAVA, JAVA_AUDITOR, JAVA_WORKER, OURS, OURS_AUDITOR, OURS_WORKER;

        boolean isJava() {
            return this == JAVA || this == JAVA_AUDITOR || this == JAVA_WORKER;
        }
    }

    public final Cluster cluster;
    public final String name;
    public final Kind kind;
    public final Path dir;
    /** The id a Java auditor votes with (Java derives it from bookiePort and the host address). */
    public final int port;
    /** Extra or overriding keys of the daemon's configuration. */
    public final Map<String, String> extraConf = new LinkedHashMap<>();
    private Process proc;

    public AutoRecovery(Cluster cluster, String name) throws IOException {
        this(cluster, name, Kind.JAVA);
    }

    public AutoRecovery(Cluster cluster, String name, Kind kind) throws IOException {
        this.cluster = cluster;
        this.name = name;
        this.kind = kind;
        this.dir = cluster.runDir.resolve(name);
        this.port = Ports.free();
        Files.createDirectories(dir.resolve("tmp"));
    }

    /** The id this process votes with in the auditor election. */
    public String id() {
        return "127.0.0.1:" + port;
    }

    public Path log() {
        return cluster.runDir.resolve("logs").resolve(name + ".log");
    }

    public String logText() throws IOException {
        return Files.exists(log()) ? Files.readString(log()) : "";
    }

    public Map<String, String> conf() {
        Map<String, String> c = new LinkedHashMap<>();
        c.put("metadataServiceUri", cluster.metadataServiceUri());
        c.put("zkTimeout", "10000");
        c.put("bookiePort", Integer.toString(port));
        c.put("advertisedAddress", "127.0.0.1");
        c.put("lostBookieRecoveryDelay", "0");
        c.put("openLedgerRereplicationGracePeriod", "5000");
        c.put("rwRereplicateBackoffMs", "1000");
        c.put("auditorPeriodicBookieCheckInterval", "10");
        // the periodic full checks (ledger, placement, replicas) off: only lost bookies matter here
        c.put("auditorPeriodicCheckInterval", "0");
        c.put("auditorPeriodicPlacementPolicyCheckInterval", "0");
        c.put("auditorPeriodicReplicasCheckInterval", "0");
        c.put("allowLoopback", "true");
        c.put("useHostNameAsBookieID", "false");
        c.put("addEntryTimeout", "10");
        c.put("readEntryTimeout", "10");
        c.putAll(extraConf);
        return c;
    }

    public synchronized void start() throws Exception {
        StringBuilder sb = new StringBuilder("# written by the interop harness for " + name + "\n");
        conf().forEach((k, v) -> sb.append(k).append('=').append(v).append('\n'));
        Path confFile = dir.resolve("autorecovery.conf");
        Files.writeString(confFile, sb.toString());
        List<String> cmd = new ArrayList<>();
        if (kind.isJava()) {
            Path log4j = Settings.log4j2Config(dir, "INFO");
            cmd.add(Settings.javaBin());
            cmd.add("-Xmx256m");
            cmd.add("-XX:+UseSerialGC");
            cmd.addAll(Settings.jvmFlags());
            cmd.addAll(Settings.processFlags(dir, log4j, cluster.runDir));
            cmd.add("-cp");
            cmd.add(Settings.classpath());
            if (kind == Kind.JAVA) {
                cmd.add("org.apache.bookkeeper.replication.AutoRecoveryMain");
                cmd.add("-c");
                cmd.add(confFile.toString());
            } else {
                cmd.add(JavaAutorecoveryRole.class.getName());
                cmd.add(kind == Kind.JAVA_AUDITOR ? "auditor" : "worker");
                cmd.add(confFile.toString());
                cmd.add(id());
            }
        } else {
            cmd.add(Settings.bookieBin().toString());
            cmd.add("autorecovery");
            cmd.add("--conf");
            cmd.add(confFile.toString());
            cmd.add("--role");
            cmd.add(kind == Kind.OURS_AUDITOR ? "auditor" : kind == Kind.OURS_WORKER ? "worker" : "both");
        }
        ProcessBuilder pb = new ProcessBuilder(cmd);
        if (!kind.isJava()) {
            pb.environment().put("RUST_LOG", System.getenv().getOrDefault("RUST_LOG", "info"));
        }
        proc = Procs.start(pb, log(), cluster.runDir.resolve("pids").resolve(name + ".pid"));
        Cluster.log("started autorecovery " + name + " (" + kind + ", pid " + proc.pid() + ")");
    }

    public synchronized boolean isAlive() {
        return proc != null && proc.isAlive();
    }

    /** SIGKILL. */
    public synchronized void kill() {
        Procs.kill(proc);
    }

    @Override
    public synchronized void close() {
        Procs.stop(proc, 10_000);
    }
}
