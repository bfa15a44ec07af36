package dev.rustbookie.interop;

import java.util.ArrayList;
import java.util.Enumeration;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.bookkeeper.client.BKException;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeperAdmin;
import org.apache.bookkeeper.client.LedgerEntry;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.client.api.LedgerMetadata;
import org.apache.bookkeeper.conf.ClientConfiguration;
import org.apache.bookkeeper.net.BookieId;

/**
 * The Java client's side of scripts/bench-autorecovery (issue 45): the ledgers a lost bookie
 * held, written with the real client, and the wait for autorecovery (ours or Java's) to bring
 * them back to full replication.
 * <pre>
 *   write  --uri U --ledgers K --entries M [--size 1024] [--ensemble 2 --wq 2 --aq 2] [--open 8] [--window 2000] [--seed S]
 *          K closed ledgers of M entries (payloads of interop's Payloads), `--open` written at once
 *   wait   --uri U --lost BOOKIE [--timeout 3600]
 *          until no ledger's ensembles name BOOKIE; a line every 5 s (ledgers still naming it)
 *          and "healed after MS ms" at the end (exit 1 on timeout)
 *   verify --uri U --ledgers-from FIRST --count K --entries M [--size 1024] [--seed S] [--every N]
 *          every N-th ledger read back in full through the client, byte for byte
 * </pre>
 * Ledger ids come from the cluster's ledger id generator; `write` prints the first and last.
 */
public final class ArBench {
    private ArBench() {}

    public static void main(String[] args) throws Exception {
        String cmd = args[0];
        java.util.Map<String, String> o = new java.util.HashMap<>();
        for (int i = 1; i + 1 < args.length; i += 2) {
            o.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        ClientConfiguration cc = new ClientConfiguration();
        cc.setMetadataServiceUri(o.get("uri"));
        cc.setZkTimeout(30_000);
        cc.setAddEntryTimeout(60);
        cc.setReadEntryTimeout(60);
        cc.setNumChannelsPerBookie(1);
        switch (cmd) {
            case "write" -> System.exit(write(cc, o));
            case "wait" -> System.exit(waitHealed(cc, o));
            case "verify" -> System.exit(verify(cc, o));
            default -> {
                System.err.println("ArBench write|wait|verify ...");
                System.exit(2);
            }
        }
    }

    static int num(java.util.Map<String, String> o, String k, int dflt) {
        return o.containsKey(k) ? Integer.parseInt(o.get(k)) : dflt;
    }

    private static int write(ClientConfiguration cc, java.util.Map<String, String> o) throws Exception {
        int ledgers = num(o, "ledgers", 100);
        int entries = num(o, "entries", 1000);
        int size = num(o, "size", 1024);
        int e = num(o, "ensemble", 2);
        int w = num(o, "wq", 2);
        int a = num(o, "aq", 2);
        int open = num(o, "open", 8);
        long seed = Long.parseLong(o.getOrDefault("seed", "45"));
        int windowSize = num(o, "window", 2000);
        Semaphore window = new Semaphore(windowSize);
        AtomicReference<Throwable> failed = new AtomicReference<>();
        AtomicLong bytes = new AtomicLong();
        List<Long> ids = new ArrayList<>();
        long t0 = System.nanoTime();
        try (BookKeeper bk = new BookKeeper(cc)) {
            for (int first = 0; first < ledgers; first += open) {
                List<LedgerHandle> batch = new ArrayList<>();
                for (int l = first; l < Math.min(ledgers, first + open); l++) {
                    LedgerHandle lh = bk.createLedger(e, w, a, BookKeeper.DigestType.CRC32C, Ops0.PASSWORD);
                    batch.add(lh);
                    ids.add(lh.getId());
                }
                for (int entry = 0; entry < entries; entry++) {
                    for (LedgerHandle lh : batch) {
                        byte[] p = Payloads.payload(seed, lh.getId(), entry, size);
                        window.acquire();
                        lh.asyncAddEntry(p, (rc, h, id, ctx) -> {
                            if (rc != BKException.Code.OK) {
                                failed.compareAndSet(null, BKException.create(rc));
                            }
                            bytes.addAndGet(size);
                            window.release();
                        }, null);
                    }
                    if (failed.get() != null) {
                        throw new IllegalStateException("an add failed", failed.get());
                    }
                }
                // close errors out the adds still pending: every add of the batch answered first
                window.acquire(windowSize);
                window.release(windowSize);
                if (failed.get() != null) {
                    throw new IllegalStateException("an add failed", failed.get());
                }
                for (LedgerHandle lh : batch) {
                    lh.close();
                }
                if ((first / open) % 10 == 0) {
                    System.out.printf("write: %d ledgers, %.0f MiB, %.1f s%n", ids.size(), bytes.get() / 1048576.0,
                            (System.nanoTime() - t0) / 1e9);
                }
            }
        }
        double s = (System.nanoTime() - t0) / 1e9;
        System.out.printf("written: %d ledgers %d..%d, %d entries of %d B each, %.0f MiB in %.1f s (%.1f MiB/s)%n",
                ids.size(), ids.get(0), ids.get(ids.size() - 1), entries, size, bytes.get() / 1048576.0, s,
                bytes.get() / 1048576.0 / s);
        return 0;
    }

    private static int waitHealed(ClientConfiguration cc, java.util.Map<String, String> o) throws Exception {
        BookieId lost = BookieId.parse(o.get("lost"));
        long timeoutMs = num(o, "timeout", 3600) * 1000L;
        long t0 = System.currentTimeMillis();
        long lastPrint = 0;
        try (BookKeeperAdmin admin = new BookKeeperAdmin(cc)) {
            while (true) {
                int naming = 0;
                int total = 0;
                for (long id : admin.listLedgers()) {
                    total++;
                    LedgerMetadata md = admin.getLedgerMetadata(admin.openLedgerNoRecovery(id));
                    if (md.getAllEnsembles().values().stream().anyMatch(en -> en.contains(lost))) {
                        naming++;
                    }
                }
                long now = System.currentTimeMillis();
                if (naming == 0) {
                    System.out.printf("healed after %d ms: none of %d ledgers names %s%n", now - t0, total, lost);
                    return 0;
                }
                if (now - lastPrint >= 5000) {
                    System.out.printf("wait: %.0f s, %d of %d ledgers still name %s%n", (now - t0) / 1000.0, naming, total,
                            lost);
                    lastPrint = now;
                }
                if (now - t0 > timeoutMs) {
                    System.out.printf("timeout after %d ms: %d ledgers still name %s%n", now - t0, naming, lost);
                    return 1;
                }
                Thread.sleep(500);
            }
        }
    }

    private static int verify(ClientConfiguration cc, java.util.Map<String, String> o) throws Exception {
        int entries = num(o, "entries", 1000);
        int size = num(o, "size", 1024);
        int every = num(o, "every", 1);
        long seed = Long.parseLong(o.getOrDefault("seed", "45"));
        long checked = 0;
        ConcurrentLinkedQueue<String> bad = new ConcurrentLinkedQueue<>();
        long t0 = System.nanoTime();
        try (BookKeeper bk = new BookKeeper(cc); BookKeeperAdmin admin = new BookKeeperAdmin(cc)) {
            int n = 0;
            for (long id : admin.listLedgers()) {
                if (n++ % every != 0) {
                    continue;
                }
                try (LedgerHandle lh = bk.openLedgerNoRecovery(id, BookKeeper.DigestType.CRC32C, Ops0.PASSWORD)) {
                    if (lh.getLastAddConfirmed() != entries - 1) {
                        bad.add("ledger " + id + " ends at " + lh.getLastAddConfirmed());
                        continue;
                    }
                    for (long f = 0; f < entries; f += 500) {
                        Enumeration<LedgerEntry> en = lh.readEntries(f, Math.min(entries - 1, f + 499));
                        while (en.hasMoreElements()) {
                            LedgerEntry le = en.nextElement();
                            if (!java.util.Arrays.equals(le.getEntry(), Payloads.payload(seed, id, le.getEntryId(), size))) {
                                bad.add("ledger " + id + " entry " + le.getEntryId());
                            }
                            checked++;
                        }
                    }
                }
            }
        }
        System.out.printf("verified %d entries in %.1f s; %d bad%s%n", checked, (System.nanoTime() - t0) / 1e9, bad.size(),
                bad.isEmpty() ? "" : ": " + bad.peek());
        return bad.isEmpty() ? 0 : 1;
    }

    /** The password the benchmark's ledgers are written with. */
    static final class Ops0 {
        static final byte[] PASSWORD = "ar-bench".getBytes(java.nio.charset.StandardCharsets.UTF_8);
    }
}
