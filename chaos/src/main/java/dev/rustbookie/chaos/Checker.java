package dev.rustbookie.chaos;

import dev.rustbookie.interop.Payloads;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.nio.NioEventLoopGroup;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Enumeration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeper.DigestType;
import org.apache.bookkeeper.client.LedgerEntry;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.client.api.LedgerMetadata;
import org.apache.bookkeeper.common.util.OrderedExecutor;
import org.apache.bookkeeper.conf.ClientConfiguration;
import org.apache.bookkeeper.net.BookieId;
import org.apache.bookkeeper.net.BookieSocketAddress;
import org.apache.bookkeeper.proto.BookieClientImpl;

/**
 * The checker, run after the faults healed: for every ledger of every history it opens the
 * ledger with recovery (closing it, fencing any writer) and verifies
 * <ul>
 *   <li>the recovered last entry is at least the last acknowledged add and the last LAC a reader saw;</li>
 *   <li>every entry up to it reads back (Java client) as the writer's payload, and every
 *       acknowledged one with the digest logged at its acknowledgement;</li>
 *   <li>every acknowledged add has, on each bookie of its write set (the ensemble in force for
 *       that entry in the final metadata), either no copy or a byte-identical one (raw reads),
 *       and at least ack-quorum identical copies;</li>
 *   <li>a ledger fenced during the run: no add acknowledged beyond the fence's recovered entry,
 *       and the final recovery agrees with it.</li>
 * </ul>
 */
final class Checker {
    /** CRC32C entries as stored: ledger, entry, LAC, length (4 longs) + 4-byte digest. */
    private static final int STORED_HEADER = 36;

    private final Main.Opts o;
    private final List<String> violations = new ArrayList<>();
    /** Raw reads that found no copy, per bookie and answer code (e.g. "10.77.14.2:2000 rc -1"). */
    private final Map<String, Integer> absentBy = new TreeMap<>();

    private static final class Ledger {
        final long id;
        String writer = "?";
        String params = "";
        final TreeMap<Long, String> acked = new TreeMap<>();
        long lacSeen = -1;
        final List<Long> fences = new ArrayList<>();
        int fails;
        int unknowns;

        Ledger(long id) {
            this.id = id;
        }
    }

    Checker(Main.Opts o) {
        this.o = o;
    }

    private void violation(String s) {
        violations.add(s);
        System.out.println("  VIOLATION " + s);
    }

    int run() throws Exception {
        Map<Long, Ledger> ledgers = new TreeMap<>();
        List<Path> files;
        try (Stream<Path> s = Files.list(o.dir)) {
            files = s.filter(p -> p.getFileName().toString().startsWith("hist-")).sorted().toList();
        }
        for (Path f : files) {
            for (History.Event e : History.read(f)) {
                if (e.ledger() < 0) {
                    continue;
                }
                Ledger l = ledgers.computeIfAbsent(e.ledger(), Ledger::new);
                switch (e.type()) {
                    case "create" -> {
                        l.writer = e.client();
                        l.params = e.detail();
                    }
                    case "ok" -> {
                        String before = l.acked.put(e.entry(), e.sha());
                        if (before != null && !before.equals(e.sha())) {
                            violation("ledger " + l.id + " entry " + e.entry() + " acknowledged twice with different values");
                        }
                        if (!e.detail().isEmpty()) {
                            violation("ledger " + l.id + ": " + e.detail());
                        }
                    }
                    case "fail" -> l.fails++;
                    case "unknown" -> l.unknowns++;
                    case "lac" -> l.lacSeen = Math.max(l.lacSeen, e.entry());
                    case "fence" -> l.fences.add(e.entry());
                    case "readbad" -> violation("ledger " + l.id + " entry " + e.entry() + " read by " + e.client()
                            + " is not the writer's: " + e.detail());
                    default -> { }
                }
            }
        }
        ClientConfiguration cc = Main.clientConf(o.uri, false);
        BookKeeper bk = Main.connect(cc, System.currentTimeMillis() + 60_000);
        if (bk == null) {
            System.out.println("check: FAIL no client (ZooKeeper unreachable)");
            return 1;
        }
        RawReader raw = new RawReader(cc);
        long acked = 0;
        long readBack = 0;
        long rawCopies = 0;
        long missingCopies = 0;
        try {
            for (Ledger l : ledgers.values()) {
                if (l.params.isEmpty()) {
                    continue; // lac/read events of a ledger whose creation is in another history: counted there
                }
                acked += l.acked.size();
                LedgerHandle lh = open(bk, l.id);
                if (lh == null) {
                    violation("ledger " + l.id + " (" + l.writer + ") cannot be opened with recovery");
                    continue;
                }
                long lac = lh.getLastAddConfirmed();
                long maxAcked = l.acked.isEmpty() ? -1 : l.acked.lastKey();
                if (lac < maxAcked) {
                    violation("ledger " + l.id + " (" + l.writer + ") recovered to entry " + lac
                            + " but entry " + maxAcked + " was acknowledged: " + l.acked.tailMap(lac, false).size()
                            + " acknowledged adds lost");
                }
                if (lac < l.lacSeen) {
                    violation("ledger " + l.id + " recovered to entry " + lac + " but a reader saw LAC " + l.lacSeen);
                }
                for (long fence : l.fences) {
                    if (maxAcked > fence) {
                        violation("ledger " + l.id + " fenced at entry " + fence + " yet entries up to " + maxAcked
                                + " were acknowledged to its writer: " + l.acked.tailMap(fence, false).keySet());
                    }
                    if (fence != lac) {
                        violation("ledger " + l.id + " fenced and recovered to " + fence + " but now recovers to " + lac);
                    }
                }
                // read back 0..lac with the client
                for (long first = 0; first <= lac; first += 200) {
                    long last = Math.min(lac, first + 199);
                    Enumeration<LedgerEntry> es = readWithRetry(lh, first, last);
                    if (es == null) {
                        violation("ledger " + l.id + " entries " + first + ".." + last + " cannot be read");
                        continue;
                    }
                    while (es.hasMoreElements()) {
                        LedgerEntry e = es.nextElement();
                        byte[] data = e.getEntry();
                        long id = e.getEntryId();
                        readBack++;
                        byte[] want = Payloads.payload(o.seed, l.id, id, Payloads.size(o.seed, l.id, id, 16, o.maxSize));
                        if (!Arrays.equals(data, want)) {
                            violation("ledger " + l.id + " entry " + id + " reads back " + data.length
                                    + " bytes that are not the writer's payload");
                        }
                        String sha = l.acked.get(id);
                        if (sha != null && !sha.equals(Payloads.sha256(data))) {
                            violation("ledger " + l.id + " entry " + id + " reads back with another digest than acknowledged");
                        }
                    }
                }
                // raw reads of every acknowledged add from each bookie of its write set
                LedgerMetadata md = lh.getLedgerMetadata();
                NavigableMap<Long, ? extends List<BookieId>> ensembles = new TreeMap<>(md.getAllEnsembles());
                int ens = md.getEnsembleSize();
                int wq = md.getWriteQuorumSize();
                int aq = md.getAckQuorumSize();
                List<long[]> keys = new ArrayList<>();
                List<CompletableFuture<RawReader.Result>> futures = new ArrayList<>();
                Map<Long, Integer> identical = new HashMap<>();
                for (Map.Entry<Long, String> a : l.acked.entrySet()) {
                    long entry = a.getKey();
                    if (entry > lac) {
                        continue; // already reported as lost
                    }
                    List<BookieId> ensemble = ensembles.floorEntry(entry).getValue();
                    for (int i = 0; i < wq; i++) {
                        BookieId b = ensemble.get((int) ((entry + i) % ens));
                        keys.add(new long[] {entry, i});
                        futures.add(raw.read(b, l.id, entry));
                    }
                    if (futures.size() >= 600) {
                        long[] counts = collect(l, ensembles, ens, keys, futures, identical);
                        rawCopies += counts[0];
                        missingCopies += counts[1];
                    }
                }
                long[] counts = collect(l, ensembles, ens, keys, futures, identical);
                rawCopies += counts[0];
                missingCopies += counts[1];
                for (Map.Entry<Long, Integer> c : identical.entrySet()) {
                    if (c.getValue() < aq) {
                        violation("ledger " + l.id + " entry " + c.getKey() + " acknowledged but only " + c.getValue()
                                + " identical copies in its write set (ack quorum " + aq + ")");
                    }
                }
                System.out.printf("  ledger %d %s %s: acked %d (fail %d, unknown %d), recovered to %d, reader LAC %d,"
                        + " fences %s, ensembles %d%n", l.id, l.writer, l.params, l.acked.size(), l.fails, l.unknowns,
                        lac, l.lacSeen, l.fences, ensembles.size());
                lh.close();
            }
        } finally {
            raw.close();
            bk.close();
        }
        String figures = String.format("ledgers %d, acked adds %d, entries read back %d, raw copies %d identical"
                + " (%d absent)", ledgers.values().stream().filter(l -> !l.params.isEmpty()).count(), acked, readBack,
                rawCopies, missingCopies);
        absentBy.forEach((k, n) -> System.out.println("  absent copies: " + n + " on " + k));
        if (violations.isEmpty()) {
            System.out.println("check: PASS " + figures);
            return 0;
        }
        System.out.println("check: FAIL " + violations.size() + " violations; " + figures);
        return 1;
    }

    /** Waits for a batch of raw reads; returns {identical copies, absent copies}. */
    private long[] collect(Ledger l, NavigableMap<Long, ? extends List<BookieId>> ensembles, int ens, List<long[]> keys,
            List<CompletableFuture<RawReader.Result>> futures, Map<Long, Integer> identical) {
        long same = 0;
        long absent = 0;
        for (int k = 0; k < futures.size(); k++) {
            long entry = keys.get(k)[0];
            int i = (int) keys.get(k)[1];
            BookieId b = ensembles.floorEntry(entry).getValue().get((int) ((entry + i) % ens));
            RawReader.Result r;
            try {
                r = futures.get(k).get(60, TimeUnit.SECONDS);
            } catch (Exception e) {
                r = new RawReader.Result(-999, null);
            }
            identical.putIfAbsent(entry, 0);
            if (r.rc() != 0 || r.data() == null) {
                absent++;
                absentBy.merge(b + " rc " + r.rc(), 1, Integer::sum);
                continue;
            }
            byte[] payload = Arrays.copyOfRange(r.data(), Math.min(STORED_HEADER, r.data().length), r.data().length);
            if (Payloads.sha256(payload).equals(l.acked.get(entry))) {
                same++;
                identical.merge(entry, 1, Integer::sum);
            } else {
                violation("ledger " + l.id + " entry " + entry + " on bookie " + b + " differs from what was acknowledged ("
                        + r.data().length + " bytes stored)");
            }
        }
        keys.clear();
        futures.clear();
        return new long[] {same, absent};
    }

    private static LedgerHandle open(BookKeeper bk, long ledger) throws InterruptedException {
        for (int attempt = 0; attempt < 4; attempt++) {
            try {
                return bk.openLedger(ledger, DigestType.CRC32C, Writer.PASSWORD);
            } catch (Exception e) {
                System.out.println("  open " + ledger + " with recovery: " + e + " (attempt " + (attempt + 1) + ")");
                Thread.sleep(5000);
            }
        }
        return null;
    }

    private static Enumeration<LedgerEntry> readWithRetry(LedgerHandle lh, long first, long last)
            throws InterruptedException {
        for (int attempt = 0; attempt < 3; attempt++) {
            try {
                return lh.readEntries(first, last);
            } catch (Exception e) {
                System.out.println("  read " + lh.getId() + " " + first + ".." + last + ": " + e);
                Thread.sleep(3000);
            }
        }
        return null;
    }

    /** Asynchronous raw reads through the client's internal BookieClientImpl (as interop's Raw). */
    static final class RawReader implements AutoCloseable {
        record Result(int rc, byte[] data) {}

        private final EventLoopGroup elg = new NioEventLoopGroup(1);
        private final OrderedExecutor executor = OrderedExecutor.newBuilder().name("raw-reads").numThreads(1).build();
        private final ScheduledExecutorService scheduler = Executors.newSingleThreadScheduledExecutor();
        private final BookieClientImpl client;

        RawReader(ClientConfiguration cc) throws Exception {
            client = new BookieClientImpl(cc, elg, UnpooledByteBufAllocator.DEFAULT, executor, scheduler,
                    org.apache.bookkeeper.stats.NullStatsLogger.INSTANCE, BookieSocketAddress.LEGACY_BOOKIEID_RESOLVER);
        }

        CompletableFuture<Result> read(BookieId bookie, long ledger, long entry) {
            CompletableFuture<Result> f = new CompletableFuture<>();
            client.readEntry(bookie, ledger, entry, (rc, lid, eid, buf, ctx) -> {
                byte[] data = null;
                if (rc == 0 && buf != null) {
                    data = new byte[buf.readableBytes()];
                    buf.getBytes(buf.readerIndex(), data);
                }
                // the buffer belongs to the client's read completion, which releases it
                f.complete(new Result(rc, data));
            }, null, 0);
            return f;
        }

        @Override
        public void close() {
            client.close();
            executor.shutdown();
            scheduler.shutdownNow();
            elg.shutdownGracefully(0, 1, TimeUnit.SECONDS);
        }
    }
}
