package dev.rustbookie.interop;

import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Our bookie on a stock configuration file (a BookKeeper bk_server.conf or Pulsar's
 * conf/bookkeeper.conf), edited only where an operator edits one: the metadata service, the
 * directories and the ports (and allowLoopback on a host whose name resolves to a loopback
 * address, where a Java bookie needs it too). Its id is the one a Java bookie on the same file
 * and host takes.
 */
public final class StockBookie extends RustBookie {
    public final String stock;
    private final String text;
    private final boolean pulsar;
    /** httpServerPort (the admin server stays as the file says: off); metrics go to httpPort. */
    private final int adminPort = Ports.free();

    public StockBookie(Cluster cluster, String stock, String text, boolean pulsar) {
        super(cluster, stock);
        this.stock = stock;
        this.text = text;
        this.pulsar = pulsar;
    }

    /** The edits: key to value. */
    public Map<String, String> edits() throws IOException {
        Map<String, String> e = new LinkedHashMap<>();
        e.put("zkServers", cluster.zk.servers());
        if (!pulsar) {
            e.put("metadataServiceUri", cluster.metadataServiceUri());
        }
        e.put(pulsar ? "journalDirectory" : "journalDirectories", dir.resolve("journal").toString());
        e.put("ledgerDirectories", dir.resolve("ledgers").toString());
        e.put("bookiePort", Integer.toString(port));
        e.put("httpServerPort", Integer.toString(adminPort));
        e.put("prometheusStatsHttpPort", Integer.toString(httpPort));
        if (StockConfs.javaDefaultHostIsLoopback()) {
            e.put("allowLoopback", "true");
        }
        return e;
    }

    @Override
    protected String confText() throws IOException {
        return StockConfs.edit(text, edits());
    }

    @Override
    public String id() {
        try {
            return StockConfs.javaDefaultHost(false) + ":" + port;
        } catch (IOException e) {
            throw new IllegalStateException("cannot resolve this host's default address", e);
        }
    }
}
