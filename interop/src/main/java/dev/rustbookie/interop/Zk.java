package dev.rustbookie.interop;

import java.io.File;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import org.apache.zookeeper.server.ServerCnxnFactory;
import org.apache.zookeeper.server.ZooKeeperServer;

/**
 * An embedded standalone ZooKeeper server on a free loopback port (docs/interop.md §2.2), owned by
 * one test class. tickTime 500 ms so that sessions of 6 s (zkTimeout=6000) are allowed and a
 * killed bookie's ephemeral node expires quickly.
 */
public final class Zk implements AutoCloseable {
    public final int port;
    private final ZooKeeperServer server;
    private final ServerCnxnFactory factory;

    public Zk(Path dir) throws Exception {
        File data = dir.resolve("data").toFile();
        File log = dir.resolve("log").toFile();
        data.mkdirs();
        log.mkdirs();
        System.setProperty("zookeeper.admin.enableServer", "false");
        System.setProperty("zookeeper.4lw.commands.whitelist", "*");
        server = new ZooKeeperServer(data, log, 500);
        server.setMinSessionTimeout(1000);
        server.setMaxSessionTimeout(60000);
        int p = 0;
        ServerCnxnFactory f = null;
        Exception last = null;
        for (int i = 0; i < 5 && f == null; i++) {
            p = Ports.free();
            try {
                f = ServerCnxnFactory.createFactory(new InetSocketAddress("127.0.0.1", p), 0);
                f.startup(server);
            } catch (Exception e) {
                last = e;
                f = null;
            }
        }
        if (f == null) {
            throw new IllegalStateException("ZooKeeper did not start", last);
        }
        factory = f;
        port = p;
    }

    public String servers() {
        return "127.0.0.1:" + port;
    }

    @Override
    public void close() {
        factory.shutdown();
        server.shutdown();
    }
}
