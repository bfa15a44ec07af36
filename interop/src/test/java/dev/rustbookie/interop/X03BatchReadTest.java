package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Enumeration;
import java.util.concurrent.TimeUnit;
import java.util.function.LongToIntFunction;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeper.DigestType;
import org.apache.bookkeeper.client.LedgerEntry;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.conf.ClientConfiguration;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Extra: batch reads (BATCH_READ_ENTRY, v2 only, used when ensemble size = write quorum).
 * 3 Rust bookies, E3 W3 A2, 1,000 entries of 100 B..2 KiB; a v2 client with batch reads reads
 * the ledger in batches of at most 100 entries and 64 KiB, then batches limited by the size;
 * every entry is byte-identical, in order, and the bookies counted batch-read requests.
 * Batch reads came with the 4.17 client (ClientConfiguration.setBatchReadEnabled,
 * LedgerHandle.batchReadEntries): called by reflection, and skipped on older client lines.
 */
@Tag("smoke")
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class X03BatchReadTest {
    static final long SEED = 103;
    static final int N = 1000;
    static final LongToIntFunction SIZE = e -> Payloads.size(SEED, 0, e, 100, 2048);

    @Test
    void batchReadV2() throws Exception {
        Assumptions.assumeTrue(ClientLine.hasMethod(LedgerHandle.class, "batchReadEntries", long.class, int.class,
                long.class), "batch reads (BATCH_READ_ENTRY) are not in the " + ClientLine.version()
                + " client: they came with 4.17");
        try (Cluster c = new Cluster("x03")) {
            for (int i = 0; i < 3; i++) {
                c.addRust();
            }
            c.startAll();
            BookKeeper w = c.client(true);
            LedgerHandle lh = w.createLedger(3, 3, 2, DigestType.CRC32C, Ops.PASSWORD);
            long lid = lh.getId();
            Ops.addAsync(lh, SEED, 0, N, SIZE, null);
            lh.close();

            long before = S12LongPollLacTest.readRequests(c);
            long batchBefore = batchRequests(c);
            ClientConfiguration cc = c.clientConf(true);
            ClientConfiguration.class.getMethod("setBatchReadEnabled", boolean.class).invoke(cc, true);
            BookKeeper r = c.client(cc);
            LedgerHandle rh = r.openLedger(lid, DigestType.CRC32C, Ops.PASSWORD);
            long next = 0;
            int batches = 0;
            while (next < N) {
                Enumeration<LedgerEntry> en = batchRead(rh, next, 100, 64 << 10);
                long n0 = next;
                long bytes = 0;
                while (en.hasMoreElements()) {
                    LedgerEntry le = en.nextElement();
                    assertEquals(next, le.getEntryId(), "batch entries in order");
                    assertArrayEquals(Payloads.payload(SEED, lid, next, SIZE.applyAsInt(next)), le.getEntry(),
                            "payload of " + next);
                    bytes += le.getLength();
                    next++;
                }
                assertTrue(next > n0, "a batch returns at least one entry");
                assertTrue(next - n0 <= 100, "a batch returns at most maxCount entries");
                batches++;
            }
            // a small size limit: fewer entries per batch, still in order
            Enumeration<LedgerEntry> en = batchRead(rh, 0, 100, 4096);
            int got = 0;
            while (en.hasMoreElements()) {
                assertEquals(got, en.nextElement().getEntryId());
                got++;
            }
            assertTrue(got >= 1 && got < 100, "a 4 KiB batch returns a few entries (" + got + ")");
            long batchAfter = batchRequests(c);
            Cluster.log("batches " + batches + "; bookie BATCH_READ_ENTRY requests " + (batchAfter - batchBefore)
                    + ", read requests " + (S12LongPollLacTest.readRequests(c) - before));
            if (batchBefore >= 0) {
                assertTrue(batchAfter - batchBefore >= batches, "the bookies served batch-read requests");
            }
            c.assertHealthy();
        }
    }

    @SuppressWarnings("unchecked")
    static Enumeration<LedgerEntry> batchRead(LedgerHandle rh, long first, int maxCount, long maxSize)
            throws Exception {
        try {
            return (Enumeration<LedgerEntry>) LedgerHandle.class
                    .getMethod("batchReadEntries", long.class, int.class, long.class)
                    .invoke(rh, first, maxCount, maxSize);
        } catch (java.lang.reflect.InvocationTargetException e) {
            throw e.getCause() instanceof Exception ex ? ex : e;
        }
    }

    static long batchRequests(Cluster c) throws Exception {
        long sum = 0;
        for (Bookie b : c.bookies) {
            if (b.isJava()) {
                return -1;
            }
            for (String line : b.http("GET", "/metrics", null).body().split("\n")) {
                if (line.startsWith("bookkeeper_server_BATCH_READ_ENTRY_REQUEST_count")) {
                    sum += (long) Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
                }
            }
        }
        return sum;
    }
}
