package dev.rustbookie.chaos;

import dev.rustbookie.interop.Payloads;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.bookkeeper.client.BKException;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeper.DigestType;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.conf.ClientConfiguration;

/**
 * A writer: creates a ledger (E/W/A of its spec), appends paced adds with a bounded window and
 * logs every add (invoke, then ok/fail, or unknown when no answer came before it gave up). On the
 * first failed add (fenced, not enough bookies, timeout) the handle is broken: the writer waits
 * for the adds in flight, closes the handle (an error is logged, not fatal) and rolls over to a
 * new ledger, as Pulsar and DistributedLog writers do. It also rolls over every
 * {@code entriesPerLedger} adds, so that a round has several ledgers. The id of the ledger being
 * written goes to {@code cur-NAME} in the run directory for the tailing reader and the fencer.
 */
final class Writer implements Runnable {
    static final byte[] PASSWORD = "chaos".getBytes();

    private final Spec spec;
    private final Main.Opts o;
    private final History h;

    record Spec(String name, int ensemble, int writeQuorum, int ackQuorum, boolean explicitLac, boolean v2) {
        static Spec parse(String s) {
            // NAME:E:W:A[:lac][:v2]
            String[] f = s.split(":");
            if (f.length < 4) {
                throw new IllegalArgumentException("writer spec NAME:E:W:A[:lac][:v2], got " + s);
            }
            boolean lac = false;
            boolean v2 = false;
            for (int i = 4; i < f.length; i++) {
                switch (f[i]) {
                    case "lac" -> lac = true;
                    case "v2" -> v2 = true;
                    default -> throw new IllegalArgumentException("unknown writer flag " + f[i] + " in " + s);
                }
            }
            return new Spec(f[0], Integer.parseInt(f[1]), Integer.parseInt(f[2]), Integer.parseInt(f[3]), lac, v2);
        }
    }

    Writer(Spec spec, Main.Opts o) throws Exception {
        this.spec = spec;
        this.o = o;
        this.h = new History(o.dir.resolve("hist-" + spec.name + ".tsv"), spec.name);
    }

    @Override
    public void run() {
        try {
            ClientConfiguration cc = Main.clientConf(o.uri, spec.v2);
            if (spec.explicitLac) {
                cc.setExplictLacInterval(200);
            }
            BookKeeper bk = Main.connect(cc, o.deadlineMs);
            if (bk == null) {
                h.log("createfail", -1, -1, "", "no client before the deadline");
                return;
            }
            while (System.currentTimeMillis() < o.deadlineMs) {
                LedgerHandle lh;
                try {
                    lh = bk.createLedger(spec.ensemble, spec.writeQuorum, spec.ackQuorum, DigestType.CRC32C, PASSWORD);
                } catch (Exception e) {
                    h.log("createfail", -1, -1, "", e.toString());
                    Thread.sleep(500);
                    continue;
                }
                h.log("create", lh.getId(), -1, "",
                        spec.ensemble + "/" + spec.writeQuorum + "/" + spec.ackQuorum + (spec.v2 ? " v2" : " v3")
                                + (spec.explicitLac ? " explicit-lac" : ""));
                Path cur = o.dir.resolve("cur-" + spec.name);
                Path tmp = o.dir.resolve("cur-" + spec.name + ".tmp");
                Files.writeString(tmp, Long.toString(lh.getId()));
                Files.move(tmp, cur, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
                if (write(lh)) {
                    Thread.sleep(500); // a broken ledger: let the cluster settle before the next one
                }
            }
            bk.close();
        } catch (Exception e) {
            h.log("crash", -1, -1, "", e.toString());
            e.printStackTrace();
        }
    }

    /** Writes one ledger until it breaks, fills or the deadline; true when an add failed. */
    private boolean write(LedgerHandle lh) throws Exception {
        long ledger = lh.getId();
        AtomicBoolean broken = new AtomicBoolean();
        Semaphore window = new Semaphore(o.window);
        Map<Long, String> pending = new ConcurrentHashMap<>();
        long start = System.nanoTime();
        long intervalNanos = 1_000_000_000L / o.rate;
        long seq = 0;
        while (!broken.get() && System.currentTimeMillis() < o.deadlineMs && seq < o.entriesPerLedger) {
            if (!window.tryAcquire(100, TimeUnit.MILLISECONDS)) {
                continue;
            }
            int size = Payloads.size(o.seed, ledger, seq, 16, o.maxSize);
            byte[] p = Payloads.payload(o.seed, ledger, seq, size);
            String sha = Payloads.sha256(p);
            final long s = seq;
            pending.put(s, sha);
            h.log("invoke", ledger, s, sha, "");
            lh.asyncAddEntry(p, (rc, lh2, eid, ctx) -> {
                if (pending.remove(s) == null) {
                    return; // already logged unknown
                }
                window.release();
                if (rc == BKException.Code.OK) {
                    h.log("ok", ledger, eid, sha, eid == s ? "" : "entry id " + eid + " for add " + s);
                } else {
                    broken.set(true);
                    h.log("fail", ledger, s, sha, BKException.getMessage(rc) + " (" + rc + ")");
                }
            }, null);
            seq++;
            long wait = start + seq * intervalNanos - System.nanoTime();
            if (wait > 0) {
                TimeUnit.NANOSECONDS.sleep(wait);
            }
        }
        long giveUp = System.currentTimeMillis() + o.drainMs;
        while (!pending.isEmpty() && System.currentTimeMillis() < giveUp) {
            Thread.sleep(50);
        }
        for (Long s : pending.keySet()) {
            String sha = pending.remove(s);
            if (sha != null) {
                h.log("unknown", ledger, s, sha, "no answer after " + o.drainMs + " ms");
            }
        }
        try {
            lh.close();
            h.log("close", ledger, lh.getLastAddConfirmed(), "", "ok");
        } catch (Exception e) {
            h.log("close", ledger, lh.getLastAddConfirmed(), "", "failed: " + e);
        }
        return broken.get();
    }
}
