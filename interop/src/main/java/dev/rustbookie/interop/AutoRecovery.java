package dev.rustbookie.interop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Apache BookKeeper's autorecovery daemon (org.apache.bookkeeper.replication.AutoRecoveryMain
 * -c FILE) in its own JVM on the harness classpath, as `bin/bookkeeper autorecovery` runs it:
 * the auditor (elected through ZooKeeper) marks the ledgers of a lost bookie under-replicated,
 * the replication worker copies their fragments to other bookies (recovery adds) and rewrites
 * the ensembles in the ledger metadata. Tuned to act at once: lostBookieRecoveryDelay=0, a
 * 5 s grace period for open ledgers (Java's default 30 s), 1 s backoff between attempts.
 */
public final class AutoRecovery implements AutoCloseable {
    public final Cluster cluster;
    public final String name;
    public final Path dir;
    /** Extra or overriding keys of the daemon's configuration. */
    public final Map<String, String> extraConf = new LinkedHashMap<>();
    private Process proc;

    public AutoRecovery(Cluster cluster, String name) throws IOException {
        this.cluster = cluster;
        this.name = name;
        this.dir = cluster.runDir.resolve(name);
        Files.createDirectories(dir.resolve("tmp"));
    }

    public Path log() {
        return cluster.runDir.resolve("logs").resolve(name + ".log");
    }

    public Map<String, String> conf() {
        Map<String, String> c = new LinkedHashMap<>();
        c.put("metadataServiceUri", cluster.metadataServiceUri());
        c.put("zkTimeout", "10000");
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
        Path log4j = Settings.log4j2Config(dir, "INFO");
        List<String> cmd = new ArrayList<>();
        cmd.add(Settings.javaBin());
        cmd.add("-Xmx256m");
        cmd.add("-XX:+UseSerialGC");
        cmd.addAll(Settings.jvmFlags());
        cmd.add("-Djava.io.tmpdir=" + dir.resolve("tmp"));
        cmd.add("-Dlog4j.configurationFile=" + log4j);
        cmd.add("-Dlog4j2.configurationFile=" + log4j);
        cmd.add("-Dinterop.run=" + cluster.runDir);
        cmd.add("-cp");
        cmd.add(Settings.classpath());
        cmd.add("org.apache.bookkeeper.replication.AutoRecoveryMain");
        cmd.add("-c");
        cmd.add(confFile.toString());
        proc = Procs.start(new ProcessBuilder(cmd), log(), cluster.runDir.resolve("pids").resolve(name + ".pid"));
        Cluster.log("started autorecovery " + name + " (pid " + proc.pid() + ")");
    }

    public synchronized boolean isAlive() {
        return proc != null && proc.isAlive();
    }

    @Override
    public synchronized void close() {
        Procs.stop(proc, 10_000);
    }
}
