package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Enumeration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.LongToIntFunction;
import org.apache.bookkeeper.client.LedgerEntry;
import org.apache.bookkeeper.client.LedgerHandle;

/** Writing and checking entries the way every scenario does (docs/interop.md §1.7 checks 1). */
final class Ops {
    private Ops() {}

    static final byte[] PASSWORD = "interop-pw".getBytes(StandardCharsets.UTF_8);

    /** Acknowledged entries: id -> sha256 of the payload (written to RUN/acks-LEDGER.tsv). */
    static final class AckLog {
        final long ledgerId;
        final Map<Long, String> acked = new ConcurrentHashMap<>();

        AckLog(long ledgerId) {
            this.ledgerId = ledgerId;
        }

        void ack(long entryId, byte[] payload) {
            acked.put(entryId, Payloads.sha256(payload));
        }

        long maxAcked() {
            return acked.keySet().stream().mapToLong(Long::longValue).max().orElse(-1);
        }

        void save(Cluster c) throws Exception {
            StringBuilder sb = new StringBuilder();
            acked.entrySet().stream().sorted(Map.Entry.comparingByKey()).forEach(e ->
                    sb.append(ledgerId).append('\t').append(e.getKey()).append('\t').append(e.getValue()).append('\n'));
            Path p = c.runDir.resolve("acks-" + ledgerId + ".tsv");
            Files.writeString(p, sb.toString());
        }
    }

    /** Pipelined asyncAddEntry of entries [from, to); waits for all; asserts rc=0 and ids. */
    static void addAsync(LedgerHandle lh, long seed, long from, long to, LongToIntFunction size, AckLog log)
            throws Exception {
        CompletableFuture<?>[] fs = new CompletableFuture<?>[(int) (to - from)];
        for (long e = from; e < to; e++) {
            byte[] p = Payloads.payload(seed, lh.getId(), e, size.applyAsInt(e));
            CompletableFuture<Long> f = new CompletableFuture<>();
            fs[(int) (e - from)] = f;
            final long expected = e;
            lh.asyncAddEntry(p, (rc, h, eid, ctx) -> {
                if (rc != 0) {
                    f.completeExceptionally(new AssertionError("add of entry " + expected + " failed rc=" + rc));
                } else if (eid != expected) {
                    f.completeExceptionally(new AssertionError("add acked as " + eid + ", expected " + expected));
                } else {
                    if (log != null) {
                        log.ack(eid, p);
                    }
                    f.complete(eid);
                }
            }, null);
        }
        CompletableFuture.allOf(fs).get(300, TimeUnit.SECONDS);
    }

    /** Synchronous addEntry of [from, to). */
    static void addSync(LedgerHandle lh, long seed, long from, long to, LongToIntFunction size, AckLog log)
            throws Exception {
        for (long e = from; e < to; e++) {
            byte[] p = Payloads.payload(seed, lh.getId(), e, size.applyAsInt(e));
            long id = lh.addEntry(p);
            assertEquals(e, id, "entry id of a sync add");
            if (log != null) {
                log.ack(id, p);
            }
        }
    }

    static long sum(long from, long to, LongToIntFunction size) {
        long s = 0;
        for (long e = from; e < to; e++) {
            s += size.applyAsInt(e);
        }
        return s;
    }

    /** Reads [from, to] in chunks (readEntries or readUnconfirmedEntries) and compares payloads. */
    static void verify(LedgerHandle rh, long seed, long ledgerId, long from, long to, LongToIntFunction size,
            boolean unconfirmed) throws Exception {
        long chunk = 200;
        for (long a = from; a <= to; a += chunk) {
            long b = Math.min(to, a + chunk - 1);
            Enumeration<LedgerEntry> en = unconfirmed ? rh.readUnconfirmedEntries(a, b) : rh.readEntries(a, b);
            long expect = a;
            while (en.hasMoreElements()) {
                LedgerEntry le = en.nextElement();
                assertEquals(expect, le.getEntryId(), "entry order");
                byte[] want = Payloads.payload(seed, ledgerId, expect, size.applyAsInt(expect));
                assertArrayEquals(want, le.getEntry(), "payload of entry " + expect + " of ledger " + ledgerId);
                expect++;
            }
            assertEquals(b + 1, expect, "entries " + a + ".." + b + " all returned");
        }
    }
}
