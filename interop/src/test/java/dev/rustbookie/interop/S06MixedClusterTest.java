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
 * S06 mixed cluster (docs/interop.md §1.7): 2 Java bookies (DbLedgerStorage) + 1 Rust bookie, E3 W3
 * A2; one ledger written with a v3 client and one with a v2 client. Every entry read raw from
 * each bookie is byte-identical (digest header + payload) across the 3 bookies, and each bookie's
 * own LAC (its last entry, read raw) is N - 2. With both Java bookies stopped, both ledgers read
 * back through the client from the Rust bookie alone; with the Java bookies back and the Rust
 * bookie stopped, fresh v3 and v2 readers see readLastAddConfirmed N - 2 and read everything from
 * the Java bookies alone; once the ledgers are closed, fresh v3 and v2 readers read them from the
 * Rust bookie alone. Deviation: the Java client cannot read an unclosed E3 W3 A2 ledger's LAC
 * from 1 of 3 bookies (ReadLastConfirmedOp / PendingReadLacOp need W - A + 1 = 2 answers; an
 * all-Java cluster fails the same way), so "LAC agrees whichever single bookie is left" is checked
 * on each bookie's own answer (raw read of entry -1), and the unclosed ledgers are read from the
 * Rust bookie alone through the writers' handles.
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
            Bookie r = c.addRust();
            c.startAll();

            BookKeeper[] writers = {c.client(false), c.client(true)};
            long[] lids = new long[2];
            LedgerHandle[] whs = new LedgerHandle[2];
            LongToIntFunction[] sizes = new LongToIntFunction[2];
            for (int leg = 0; leg < 2; leg++) {
                final long seed = SEED + leg;
                sizes[leg] = e -> Payloads.size(seed, 0, e, 16, 8192);
                LedgerHandle lh = writers[leg].createLedger(3, 3, 2, DigestType.CRC32C, Ops.PASSWORD);
                lids[leg] = lh.getId();
                whs[leg] = lh;
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

            // what each bookie itself says the LAC is (its last entry, read as entry -1): N - 2
            for (int leg = 0; leg < 2; leg++) {
                for (Bookie b : c.bookies) {
                    assertEquals(N - 2, rawLac(c.raw(false), b, lids[leg]), "LAC stored by " + b);
                }
            }

            // only the Rust bookie left. No client can read an unclosed E3 W3 A2 ledger's LAC from
            // 1 of 3 bookies (the LAC read needs W - A + 1 = 2 answers, with Java bookies too), so
            // the writers' own handles (v3 and v2, LAC N - 1) read everything back from it.
            j1.stop();
            j2.stop();
            for (int leg = 0; leg < 2; leg++) {
                Ops.verify(whs[leg], SEED + leg, lids[leg], 0, N - 1, sizes[leg], false);
                Cluster.log("rust only: ledger " + lids[leg] + " reads back through its writer (v2=" + (leg == 1) + ")");
            }

            // only the Java bookies left: v3 and v2 clients
            j1.start();
            j2.start();
            r.stop();
            readAll(c, lids, sizes, "java only", List.of(false, true));

            // the ledgers closed (metadata only), then fresh v3 and v2 clients read the closed
            // ledgers from the Rust bookie alone
            for (LedgerHandle wh : whs) {
                wh.close();
            }
            for (BookKeeper w : writers) {
                w.close();
            }
            r.start();
            j1.stop();
            j2.stop();
            for (int leg = 0; leg < 2; leg++) {
                for (boolean v2 : List.of(false, true)) {
                    BookKeeper bk = c.client(v2);
                    LedgerHandle rh = bk.openLedger(lids[leg], DigestType.CRC32C, Ops.PASSWORD);
                    assertEquals(N - 1, rh.getLastAddConfirmed(), "closed ledger's last entry");
                    Ops.verify(rh, SEED + leg, lids[leg], 0, N - 1, sizes[leg], false);
                    rh.close();
                }
                Cluster.log("rust only: closed ledger " + lids[leg] + " reads back (v3 and v2 clients)");
            }
            j1.start();
            j2.start();
            c.assertHealthy();
        }
    }

    /** The LAC piggy-backed on the last entry a bookie holds (READ_ENTRY of entry -1). */
    static long rawLac(Raw raw, Bookie b, long lid) throws Exception {
        Raw.Result res = raw.read(b.bookieId(), lid, -1);
        assertEquals(0, res.rc(), "raw read of the last entry of " + lid + " from " + b);
        return ByteBuffer.wrap(res.data()).getLong(16);
    }

    static void readAll(Cluster c, long[] lids, LongToIntFunction[] sizes, String what, List<Boolean> protocols)
            throws Exception {
        for (int leg = 0; leg < 2; leg++) {
            for (boolean v2 : protocols) {
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
            Cluster.log(what + ": ledger " + lids[leg] + " reads back, LAC " + (N - 2) + " (readers v2=" + protocols + ")");
        }
    }
}
