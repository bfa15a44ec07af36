package dev.rustbookie.chaos;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.bookkeeper.client.BKException;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.api.LedgerMetadata;
import org.apache.bookkeeper.meta.LedgerManager;
import org.apache.bookkeeper.net.BookieId;

/**
 * The fault "a bookie lost for good" (scripts/chaos, kind {@code lost}): the campaign SIGKILLs a
 * bookie, wipes its disks and never restarts it; the cluster's autorecovery (the auditor and
 * replication workers inside every bookie) must put every ledger that named it back on live
 * bookies. Here:
 * <ul>
 *   <li>{@link #snapshot}: the command {@code snapshot}, started right after the kill: every
 *       ledger's metadata in the cluster (all ledgers, through the LedgerManager) to
 *       {@code D/lost-snapshot.tsv} with the time it was taken; then, when {@code --lost} is
 *       given, it watches the metadata every second until no ledger names the lost bookie (or
 *       until lost-at + within) and writes {@code D/lost-heal.tsv}: one line per poll
 *       ({@code poll TIME COUNT}) and {@code healed TIME} when none is left, so that the time
 *       healing took is known even when the checker starts later;</li>
 *   <li>{@link #allMetadata}, {@link #names}: shared with the {@link Checker}, which polls the
 *       metadata itself (the authoritative bound) before it opens any ledger with recovery.</li>
 * </ul>
 * Snapshot format, tab-separated: {@code time MS LOST_ID} once, then one line per fragment
 * {@code LEDGER E W A FIRST_ENTRY BOOKIE,BOOKIE,...}.
 */
final class Lost {
    static final String SNAPSHOT = "lost-snapshot.tsv";
    static final String HEAL = "lost-heal.tsv";

    private Lost() {}

    /** The ensembles of one ledger as the snapshot saw them. */
    record Snap(int ensembleSize, int writeQuorum, TreeMap<Long, List<String>> ensembles) {
        /** The write set of {@code entry} (as the client stripes it: WQ bookies from entry % E). */
        List<String> writeSet(long entry) {
            Map.Entry<Long, List<String>> f = ensembles.floorEntry(entry);
            if (f == null) {
                return List.of();
            }
            List<String> ws = new ArrayList<>();
            for (int i = 0; i < writeQuorum; i++) {
                ws.add(f.getValue().get((int) ((entry + i) % ensembleSize)));
            }
            return ws;
        }
    }

    /** A parsed snapshot: its time and every ledger's ensembles. */
    record Snapshot(long time, String lost, Map<Long, Snap> ledgers) {
        static Snapshot read(Path file) throws IOException {
            long time = -1;
            String lost = "";
            Map<Long, Snap> ledgers = new TreeMap<>();
            for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
                if (line.isEmpty() || line.startsWith("#")) {
                    continue;
                }
                String[] f = line.split("\t", -1);
                if (f[0].equals("time")) {
                    time = Long.parseLong(f[1]);
                    lost = f.length > 2 ? f[2] : "";
                    continue;
                }
                long ledger = Long.parseLong(f[0]);
                Snap s = ledgers.computeIfAbsent(ledger, l -> new Snap(Integer.parseInt(f[1]), Integer.parseInt(f[2]),
                        new TreeMap<>()));
                s.ensembles().put(Long.parseLong(f[4]), List.of(f[5].split(",")));
            }
            if (time < 0) {
                throw new IOException(file + " has no time line (an unfinished snapshot?)");
            }
            return new Snapshot(time, lost, ledgers);
        }
    }

    /** Every ledger of the cluster with its metadata (a ledger deleted meanwhile is left out). */
    static Map<Long, LedgerMetadata> allMetadata(BookKeeper bk) throws Exception {
        LedgerManager lm = bk.getLedgerManager();
        TreeSet<Long> ids = new TreeSet<>();
        LedgerManager.LedgerRangeIterator it = lm.getLedgerRanges(10_000);
        while (it.hasNext()) {
            ids.addAll(it.next().getLedgers());
        }
        Map<Long, LedgerMetadata> all = new TreeMap<>();
        for (long id : ids) {
            try {
                all.put(id, lm.readLedgerMetadata(id).get(10, TimeUnit.SECONDS).getValue());
            } catch (ExecutionException e) {
                if (e.getCause() instanceof BKException.BKNoSuchLedgerExistsOnMetadataServerException) {
                    continue;
                }
                throw e;
            }
        }
        return all;
    }

    /** Whether any ensemble of the ledger names the bookie. */
    static boolean names(LedgerMetadata md, String bookie) {
        for (List<BookieId> ensemble : md.getAllEnsembles().values()) {
            for (BookieId b : ensemble) {
                if (b.toString().equals(bookie)) {
                    return true;
                }
            }
        }
        return false;
    }

    /** The ledgers naming the bookie. */
    static List<Long> naming(Map<Long, LedgerMetadata> all, String bookie) {
        List<Long> ids = new ArrayList<>();
        all.forEach((id, md) -> {
            if (names(md, bookie)) {
                ids.add(id);
            }
        });
        return ids;
    }

    /** The command {@code snapshot --uri U --dir D [--lost ID --lost-at MS --within S]}. */
    static int snapshot(Main.Opts o) throws Exception {
        BookKeeper bk = Main.connect(Main.clientConf(o.uri, false), System.currentTimeMillis() + 20_000);
        if (bk == null) {
            System.err.println("snapshot: no client");
            return 1;
        }
        try {
            long time = -1;
            Map<Long, LedgerMetadata> all = null;
            for (int attempt = 0; all == null; attempt++) {
                time = System.currentTimeMillis();
                try {
                    all = allMetadata(bk);
                } catch (Exception e) {
                    System.err.println("snapshot: " + e + " (attempt " + (attempt + 1) + ")");
                    if (attempt >= 4) {
                        return 1;
                    }
                    Thread.sleep(1000);
                }
            }
            StringBuilder sb = new StringBuilder("# ledger\tE\tW\tA\tfirst entry\tensemble (the metadata when bookie "
                    + o.lost + " was lost)\n");
            sb.append("time\t").append(time).append('\t').append(o.lost == null ? "" : o.lost).append('\n');
            all.forEach((id, md) -> md.getAllEnsembles().forEach((first, ensemble) -> {
                List<String> ids = ensemble.stream().map(BookieId::toString).toList();
                sb.append(id).append('\t').append(md.getEnsembleSize()).append('\t').append(md.getWriteQuorumSize())
                        .append('\t').append(md.getAckQuorumSize()).append('\t').append(first).append('\t')
                        .append(String.join(",", ids)).append('\n');
            }));
            Path tmp = o.dir.resolve(SNAPSHOT + ".tmp");
            Files.writeString(tmp, sb.toString());
            Files.move(tmp, o.dir.resolve(SNAPSHOT), StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            System.out.printf("snapshot: %d ledgers at %d (%d ms after the loss), %d naming %s%n", all.size(), time,
                    time - o.lostAt, o.lost == null ? 0 : naming(all, o.lost).size(), o.lost);
            if (o.lost == null || o.lostAt <= 0) {
                return 0;
            }
            // watch the healing: how long it took, even when the checker starts later
            long deadline = o.lostAt + o.withinSeconds * 1000;
            Path heal = o.dir.resolve(HEAL);
            while (true) {
                long now = System.currentTimeMillis();
                int left;
                try {
                    left = naming(allMetadata(bk), o.lost).size();
                } catch (Exception e) {
                    System.err.println("snapshot: watching: " + e);
                    left = -1;
                }
                String line = left == 0 ? "healed\t" + now + "\n" : "poll\t" + now + "\t" + left + "\n";
                Files.writeString(heal, line, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
                if (left == 0 || now > deadline) {
                    return 0;
                }
                Thread.sleep(Math.max(0, now + 1000 - System.currentTimeMillis()));
            }
        } finally {
            bk.close();
        }
    }

    /** The time {@code D/lost-heal.tsv} says the last ledger stopped naming the lost bookie, or -1. */
    static long healedAt(Path dir) throws IOException {
        Path heal = dir.resolve(HEAL);
        if (!Files.exists(heal)) {
            return -1;
        }
        for (String line : Files.readAllLines(heal, StandardCharsets.UTF_8)) {
            String[] f = line.split("\t");
            if (f[0].equals("healed") && f.length > 1) {
                return Long.parseLong(f[1]);
            }
        }
        return -1;
    }
}
