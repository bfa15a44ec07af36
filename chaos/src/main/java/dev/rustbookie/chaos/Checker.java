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
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.bookkeeper.client.BKException;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeper.DigestType;
import org.apache.bookkeeper.client.LedgerChecker;
import org.apache.bookkeeper.client.LedgerEntry;
import org.apache.bookkeeper.client.LedgerFragment;
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
 * When a bookie was lost for good ({@code --lost}, {@link Lost}), before any ledger is opened
 * with recovery (open ledgers are to be recovered by the autorecovery workers after their grace
 * period, not by the checker): every ledger of the cluster is polled until none names the lost
 * bookie in any ensemble, or until lost-at + within, when each ledger still naming it is a
 * violation. Then, besides the checks above: every acknowledged add whose "ok" came before the
 * snapshot of the metadata taken at the loss ({@code --snapshot}) and whose write set in that
 * snapshot included the lost bookie has a final write set without it, and a byte-identical copy
 * on every bookie of its final write set that was not in its snapshot write set (the copies
 * autorecovery restored, counted as "restored copies").
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
        /** When each acknowledged add's "ok" was logged (epoch ms). */
        final Map<Long, Long> ackedAt = new HashMap<>();
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
                        l.ackedAt.merge(e.entry(), e.time(), Math::min);
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
        String healFigure = "";
        Lost.Snapshot snap = null;
        if (o.lost != null) {
            healFigure = awaitHealed(bk);
            if (o.snapshot == null) {
                violation("no --snapshot of the metadata at the loss of " + o.lost + ": its copies cannot be checked");
            } else {
                try {
                    snap = Lost.Snapshot.read(o.snapshot);
                    System.out.printf("  snapshot: %d ledgers, taken %d ms after the loss%n", snap.ledgers().size(),
                            snap.time() - o.lostAt);
                } catch (Exception e) {
                    violation("the snapshot of the metadata at the loss of " + o.lost + " cannot be read: " + e);
                }
            }
        }
        RawReader raw = new RawReader(cc);
        long acked = 0;
        long readBack = 0;
        long rawCopies = 0;
        long missingCopies = 0;
        long restored = 0;
        long underReplicated = 0;
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
                // the adds the loss left with a copy fewer: the bookies that must now hold them
                Map<Long, Set<BookieId>> mustHold = new HashMap<>();
                if (snap != null) {
                    mustHold = restoredSet(l, snap, lac, ensembles, ens, wq);
                    underReplicated += mustHold.size();
                }
                Map<String, List<Long>> notRestored = new TreeMap<>();
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
                        long[] counts = collect(l, ensembles, ens, keys, futures, identical, mustHold, notRestored);
                        rawCopies += counts[0];
                        missingCopies += counts[1];
                        restored += counts[2];
                    }
                }
                long[] counts = collect(l, ensembles, ens, keys, futures, identical, mustHold, notRestored);
                rawCopies += counts[0];
                missingCopies += counts[1];
                restored += counts[2];
                notRestored.forEach((where, entries) -> violation("ledger " + l.id + ": " + entries.size()
                        + " acknowledged adds that lost their copy on " + o.lost + " have no copy " + where
                        + ", which replaced it (entries " + entries.subList(0, Math.min(10, entries.size()))
                        + (entries.size() > 10 ? "..." : "") + ")"));
                for (Map.Entry<Long, Integer> c : identical.entrySet()) {
                    if (c.getValue() < aq) {
                        violation("ledger " + l.id + " entry " + c.getKey() + " acknowledged but only " + c.getValue()
                                + " identical copies in its write set (ack quorum " + aq + ")");
                    }
                }
                System.out.printf("  ledger %d %s %s: acked %d (fail %d, unknown %d), recovered to %d, reader LAC %d,"
                        + " fences %s, ensembles %d%s%n", l.id, l.writer, l.params, l.acked.size(), l.fails, l.unknowns,
                        lac, l.lacSeen, l.fences, ensembles.size(),
                        snap == null ? "" : ", " + mustHold.size() + " adds had a copy on the lost bookie");
                lh.close();
            }
        } finally {
            raw.close();
            bk.close();
        }
        String figures = String.format("ledgers %d, acked adds %d, entries read back %d, raw copies %d identical"
                + " (%d absent)", ledgers.values().stream().filter(l -> !l.params.isEmpty()).count(), acked, readBack,
                rawCopies, missingCopies);
        if (o.lost != null) {
            figures += String.format(", restored copies %d (%d adds had one on the lost bookie), %s", restored,
                    underReplicated, healFigure);
        }
        absentBy.forEach((k, n) -> System.out.println("  absent copies: " + n + " on " + k));
        if (violations.isEmpty()) {
            System.out.println("check: PASS " + figures);
            return 0;
        }
        System.out.println("check: FAIL " + violations.size() + " violations; " + figures);
        return 1;
    }

    /**
     * The lost bookie's healing: polls every ledger's metadata (all the cluster's) until none
     * names it or until lost-at + within; a ledger still naming it then is a violation. Returns
     * the figure for the last line ("healed in S s" or "not healed ...").
     */
    private String awaitHealed(BookKeeper bk) throws InterruptedException {
        long deadline = o.lostAt + o.withinSeconds * 1000;
        List<Long> left = null;
        Map<Long, LedgerMetadata> all = null;
        while (true) {
            try {
                all = Lost.allMetadata(bk);
                left = Lost.naming(all, o.lost);
            } catch (Exception e) {
                System.out.println("  heal: reading the ledgers' metadata: " + e);
                left = null;
            }
            if ((left != null && left.isEmpty()) || System.currentTimeMillis() >= deadline) {
                break;
            }
            Thread.sleep(1000);
        }
        long now = System.currentTimeMillis();
        if (left == null) {
            violation("the ledgers' metadata cannot be read to see whether they still name lost bookie " + o.lost);
            return "heal unknown";
        }
        if (!left.isEmpty()) {
            for (long id : left) {
                LedgerMetadata md = all.get(id);
                violation("ledger " + id + " still names lost bookie " + o.lost + " " + (now - o.lostAt) / 1000
                        + " s after its loss (" + (md.isClosed() ? "closed" : "open") + ", ensembles "
                        + md.getAllEnsembles() + ")" + diagnose(bk, id));
            }
            return "not healed within " + o.withinSeconds + " s (" + left.size() + " ledgers)";
        }
        // the watcher (Lost.snapshot) saw it first when the checker started after the healing
        long healed = now;
        String by = "the checker";
        try {
            long watched = Lost.healedAt(o.snapshot == null ? o.dir : o.snapshot.getParent());
            if (watched > 0 && watched < healed) {
                healed = watched;
                by = "the watcher";
            }
        } catch (Exception e) {
            System.out.println("  heal: " + e);
        }
        double secs = (healed - o.lostAt) / 1000.0;
        System.out.printf("  heal: no ledger of %d names lost bookie %s %.1f s after its loss (seen by %s)%n", all.size(),
                o.lost, secs, by);
        if (healed > deadline) {
            violation(String.format("ledgers named lost bookie %s until %.1f s after its loss (bound %d s)", o.lost, secs,
                    o.withinSeconds));
        }
        return String.format("healed in %.1f s", secs);
    }

    /**
     * Why a ledger may be left unhealed, in Java's own terms: the fragments Java's LedgerChecker
     * finds under-replicated now, with their bad bookies and how many writable bookies are
     * outside each one's ensemble (a Java worker replaces every bad bookie of a fragment at once
     * or none, and goes on with the next fragment when one fails).
     */
    private String diagnose(BookKeeper bk, long id) {
        try (LedgerHandle lh = bk.openLedgerNoRecovery(id, DigestType.CRC32C, Writer.PASSWORD)) {
            Set<BookieId> writable = bk.getMetadataClientDriver().getRegistrationClient().getWritableBookies()
                    .get(10, TimeUnit.SECONDS).getValue();
            CompletableFuture<Set<LedgerFragment>> checked = new CompletableFuture<>();
            new LedgerChecker(bk).checkLedger(lh, (rc, fragments) -> {
                if (rc == BKException.Code.OK) {
                    checked.complete(fragments);
                } else {
                    checked.completeExceptionally(BKException.create(rc));
                }
            });
            List<LedgerFragment> fragments = new ArrayList<>(checked.get(60, TimeUnit.SECONDS));
            fragments.sort((a, b) -> Long.compare(a.getFirstEntryId(), b.getFirstEntryId()));
            StringBuilder sb = new StringBuilder("; Java's LedgerChecker:");
            for (LedgerFragment f : fragments) {
                List<BookieId> bad = new ArrayList<>();
                for (int i : f.getBookiesIndexes()) {
                    bad.add(f.getEnsemble().get(i));
                }
                long spare = writable.stream().filter(b -> !f.getEnsemble().contains(b)).count();
                sb.append(" entries ").append(f.getFirstEntryId()).append("..").append(f.getLastKnownEntryId())
                        .append(f.isClosed() ? "" : " (open)").append(" bad ").append(bad).append(", ").append(spare)
                        .append(" writable outside").append(bad.size() > spare ? " (cannot be healed now)" : "")
                        .append(';');
            }
            return fragments.isEmpty() ? "; Java's LedgerChecker: no fragment under-replicated" : sb.toString();
        } catch (Exception e) {
            return "; no LedgerChecker verdict: " + e;
        }
    }

    /**
     * For every add of {@code l} acknowledged before the snapshot whose write set then included
     * the lost bookie: the bookies of its final write set that were not in the snapshot's (they
     * must hold a copy now). A ledger missing from the snapshot though such adds exist, or a final
     * write set still naming the lost bookie, is a violation.
     */
    private Map<Long, Set<BookieId>> restoredSet(Ledger l, Lost.Snapshot snap, long lac,
            NavigableMap<Long, ? extends List<BookieId>> ensembles, int ens, int wq) {
        Map<Long, Set<BookieId>> must = new HashMap<>();
        Lost.Snap s = snap.ledgers().get(l.id);
        long notInSnapshot = 0;
        List<Long> stillNamed = new ArrayList<>();
        for (Map.Entry<Long, String> a : l.acked.entrySet()) {
            long entry = a.getKey();
            Long at = l.ackedAt.get(entry);
            if (entry > lac || at == null || at >= snap.time()) {
                continue;
            }
            if (s == null) {
                notInSnapshot++;
                continue;
            }
            List<String> before = s.writeSet(entry);
            if (!before.contains(o.lost)) {
                continue;
            }
            List<BookieId> ensemble = ensembles.floorEntry(entry).getValue();
            Set<BookieId> add = new HashSet<>();
            for (int i = 0; i < wq; i++) {
                BookieId b = ensemble.get((int) ((entry + i) % ens));
                if (b.toString().equals(o.lost)) {
                    stillNamed.add(entry);
                } else if (!before.contains(b.toString())) {
                    add.add(b);
                }
            }
            must.put(entry, add);
        }
        if (notInSnapshot > 0) {
            violation("ledger " + l.id + " is not in the snapshot of the metadata, yet " + notInSnapshot
                    + " of its adds were acknowledged before it");
        }
        if (!stillNamed.isEmpty()) {
            violation("ledger " + l.id + ": " + stillNamed.size() + " acknowledged adds still have lost bookie " + o.lost
                    + " in their final write set (entries " + stillNamed.subList(0, Math.min(10, stillNamed.size()))
                    + ")");
        }
        return must;
    }

    /**
     * Waits for a batch of raw reads; returns {identical copies, absent copies, restored copies
     * (identical ones on a bookie of {@code mustHold})}; a copy of {@code mustHold} absent goes
     * to {@code notRestored} (per bookie and answer code).
     */
    private long[] collect(Ledger l, NavigableMap<Long, ? extends List<BookieId>> ensembles, int ens, List<long[]> keys,
            List<CompletableFuture<RawReader.Result>> futures, Map<Long, Integer> identical,
            Map<Long, Set<BookieId>> mustHold, Map<String, List<Long>> notRestored) {
        long same = 0;
        long absent = 0;
        long restored = 0;
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
            Set<BookieId> must = mustHold.get(entry);
            boolean restoring = must != null && must.contains(b);
            if (r.rc() != 0 || r.data() == null) {
                absent++;
                absentBy.merge(b + " rc " + r.rc(), 1, Integer::sum);
                if (restoring) {
                    notRestored.computeIfAbsent("on " + b + " (rc " + r.rc() + ")", x -> new ArrayList<>()).add(entry);
                }
                continue;
            }
            byte[] payload = Arrays.copyOfRange(r.data(), Math.min(STORED_HEADER, r.data().length), r.data().length);
            if (Payloads.sha256(payload).equals(l.acked.get(entry))) {
                same++;
                identical.merge(entry, 1, Integer::sum);
                if (restoring) {
                    restored++;
                }
            } else {
                violation("ledger " + l.id + " entry " + entry + " on bookie " + b + " differs from what was acknowledged ("
                        + r.data().length + " bytes stored)");
            }
        }
        keys.clear();
        futures.clear();
        return new long[] {same, absent, restored};
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
