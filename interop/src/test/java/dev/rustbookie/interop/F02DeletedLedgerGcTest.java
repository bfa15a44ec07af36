package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import java.util.function.LongToIntFunction;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeper.DigestType;
import org.apache.bookkeeper.client.LedgerHandle;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Full tier: a deleted ledger collected. 3 Rust bookies, E3 W3 A2; ledgers A and B of 500 x
 * 4 KiB, closed; A deleted through the client (metadata only); PUT /api/v1/bookie/gc on every
 * bookie. Within 60 s no bookie serves A any more (a raw read of A's entries answers
 * NoSuchLedger or NoSuchEntry) and B still reads back byte-identical through the client.
 */
@Tag("full")
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class F02DeletedLedgerGcTest {
    static final long SEED = 202;
    static final LongToIntFunction SIZE = e -> 4096;

    @Test
    void deletedLedgerIsCollected() throws Exception {
        try (Cluster c = new Cluster("f02")) {
            for (int i = 0; i < 3; i++) {
                c.addRust();
            }
            c.startAll();
            BookKeeper bk = c.client(false);
            LedgerHandle a = bk.createLedger(3, 3, 2, DigestType.CRC32C, Ops.PASSWORD);
            LedgerHandle b = bk.createLedger(3, 3, 2, DigestType.CRC32C, Ops.PASSWORD);
            Ops.addAsync(a, SEED, 0, 500, SIZE, null);
            Ops.addAsync(b, SEED, 0, 500, SIZE, null);
            a.close();
            b.close();
            long aid = a.getId();
            Raw raw = c.raw(false);
            for (Bookie x : c.bookies) {
                assertEquals(0, raw.read(x.bookieId(), aid, 0).rc(), "A readable on " + x + " before the delete");
            }
            bk.deleteLedger(aid);
            for (Bookie x : c.bookies) {
                int status = x.http("PUT", "/api/v1/bookie/gc", "{}").statusCode();
                assertEquals(200, status, "PUT /api/v1/bookie/gc on " + x);
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            boolean gone = false;
            while (!gone && System.nanoTime() < deadline) {
                gone = true;
                for (Bookie x : c.bookies) {
                    int rc0 = raw.read(x.bookieId(), aid, 0).rc();
                    int rcLast = raw.read(x.bookieId(), aid, 499).rc();
                    if (!((rc0 == -7 || rc0 == -13) && (rcLast == -7 || rcLast == -13))) {
                        gone = false;
                    }
                }
                if (!gone) {
                    Thread.sleep(500);
                }
            }
            for (Bookie x : c.bookies) {
                Cluster.log(x + ": read of deleted ledger " + aid + " -> " + raw.read(x.bookieId(), aid, 0).rc()
                        + "; list_ledgers " + x.http("GET", "/api/v1/bookie/list_ledgers", null).body());
            }
            assertTrue(gone, "every bookie dropped the deleted ledger " + aid + " within 60 s of a forced GC");
            LedgerHandle rh = c.client(false).openLedger(b.getId(), DigestType.CRC32C, Ops.PASSWORD);
            Ops.verify(rh, SEED, b.getId(), 0, 499, SIZE, false);
            c.assertHealthy();
        }
    }
}
