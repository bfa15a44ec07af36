package dev.rustbookie.interop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeperAdmin;
import org.apache.bookkeeper.conf.ClientConfiguration;
import org.apache.bookkeeper.conf.ServerConfiguration;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooKeeper;

/**
 * A ZooKeeper (embedded), a fresh ledgers root initialised with BookKeeperAdmin.initNewCluster,
 * and bookies of either kind, all under one run directory interop/target/runs/NAME-TS/.
 * close() stops everything (and clients made through it); data dirs are removed, logs kept.
 */
public final class Cluster implements AutoCloseable {
    public final String name;
    public final Path runDir;
    public final Zk zk;
    public final String root;
    public final List<Bookie> bookies = new ArrayList<>();
    private final List<AutoCloseable> closeables = new ArrayList<>();
    private final ZooKeeper zkc;

    public Cluster(String name) throws Exception {
        this(name, "/it-" + name.toLowerCase());
    }

    /** A cluster whose ledgers root is {@code root} (a stock file's own, say: /ledgers). */
    public Cluster(String name, String root) throws Exception {
        this.name = name;
        String ts = LocalDateTime.now().format(DateTimeFormatter.ofPattern("yyyyMMdd-HHmmss-SSS"));
        this.runDir = Settings.targetDir().resolve("runs").resolve(name + "-" + ts).toAbsolutePath();
        Files.createDirectories(runDir.resolve("logs"));
        this.zk = new Zk(runDir.resolve("zk"));
        this.root = root;
        CountDownLatch connected = new CountDownLatch(1);
        this.zkc = new ZooKeeper(zk.servers(), 10_000, e -> {
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        });
        if (!connected.await(20, TimeUnit.SECONDS)) {
            throw new IllegalStateException("cannot connect to the embedded ZooKeeper");
        }
        ServerConfiguration sc = new ServerConfiguration();
        sc.setMetadataServiceUri(metadataServiceUri());
        sc.setZkTimeout(10_000);
        if (!BookKeeperAdmin.initNewCluster(sc)) {
            throw new IllegalStateException("initNewCluster refused " + root);
        }
        log("cluster " + name + ": ZooKeeper " + zk.servers() + ", root " + root + ", run dir " + runDir);
    }

    public static void log(String s) {
        System.out.println("[interop " + java.time.LocalTime.now() + "] " + s);
        System.out.flush();
    }

    public String metadataServiceUri() {
        return "zk+hierarchical://" + zk.servers() + root;
    }

    /**
     * The bookie under test: ours, or a Java one when -Dinterop.impl=java (to check a scenario
     * itself against the reference implementation).
     */
    public Bookie addRust() {
        if ("java".equals(System.getProperty("interop.impl", System.getenv("INTEROP_IMPL")))) {
            return addJava();
        }
        RustBookie b = new RustBookie(this, "rust" + (count(false) + 1));
        bookies.add(b);
        return b;
    }

    public JavaBookie addJava() {
        JavaBookie b = new JavaBookie(this, "java" + (count(true) + 1));
        bookies.add(b);
        return b;
    }

    private long count(boolean java) {
        return bookies.stream().filter(b -> b.isJava() == java).count();
    }

    /** Launches all bookies at once and waits for each to register. */
    public void startAll() throws Exception {
        for (Bookie b : bookies) {
            b.launch();
        }
        for (Bookie b : bookies) {
            b.awaitReady(java.time.Duration.ofSeconds(b.isJava() ? 120 : 30));
            log("started " + b);
        }
    }

    /** A v3 (or v2) client with the harness defaults, closed with the cluster. */
    public ClientConfiguration clientConf(boolean v2) {
        ClientConfiguration cc = new ClientConfiguration();
        cc.setMetadataServiceUri(metadataServiceUri());
        cc.setUseV2WireProtocol(v2);
        cc.setAddEntryTimeout(10);
        cc.setReadEntryTimeout(10);
        cc.setZkTimeout(6000);
        return cc;
    }

    public BookKeeper client(boolean v2) throws Exception {
        return client(clientConf(v2));
    }

    public BookKeeper client(ClientConfiguration cc) throws Exception {
        BookKeeper bk = BookKeeper.forConfig(cc).build();
        track(bk);
        return bk;
    }

    public BookKeeperAdmin admin() throws Exception {
        BookKeeperAdmin a = new BookKeeperAdmin(clientConf(false));
        track(a);
        return a;
    }

    public Raw raw(boolean v2) throws Exception {
        Raw r = new Raw(clientConf(v2));
        track(r);
        return r;
    }

    public synchronized <T extends AutoCloseable> T track(T c) {
        closeables.add(c);
        return c;
    }

    public boolean isRegistered(String id) {
        try {
            return zkc.exists(root + "/available/" + id, false) != null
                    || zkc.exists(root + "/available/readonly/" + id, false) != null;
        } catch (Exception e) {
            return false;
        }
    }

    /** The ephemeral owner (ZooKeeper session) of the bookie's registration; 0 when absent. */
    public long registrationOwner(String id) {
        for (String path : new String[] {root + "/available/" + id, root + "/available/readonly/" + id}) {
            try {
                org.apache.zookeeper.data.Stat st = zkc.exists(path, false);
                if (st != null) {
                    return st.getEphemeralOwner();
                }
            } catch (Exception e) {
                // not registered as far as we can tell
            }
        }
        return 0;
    }

    public boolean isRegisteredReadOnly(String id) {
        try {
            return zkc.exists(root + "/available/readonly/" + id, false) != null;
        } catch (Exception e) {
            return false;
        }
    }

    public List<String> children(String path) throws Exception {
        return zkc.getChildren(root + path, false);
    }

    public ZooKeeper zk() {
        return zkc;
    }

    /**
     * The checks of every scenario (docs/interop.md §1.7): no bookie that should be up has exited,
     * each such bookie is still registered, and no log holds a panic / unexpected exception.
     */
    public List<String> problems() {
        List<String> out = new ArrayList<>();
        for (Bookie b : bookies) {
            if (b.expectUp) {
                if (!b.isAlive()) {
                    out.add(b + " exited unexpectedly (code " + b.exitValue() + ")");
                } else if (!isRegistered(b.id())) {
                    out.add(b + " is not registered under " + root + "/available");
                }
            }
            for (String line : b.logProblems()) {
                out.add(b + " log: " + line);
            }
        }
        return out;
    }

    public void assertHealthy() {
        List<String> p = problems();
        if (!p.isEmpty()) {
            throw new AssertionError("cluster checks failed:\n  " + String.join("\n  ", p));
        }
    }

    @Override
    public void close() {
        List<AutoCloseable> cs;
        synchronized (this) {
            cs = new ArrayList<>(closeables);
            closeables.clear();
        }
        java.util.Collections.reverse(cs);
        for (AutoCloseable c : cs) {
            try {
                c.close();
            } catch (Exception e) {
                log("close: " + e);
            }
        }
        for (Bookie b : bookies) {
            try {
                b.stop();
            } catch (Exception e) {
                log("stop " + b + ": " + e);
            }
        }
        try {
            zkc.close();
        } catch (Exception ignored) {
            // ignore
        }
        zk.close();
        for (Bookie b : bookies) {
            deleteTree(b.dir.resolve("journal"));
            deleteTree(b.dir.resolve("ledgers"));
        }
        deleteTree(runDir.resolve("zk"));
    }

    static void deleteTree(Path p) {
        if (!Files.exists(p)) {
            return;
        }
        try (Stream<Path> s = Files.walk(p)) {
            s.sorted(Comparator.reverseOrder()).forEach(f -> {
                try {
                    Files.deleteIfExists(f);
                } catch (IOException ignored) {
                    // best effort
                }
            });
        } catch (IOException ignored) {
            // best effort
        }
    }
}
