package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeper.DigestType;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.client.api.LastConfirmedAndEntry;
import org.apache.bookkeeper.conf.ClientConfiguration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * S12 long-poll LAC and explicit LAC (docs/interop.md §1.7): 3 Rust bookies, E3 W3 A2; a writer adds
 * one entry per 100 ms; a v3 reader loops readLastAddConfirmedAndEntry(next, 5000, false).
 * Phase 1: 60 entries, an 8 s pause, 10 more: every entry up to the writer's LAC arrives in
 * order without gaps or duplicates, p99 of (reader got k) - (writer's ack of k+1) < 150 ms,
 * bookie read requests <= 2x entries, and during the pause a call returns after 5 s +- 1 s with
 * the LAC unchanged and no entry (the window is 4..7.5 s: with the client's default
 * firstSpeculativeReadLACTimeout of 1.5 s a second long poll goes to another bookie, and the call
 * returns when both time out, after 6.5 s, with Java bookies as with ours). Phase 2: writer with explicitLacInterval=100 ms: after it
 * stops, its last entry is visible within 1 s (READ_LAC and the long poll). v2 leg: the same
 * loop still delivers every entry by polling (v2 has no long poll: the call reports the LAC and
 * the reader reads up to it).
 * Scaled: 70 + 30 + 30 entries instead of an open-ended run.
 */
@Tag("smoke")
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class S12LongPollLacTest {
    static final long SEED = 12;

    /** What the reader saw. */
    static final class Reader extends Thread {
        final LedgerHandle rh;
        final long seed;
        final boolean v2;
        final ConcurrentHashMap<Long, Long> received = new ConcurrentHashMap<>();
        final List<long[]> emptyCalls = new ArrayList<>(); // {startNanos, durationNanos, lac}
        final AtomicBoolean stop = new AtomicBoolean();
        final AtomicLong next = new AtomicLong(0);
        volatile Throwable failure;

        Reader(LedgerHandle rh, long seed, boolean v2) {
            super("reader");
            this.rh = rh;
            this.seed = seed;
            this.v2 = v2;
        }

        @Override
        public void run() {
            try {
                while (!stop.get()) {
                    long n = next.get();
                    long t0 = System.nanoTime();
                    LastConfirmedAndEntry r = rh.readLastAddConfirmedAndEntry(n, 5000, false);
                    long t1 = System.nanoTime();
                    try {
                        if (r.hasEntry()) {
                            long id = r.getEntry().getEntryId();
                            if (id != n) {
                                throw new AssertionError("reader asked for " + n + " and got " + id);
                            }
                            if (received.putIfAbsent(id, t1) != null) {
                                throw new AssertionError("entry " + id + " delivered twice");
                            }
                            byte[] want = Payloads.payload(seed, rh.getId(), id, 100);
                            assertArrayEquals(want, r.getEntry().getEntryBytes(), "payload of " + id);
                            next.incrementAndGet();
                        } else {
                            synchronized (emptyCalls) {
                                emptyCalls.add(new long[] {t0, t1 - t0, r.getLastAddConfirmed()});
                            }
                            if (v2) {
                                // v2 drops the long-poll fields: the call is a plain read of
                                // `n`, whose own piggy-backed LAC is n - 1, so it never hands
                                // out entry n and reports LAC n - 1 at best (the same with Java
                                // bookies). A polling reader asks for the LAC (READ_ENTRY of
                                // entry -1 on v2) and reads up to it.
                                long lac = Math.max(r.getLastAddConfirmed(), rh.readLastConfirmed());
                                if (lac >= n) {
                                    var en = rh.readUnconfirmedEntries(n, lac);
                                    while (en.hasMoreElements()) {
                                        var le = en.nextElement();
                                        long id = le.getEntryId();
                                        if (id != next.get()) {
                                            throw new AssertionError("v2 reader expected " + next.get() + ", got " + id);
                                        }
                                        received.put(id, System.nanoTime());
                                        assertArrayEquals(Payloads.payload(seed, rh.getId(), id, 100), le.getEntry(),
                                                "payload of " + id);
                                        next.incrementAndGet();
                                    }
                                } else {
                                    Thread.sleep(20);
                                }
                            }
                        }
                    } finally {
                        r.close();
                    }
                }
            } catch (Throwable t) {
                failure = t;
            }
        }
    }

    static long readRequests(Cluster c) throws Exception {
        long sum = 0;
        for (Bookie b : c.bookies) {
            if (b.isJava()) {
                return -1;
            }
            String m = b.http("GET", "/metrics", null).body();
            for (String line : m.split("\n")) {
                if (line.startsWith("bookkeeper_server_READ_ENTRY_REQUEST_count")
                        || line.startsWith("bookkeeper_server_READ_LAC_REQUEST_count")
                        || line.startsWith("bookkeeper_server_BATCH_READ_ENTRY_REQUEST_count")) {
                    sum += (long) Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
                }
            }
        }
        return sum;
    }

    /** Adds ids [from, to) one per 100 ms; records ack times. */
    static void write(LedgerHandle lh, long from, long to, long[] ackNanos) throws Exception {
        long start = System.nanoTime();
        for (long e = from; e < to; e++) {
            long due = start + (e - from + (from > 0 ? 1 : 0)) * 100_000_000L;
            long now = System.nanoTime();
            if (due > now) {
                Thread.sleep((due - now) / 1_000_000);
            }
            long id = lh.addEntry(Payloads.payload(SEED, lh.getId(), e, 100));
            ackNanos[(int) e] = System.nanoTime();
            assertEquals(e, id);
        }
    }

    static void awaitReceived(Reader r, long upTo, long timeoutMs) throws Exception {
        long deadline = System.nanoTime() + timeoutMs * 1_000_000;
        while (!r.received.containsKey(upTo) && System.nanoTime() < deadline && r.failure == null) {
            Thread.sleep(5);
        }
    }

    @Test
    void longPollAndExplicitLac() throws Exception {
        try (Cluster c = new Cluster("s12")) {
            for (int i = 0; i < 3; i++) {
                c.addRust();
            }
            c.startAll();

            // ---- phase 1: v3 long poll, piggy-backed LAC only
            BookKeeper wbk = c.client(false);
            BookKeeper rbk = c.client(false);
            LedgerHandle lh = wbk.createLedger(3, 3, 2, DigestType.CRC32C, Ops.PASSWORD);
            long[] ack = new long[200];
            LedgerHandle rh = rbk.openLedgerNoRecovery(lh.getId(), DigestType.CRC32C, Ops.PASSWORD);
            long req0 = readRequests(c);
            Reader reader = new Reader(rh, SEED, false);
            // the reader starts once the bookies hold the ledger (entry 0 acked): a long poll on
            // a ledger a bookie has never seen is answered NoSuchLedger, by Java bookies too
            write(lh, 0, 1, ack);
            reader.start();
            write(lh, 1, 60, ack);
            long pauseStart = System.nanoTime();
            Thread.sleep(8000);
            write(lh, 60, 70, ack);
            awaitReceived(reader, 68, 3000);
            reader.stop.set(true);
            long req1 = readRequests(c);
            reader.join(10_000);
            if (reader.failure != null) {
                throw new AssertionError("reader failed", reader.failure);
            }
            // every entry up to the writer's LAC (68), in order: `next` only advances on n
            for (long k = 0; k <= 68; k++) {
                if (!reader.received.containsKey(k)) {
                    check(false, "reader received entry " + k);
                }
            }
            long[] delays = new long[69];
            for (int k = 0; k <= 68; k++) {
                delays[k] = reader.received.get((long) k) - ack[k + 1];
            }
            Arrays.sort(delays);
            double p99ms = delays[(int) Math.ceil(0.99 * delays.length) - 1] / 1e6;
            Cluster.log(String.format("phase 1: delay p50 %.1f ms p99 %.1f ms max %.1f ms", delays[34] / 1e6, p99ms,
                    delays[68] / 1e6));
            check(p99ms < 150, "p99 delay from ack of k+1 to reader receiving k < 150 ms: " + p99ms);
            long requests = req1 - req0;
            Cluster.log("phase 1: bookie read requests " + requests + " for 69 entries");
            if (requests >= 0) {
                check(requests <= 2 * 69, "bookie read requests " + requests + " <= 2x entries (no busy polling)");
            }
            // during the pause: a call returned after 5 s +- 1 s, LAC unchanged (58), no entry
            boolean timedOut = false;
            synchronized (reader.emptyCalls) {
                for (long[] e : reader.emptyCalls) {
                    Cluster.log(String.format("empty long poll: started %+.1f s into the pause, %.2f s, LAC %d",
                            (e[0] - pauseStart) / 1e9, e[1] / 1e9, e[2]));
                    // 5 s +- 1 s, plus the client's first speculative LAC request after 1.5 s:
                    // the call ends when both long polls time out (6.5 s; Java bookies too)
                    if (e[0] >= pauseStart - 200_000_000L && e[1] >= 4e9 && e[1] <= 7.5e9 && e[2] == 58) {
                        timedOut = true;
                    }
                }
            }
            check(timedOut, "a long poll during the pause returned after 5 s +- 1 s (+1.5 s speculative) with LAC 58"
                    + " and no entry");
            lh.close();

            // ---- phase 2: explicit LAC (WRITE_LAC / READ_LAC)
            ClientConfiguration ecc = c.clientConf(false);
            ecc.setExplictLacInterval(100);
            BookKeeper ebk = c.client(ecc);
            LedgerHandle elh = ebk.createLedger(3, 3, 2, DigestType.CRC32C, Ops.PASSWORD);
            LedgerHandle erh = rbk.openLedgerNoRecovery(elh.getId(), DigestType.CRC32C, Ops.PASSWORD);
            Reader er = new Reader(erh, SEED, false);
            long[] eack = new long[200];
            write(elh, 0, 1, eack);
            er.start();
            write(elh, 1, 30, eack);
            long stopped = eack[29];
            // READ_LAC sees the last entry within 1 s
            long explicitSeen = -1;
            while (System.nanoTime() - stopped < 1_500_000_000L) {
                long lac = erh.readExplicitLastConfirmed();
                if (lac >= 29) {
                    explicitSeen = System.nanoTime();
                    break;
                }
                Thread.sleep(20);
            }
            awaitReceived(er, 29, 1500);
            er.stop.set(true);
            Long got = er.received.get(29L);
            Cluster.log(String.format("phase 2: READ_LAC shows 29 after %s ms, long poll delivered 29 after %s ms",
                    explicitSeen < 0 ? "never" : String.format("%.0f", (explicitSeen - stopped) / 1e6),
                    got == null ? "never" : String.format("%.0f", (got - stopped) / 1e6)));
            check(explicitSeen > 0 && explicitSeen - stopped <= 1_000_000_000L,
                    "readExplicitLastConfirmed returns the last entry within 1 s after the writer stops");
            check(got != null && got - stopped <= 1_000_000_000L,
                    "the long-poll reader receives the last entry within 1 s after the writer stops");
            er.join(10_000);
            if (er.failure != null) {
                throw new AssertionError("explicit-LAC reader failed", er.failure);
            }
            elh.close();

            // ---- v2 leg: the same loop works by polling
            BookKeeper v2w = c.client(true);
            BookKeeper v2r = c.client(true);
            LedgerHandle vlh = v2w.createLedger(3, 3, 2, DigestType.CRC32C, Ops.PASSWORD);
            LedgerHandle vrh = v2r.openLedgerNoRecovery(vlh.getId(), DigestType.CRC32C, Ops.PASSWORD);
            Reader vr = new Reader(vrh, SEED, true);
            long[] vack = new long[200];
            write(vlh, 0, 1, vack);
            vr.start();
            write(vlh, 1, 30, vack);
            awaitReceived(vr, 28, 5000);
            vr.stop.set(true);
            vr.join(10_000);
            if (vr.failure != null) {
                throw new AssertionError("v2 reader failed", vr.failure);
            }
            synchronized (vr.emptyCalls) {
                long maxLac = vr.emptyCalls.stream().mapToLong(x -> x[2]).max().orElse(-2);
                Cluster.log("v2 reader: " + vr.received.size() + " entries, " + vr.emptyCalls.size()
                        + " calls without an entry, highest LAC reported " + maxLac);
            }
            for (long k = 0; k <= 28; k++) {
                if (!vr.received.containsKey(k)) {
                    check(false, "v2 reader received entry " + k);
                }
            }
            vlh.close();
            c.assertHealthy();
            if (!failed.isEmpty()) {
                throw new AssertionError("S12 checks failed:\n  " + String.join("\n  ", failed));
            }
        }
    }

    /** Every check is evaluated (all phases run) and reported together at the end. */
    private final List<String> failed = new ArrayList<>();

    private void check(boolean ok, String what) {
        Cluster.log((ok ? "ok: " : "FAILED: ") + what);
        if (!ok) {
            failed.add(what);
        }
    }
}
