package dev.rustbookie.interop;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A real Apache BookKeeper bookie in its own JVM: org.apache.bookkeeper.server.Main --conf FILE,
 * DbLedgerStorage with small caches (docs/interop.md §3.2), JVM flags of §1.3/§3.1 with a modest heap
 * for this 2-core machine, java.io.tmpdir (RocksDB's .so) in the bookie's own dir.
 */
public final class JavaBookie extends Bookie {
    public String heap = "512m";
    public String direct = "512m";

    public JavaBookie(Cluster cluster, String name) {
        super(cluster, name);
    }

    @Override
    public boolean isJava() {
        return true;
    }

    @Override
    protected Map<String, String> conf() {
        Map<String, String> c = super.conf();
        c.put("ledgerStorageClass", "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage");
        c.put("dbStorage_writeCacheMaxSizeMb", "32");
        c.put("dbStorage_readAheadCacheMaxSizeMb", "32");
        c.put("dbStorage_rocksDB_blockCacheSize", "16777216");
        c.put("logSizeLimit", "67108864");
        c.put("httpServerClass", "org.apache.bookkeeper.http.vertx.VertxHttpServer");
        c.put("serverNumIOThreads", "2");
        c.put("numReadWorkerThreads", "2");
        c.put("numHighPriorityWorkerThreads", "2");
        return c;
    }

    @Override
    protected List<String> command() throws IOException {
        Path log4j = Settings.log4j2Config(dir, "INFO");
        List<String> cmd = new ArrayList<>();
        cmd.add(Settings.javaBin());
        cmd.add("-Xms" + heap);
        cmd.add("-Xmx" + heap);
        cmd.add("-XX:MaxDirectMemorySize=" + direct);
        cmd.add("-XX:+UseG1GC");
        cmd.add("-XX:MaxGCPauseMillis=10");
        cmd.add("-XX:+ParallelRefProcEnabled");
        cmd.add("-XX:+DisableExplicitGC");
        cmd.addAll(Settings.jvmFlags());
        cmd.addAll(Settings.processFlags(dir, log4j, cluster.runDir));
        cmd.add("-cp");
        cmd.add(Settings.classpath());
        cmd.add("org.apache.bookkeeper.server.Main");
        cmd.add("--conf");
        cmd.add(confFile().toString());
        return cmd;
    }

    @Override
    protected boolean readyExtra() {
        try {
            return http("GET", "/api/v1/bookie/is_ready", null).statusCode() == 200;
        } catch (Exception e) {
            return false;
        }
    }
}
