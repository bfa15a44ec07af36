package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.LongToIntFunction;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeper.DigestType;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.proto.checksum.MacDigestManager;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * F04: a deleted ledger, once collected, is not recreated by a zombie writer (BookKeeper 4.18's
 * LedgerFencedAndDeletedException). One of ours and one Java bookie, E2 W2 A2: ledger F is
 * written, recovered by a second client (fenced on both), deleted; ledger U is written, closed
 * without a fence, deleted; a third ledger stays. After both bookies' garbage collection dropped
 * them (a fence read of F finds no ledger), raw adds to F and to U with the master key are
 * refused as fenced (-101) by both, v3 and v2: the Java bookie remembers U too (its deletion
 * listener runs after its index forgot the ledger, so its fence check fails and marks it). On
 * client lines before 4.18 the Java bookie has no such memory: only ours is checked there.
 */
@Tag("smoke")
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class F04FencedDeletedLedgerTest {
    static final long SEED = 404;
    static final LongToIntFunction SIZE = e -> 1000;

    @Test
    void fencedDeletedLedgerIsNotRecreated() throws Exception {
        try (Cluster c = new Cluster("f04")) {
            Bookie ours = c.addRust();
            Bookie java = c.addJava();
            c.startAll();
            BookKeeper writer = c.client(false);
            LedgerHandle f = writer.createLedger(2, 2, 2, DigestType.CRC32C, Ops.PASSWORD);
            Ops.addSync(f, SEED, 0, 10, SIZE, null);
            LedgerHandle recovered = c.client(false).openLedger(f.getId(), DigestType.CRC32C, Ops.PASSWORD);
            assertEquals(9, recovered.getLastAddConfirmed(), "recovered LAC");
            recovered.close();
            LedgerHandle u = writer.createLedger(2, 2, 2, DigestType.CRC32C, Ops.PASSWORD);
            Ops.addSync(u, SEED, 0, 10, SIZE, null);
            u.close();
            // A ledger that stays: our collector refuses to delete every ledger it holds when
            // ZooKeeper lists none (a wrong ledgers root looks like that).
            LedgerHandle keep = writer.createLedger(2, 2, 2, DigestType.CRC32C, Ops.PASSWORD);
            Ops.addSync(keep, SEED, 0, 10, SIZE, null);
            keep.close();
            writer.deleteLedger(f.getId());
            writer.deleteLedger(u.getId());

            Raw raw = c.raw(false);
            byte[] key = MacDigestManager.genDigest("ledger", Ops.PASSWORD);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
            boolean gone = false;
            while (!gone && System.nanoTime() < deadline) {
                for (Bookie b : c.bookies) {
                    b.http("PUT", "/api/v1/bookie/gc", "{}");
                }
                Thread.sleep(1000);
                // Dropped: a fence read no longer finds the ledger (before, it read entry 0). A
                // Java bookie may still serve plain reads from its location index until it
                // compacts, so the fence read is the sign on both.
                gone = true;
                for (Bookie b : c.bookies) {
                    int rc = raw.fenceRead(b.bookieId(), f.getId(), 0, key);
                    gone &= rc == -7 || rc == -13;
                }
            }
            for (Bookie b : c.bookies) {
                Cluster.log(b + ": fence read of the deleted ledger " + f.getId() + " -> "
                        + raw.fenceRead(b.bookieId(), f.getId(), 0, key));
            }
            assertTrue(gone, "the fenced ledger collected on both bookies within 90 s");

            boolean javaRemembers = hasFencedAndDeleted();
            List<Bookie> checked = javaRemembers ? List.of(ours, java) : List.of(ours);
            if (!javaRemembers) {
                Cluster.log("this Java bookie line has no LedgerFencedAndDeletedException: ours only");
            }
            for (Bookie b : checked) {
                for (boolean v2 : new boolean[] {false, true}) {
                    int rc = c.raw(v2).add(b.bookieId(), f.getId(), key, 10, 9,
                            Payloads.payload(SEED, f.getId(), 10, 100), 0);
                    assertEquals(-101, rc, b + ": " + (v2 ? "v2" : "v3")
                            + " add to the fenced, deleted ledger " + f.getId());
                }
                int rc = c.raw(false).add(b.bookieId(), u.getId(), key, 10, 9,
                        Payloads.payload(SEED, u.getId(), 10, 100), 0);
                assertEquals(-101, rc, b + ": add to the deleted ledger " + u.getId() + " that was never fenced");
                Cluster.log(b + ": the deleted ledgers refused their zombies' adds (-101), v3 and v2");
            }
            c.assertHealthy();
        }
    }

    private static boolean hasFencedAndDeleted() {
        try {
            Class.forName("org.apache.bookkeeper.bookie.BookieException$LedgerFencedAndDeletedException");
            return true;
        } catch (ClassNotFoundException e) {
            return false;
        }
    }
}
