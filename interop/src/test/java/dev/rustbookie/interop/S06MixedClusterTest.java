package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.LongToIntFunction;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeper.DigestType;
import org.apache.bookkeeper.client.LedgerHandle;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * S06 mixed cluster (interop.md §1.7): 2 Java bookies (DbLedgerStorage) + 1 Rust bookie, E3 W3
 * A2; one ledger written with a v3 client and one with a v2 client. Every entry read raw from
 * each bookie is byte-identical (digest header + payload) across the 3 bookies. With both Java
 * bookies stopped, both ledgers read back through the client from the Rust bookie alone; with
 * the Java bookies back and the Rust bookie stopped, from the Java bookies alone;
 * readLastAddConfirmed is the same (N - 2) whichever single side is left.
 * Scaled: 2,500 entries of 16 B..8 KiB per leg (5,000 in all, not 5,000 per leg).
 */
@Tag("smoke")
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class S06MixedClusterTest {
    static final long SEED = 6;
    static final int N = 2500;

    @Test
    void mixedCluster() throws Exception {
        try (Cluster c = new Cluster("s06")) {
            Bookie j1 = c.addJava();
            Bookie j2 = c.addJava();
            RustBookie r = new RustBookie(c, "rust1");
            c.bookies.add(r);
            c.startAll();

            BookKeeper[] writers = {c.client(false), c.client(true)};
            long[] lids = new long[2];
            LongToIntFunction[] sizes = new LongToIntFunction[2];
            for (int leg = 0; leg < 2; leg++) {
                final long seed = SEED + leg;
                sizes[leg] = e -> Payloads.size(seed, 0, e, 16, 8192);
                LedgerHandle lh = writers[leg].createLedger(3, 3, 2, DigestType.CRC32C, Ops.PASSWORD);
                lids[leg] = lh.getId();
                Ops.AckLog acks = new Ops.AckLog(lh.getId());
                // the last add after the others are acked: it carries LAC = N - 2
                Ops.addAsync(lh, seed, 0, N - 1, sizes[leg], acks);
                Ops.addAsync(lh, seed, N - 1, N, sizes[leg], acks);
                acks.save(c);
                assertEquals(N, acks.acked.size());
                Cluster.log("leg " + (leg == 0 ? "v3" : "v2") + ": ledger " + lh.getId() + " written, ensemble "
                        + lh.getLedgerMetadata().getAllEnsembles());
            }

            // raw reads: byte-identical on every bookie
            for (int leg = 0; leg < 2; leg++) {
                Raw raw = c.raw(leg == 1);
                long lid = lids[leg];
                for (long e = 0; e < N; e++) {
                    byte[] first = null;
                    for (Bookie b : c.bookies) {
                        Raw.Result res = raw.read(b.bookieId(), lid, e);
                        assertEquals(0, res.rc(), "raw read of " + lid + "/" + e + " from " + b);
                        byte[] d = res.data();
                        ByteBuffer bb = ByteBuffer.wrap(d);
                        assertEquals(lid, bb.getLong(0), "ledger id in the stored entry");
                        assertEquals(e, bb.getLong(8), "entry id in the stored entry");
                        byte[] want = Payloads.payload(SEED + leg, lid, e, sizes[leg].applyAsInt(e));
                        assertArrayEquals(want, Arrays.copyOfRange(d, d.length - want.length, d.length),
                                "payload stored by " + b + " for " + lid + "/" + e);
                        if (first == null) {
                            first = d;
                        } else {
                            assertArrayEquals(first, d, "entry " + lid + "/" + e + " identical on " + b);
                        }
                    }
                }
                Cluster.log("leg " + leg + ": " + N + " entries identical on all 3 bookies");
            }

            // only the Rust bookie left
            j1.stop();
            j2.stop();
            readAll(c, lids, sizes, "rust only");

            // only the Java bookies left
            j1.start();
            j2.start();
            r.stop();
            readAll(c, lids, sizes, "java only");

            r.start();
            for (BookKeeper w : writers) {
                w.close();
            }
            c.assertHealthy();
        }
    }

    static void readAll(Cluster c, long[] lids, LongToIntFunction[] sizes, String what) throws Exception {
        for (int leg = 0; leg < 2; leg++) {
            for (boolean v2 : List.of(false, true)) {
                BookKeeper bk = c.client(v2);
                LedgerHandle rh = bk.openLedgerNoRecovery(lids[leg], DigestType.CRC32C, Ops.PASSWORD);
                long lac = rh.readLastConfirmed();
                assertEquals(N - 2, lac, what + ": readLastAddConfirmed of ledger " + lids[leg]
                        + " (reader " + (v2 ? "v2" : "v3") + ")");
                Ops.verify(rh, SEED + leg, lids[leg], 0, N - 2, sizes[leg], false);
                Ops.verify(rh, SEED + leg, lids[leg], N - 1, N - 1, sizes[leg], true);
                rh.close();
                bk.close();
            }
            Cluster.log(what + ": ledger " + lids[leg] + " reads back (v3 and v2 readers), LAC " + (N - 2));
        }
        assertTrue(true);
    }
}
