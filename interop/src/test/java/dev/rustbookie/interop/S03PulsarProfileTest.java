package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.LongToIntFunction;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeper.DigestType;
import org.apache.bookkeeper.conf.ClientConfiguration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * S03 Pulsar profile and digest matrix (docs/interop.md §1.7): 3 Rust bookies; clients with the
 * Pulsar settings (v2, 16 channels per bookie, digest autodetection, sticky reads, 30 s timeouts,
 * health checks); S02's procedure for E3W3A2 and E2W2A2 x {CRC32C, CRC32, MAC, DUMMY}, each
 * ledger reopened with a different digest in the open call (autodetection must read it right);
 * no connection resets in the client logs.
 * Not scaled: 2,000 entries of 1 B..64 KiB per ledger, 8 ledgers.
 */
@Tag("smoke")
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class S03PulsarProfileTest {
    static final long SEED = 3;
    static final int N = 2000;

    static ClientConfiguration pulsar(Cluster c) {
        ClientConfiguration cc = c.clientConf(true);
        cc.setEnableDigestTypeAutodetection(true);
        cc.setNumChannelsPerBookie(16);
        cc.setAddEntryTimeout(30);
        cc.setReadEntryTimeout(30);
        cc.setStickyReadsEnabled(true);
        cc.enableBookieHealthCheck();
        cc.setExplictLacInterval(0);
        return cc;
    }

    @Test
    void pulsarProfileDigestMatrix() throws Exception {
        try (Cluster c = new Cluster("s03"); LogCapture log = LogCapture.install()) {
            for (int i = 0; i < 3; i++) {
                c.addRust();
            }
            c.startAll();
            BookKeeper writer = c.client(pulsar(c));
            BookKeeper reader = c.client(pulsar(c));
            DigestType[] digests = {DigestType.CRC32C, DigestType.CRC32, DigestType.MAC, DigestType.DUMMY};
            int[][] quorums = {{3, 3, 2}, {2, 2, 2}};
            int k = 0;
            for (int[] q : quorums) {
                for (int d = 0; d < digests.length; d++) {
                    long seed = SEED + k++;
                    LongToIntFunction size = e -> Payloads.size(seed, 0, e, 1, 64 << 10);
                    DigestType other = digests[(d + 1) % digests.length];
                    S02WriteReadTest.run(c, writer, reader, q[0], q[1], q[2], digests[d], other, N, size, seed);
                }
            }
            // the client's logs: not the embedded ZooKeeper server's (the test's own ZooKeeper
            // may log a client closing its session socket as an "Unexpected exception" at WARN:
            // seen with ZooKeeper 3.8.0, the 4.15 line's)
            List<String> resets = log.matching("connection reset", "reset by peer", "Unexpected exception").stream()
                    .filter(l -> !l.contains(" org.apache.zookeeper.server.")).toList();
            assertTrue(resets.isEmpty(), "no connection resets in client logs:\n  " + String.join("\n  ", resets));
            c.assertHealthy();
        }
    }
}
