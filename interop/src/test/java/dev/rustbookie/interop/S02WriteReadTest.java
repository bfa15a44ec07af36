package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import java.util.function.LongToIntFunction;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeper.DigestType;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.client.api.LedgerMetadata;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * S02 basic write and read (docs/interop.md §1.7): 3 Rust bookies, E3 W3 A2, v3, CRC32C; 10,000
 * entries of 1 B..64 KiB (fixed seed), the first half pipelined, the second half synchronous;
 * a reader opened without recovery before close sees LAC 9998; after close the metadata is
 * CLOSED with lastEntryId 9999 and the summed length; every entry reads back byte-identical.
 * Not scaled down.
 */
@Tag("smoke")
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class S02WriteReadTest {
    static final long SEED = 2;
    static final int N = 10_000;

    @Test
    void writeAndRead() throws Exception {
        try (Cluster c = new Cluster("s02")) {
            for (int i = 0; i < 3; i++) {
                c.addRust();
            }
            c.startAll();
            run(c, c.client(false), c.client(false), 3, 3, 2, DigestType.CRC32C, DigestType.CRC32C, N,
                    e -> Payloads.size(SEED, 0, e, 1, 64 << 10), SEED);
            c.assertHealthy();
        }
    }

    /**
     * The S02 procedure (shared with S03): returns the ledger id. The reader opens with
     * {@code readDigest} (a different digest exercises autodetection).
     */
    static long run(Cluster c, BookKeeper writer, BookKeeper reader, int e, int w, int a, DigestType digest,
            DigestType readDigest, int n, LongToIntFunction size, long seed) throws Exception {
        long t0 = System.nanoTime();
        LedgerHandle lh = writer.createLedger(e, w, a, digest, Ops.PASSWORD);
        long lid = lh.getId();
        Ops.AckLog acks = new Ops.AckLog(lid);
        int half = n / 2;
        Ops.addAsync(lh, seed, 0, half, size, acks);
        Ops.addSync(lh, seed, half, n, size, acks);
        assertEquals(n, acks.acked.size(), "all adds acked rc=0");
        acks.save(c);
        long t1 = System.nanoTime();

        // a fresh reader before close: LAC lags by one
        LedgerHandle early = reader.openLedgerNoRecovery(lid, readDigest, Ops.PASSWORD);
        assertEquals(n - 2, early.readLastConfirmed(), "readLastAddConfirmed of a fresh reader before close");
        early.close();

        lh.close();
        long total = Ops.sum(0, n, size);
        assertEquals(total, lh.getLength(), "writer's length");

        LedgerHandle rh = reader.openLedger(lid, readDigest, Ops.PASSWORD);
        LedgerMetadata md = rh.getLedgerMetadata();
        assertTrue(md.isClosed(), "metadata CLOSED after close()");
        assertEquals(n - 1, md.getLastEntryId(), "lastEntryId");
        assertEquals(total, md.getLength(), "length = sum of sizes");
        Ops.verify(rh, seed, lid, 0, n - 1, size, false);
        rh.close();
        long t2 = System.nanoTime();
        Cluster.log(String.format("ledger %d E%dW%dA%d %s (read as %s): %d entries, %d bytes: write %.1f s, read %.1f s",
                lid, e, w, a, digest, readDigest, n, total, (t1 - t0) / 1e9, (t2 - t1) / 1e9));
        return lid;
    }
}
