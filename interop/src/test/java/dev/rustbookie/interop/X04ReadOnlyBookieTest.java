package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.LongToIntFunction;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeper.DigestType;
import org.apache.bookkeeper.client.BookKeeperAdmin;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.net.BookieId;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Extra: a bookie switched to read-only through the admin API (PUT /api/v1/bookie/state/readonly)
 * while a ledger it belongs to is being written. It moves to available/readonly (the Java admin
 * sees it there), refuses raw adds with -104 (v3 and v2), the writer replaces it by ensemble
 * change without a failed add, every entry still reads back (the read-only bookie serves its
 * part), and after PUT readOnly=false it is writable again.
 */
@Tag("smoke")
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class X04ReadOnlyBookieTest {
    static final long SEED = 104;
    static final LongToIntFunction SIZE = e -> Payloads.size(SEED, 0, e, 10, 4000);

    @Test
    void readOnlyBookie() throws Exception {
        try (Cluster c = new Cluster("x04")) {
            for (int i = 0; i < 3; i++) {
                c.addRust();
            }
            c.startAll();
            BookKeeper bk = c.client(false);
            LedgerHandle lh = bk.createLedger(3, 3, 2, DigestType.CRC32C, Ops.PASSWORD);
            long lid = lh.getId();
            Ops.addAsync(lh, SEED, 0, 100, SIZE, null);

            Bookie spare = c.addRust();
            spare.start();
            Bookie ro = c.bookies.get(0);
            assertEquals(200, ro.setReadOnly(true), "PUT state/readonly {readOnly:true}");
            BookKeeperAdmin admin = c.admin();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (!(admin.getReadOnlyBookies().contains(ro.bookieId())
                    && !admin.getAvailableBookies().contains(ro.bookieId())) && System.nanoTime() < deadline) {
                Thread.sleep(100);
            }
            assertTrue(admin.getReadOnlyBookies().contains(ro.bookieId()), ro + " listed read-only");
            assertFalse(admin.getAvailableBookies().contains(ro.bookieId()), ro + " not listed writable");
            String state = ro.http("GET", "/api/v1/bookie/state/readonly", null).body();
            assertTrue(state.replace(" ", "").contains("\"readOnly\":true"), "GET state/readonly: " + state);

            for (boolean v2 : List.of(false, true)) {
                if (v2 && !ClientLine.atLeast(4, 16)) {
                    // the 4.14 and 4.15 clients never complete a v2 add answered EREADONLY: the
                    // add times out (-23) after addEntryTimeout, with 4.14.7 / 4.15.4 Java
                    // bookies as with ours
                    ClientLine.skipPart("X04 v2 raw add to the read-only bookie: the 4.14/4.15 client times out (-23)"
                            + " on a v2 EREADONLY answer, Java bookies too; the v3 leg checks -104");
                    continue;
                }
                int rc = c.raw(v2).add(ro.bookieId(), lid + 1000, Ops.PASSWORD, 0, -1,
                        Payloads.payload(SEED, lid + 1000, 0, 10), 0);
                assertEquals(-104, rc, (v2 ? "v2" : "v3") + " raw add to the read-only bookie");
            }

            // the writer goes on: the read-only bookie is replaced, no add fails
            Ops.addAsync(lh, SEED, 100, 200, SIZE, null);
            // With an ack quorum of 2 the adds can all complete before the client has written the
            // ensemble change the read-only bookie's EREADONLY set off: wait for it.
            long changeDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (lh.getLedgerMetadata().getAllEnsembles().size() < 2 && System.nanoTime() < changeDeadline) {
                Thread.sleep(50);
            }
            List<List<BookieId>> ensembles = List.copyOf(lh.getLedgerMetadata().getAllEnsembles().values());
            Cluster.log("ensembles: " + lh.getLedgerMetadata().getAllEnsembles());
            List<BookieId> last = ensembles.get(ensembles.size() - 1);
            assertTrue(ensembles.size() >= 2, "an ensemble change happened");
            assertFalse(last.contains(ro.bookieId()), "the read-only bookie left the ensemble");
            assertTrue(last.contains(spare.bookieId()), "the spare bookie joined the ensemble");
            lh.close();
            LedgerHandle rh = c.client(false).openLedger(lid, DigestType.CRC32C, Ops.PASSWORD);
            Ops.verify(rh, SEED, lid, 0, 199, SIZE, false);

            // back to writable
            assertEquals(200, ro.setReadOnly(false), "PUT state/readonly {readOnly:false}");
            deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (!admin.getAvailableBookies().contains(ro.bookieId()) && System.nanoTime() < deadline) {
                Thread.sleep(100);
            }
            assertTrue(admin.getAvailableBookies().contains(ro.bookieId()), ro + " writable again");
            assertFalse(admin.getReadOnlyBookies().contains(ro.bookieId()), ro + " no longer read-only");
            int rc = c.raw(false).add(ro.bookieId(), lid + 2000, Ops.PASSWORD, 0, -1,
                    Payloads.payload(SEED, lid + 2000, 0, 10), 0);
            assertEquals(0, rc, "raw add to the bookie once writable again");
            c.assertHealthy();
        }
    }
}
