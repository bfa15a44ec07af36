package dev.rustbookie.chaos;

import dev.rustbookie.interop.Payloads;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Enumeration;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeper.DigestType;
import org.apache.bookkeeper.client.LedgerEntry;
import org.apache.bookkeeper.client.LedgerHandle;

/**
 * A tailing reader of one writer's ledgers (the id in {@code cur-WRITER}), opened without
 * recovery: it polls the last add confirmed, logs every new LAC it sees ("lac") and reads the
 * entries up to it, checking each against the writer's deterministic payload ("read", or
 * "readbad" with what differs). What a reader saw confirmed must survive every fault: the checker
 * holds the recovered ledger to it.
 */
final class Tailer implements Runnable {
    private final String target;
    private final Main.Opts o;
    private final History h;

    Tailer(String name, String target, Main.Opts o) throws Exception {
        this.target = target;
        this.o = o;
        this.h = new History(o.dir.resolve("hist-" + name + ".tsv"), name);
    }

    @Override
    public void run() {
        try {
            BookKeeper bk = Main.connect(Main.clientConf(o.uri, false), o.deadlineMs);
            if (bk == null) {
                h.log("readfail", -1, -1, "", "no client before the deadline");
                return;
            }
            Path cur = o.dir.resolve("cur-" + target);
            LedgerHandle lh = null;
            long ledger = -1;
            long next = 0;
            long lacSeen = -1;
            while (System.currentTimeMillis() < o.deadlineMs) {
                try {
                    long now = Files.exists(cur) ? Long.parseLong(Files.readString(cur).trim()) : -1;
                    if (now < 0) {
                        Thread.sleep(200);
                        continue;
                    }
                    if (now != ledger || lh == null) {
                        if (now != ledger) {
                            next = 0;
                            lacSeen = -1;
                        }
                        ledger = now;
                        lh = bk.openLedgerNoRecovery(ledger, DigestType.CRC32C, Writer.PASSWORD);
                    }
                    long lac = lh.readLastAddConfirmed();
                    if (lac > lacSeen) {
                        lacSeen = lac;
                        h.log("lac", ledger, lac, "", "");
                    }
                    if (lac < next) {
                        Thread.sleep(100);
                        continue;
                    }
                    long last = Math.min(lac, next + 99);
                    Enumeration<LedgerEntry> es = lh.readEntries(next, last);
                    while (es.hasMoreElements()) {
                        LedgerEntry e = es.nextElement();
                        byte[] data = e.getEntry();
                        long id = e.getEntryId();
                        byte[] want = Payloads.payload(o.seed, ledger, id, Payloads.size(o.seed, ledger, id, 16, o.maxSize));
                        if (Arrays.equals(data, want)) {
                            h.log("read", ledger, id, Payloads.sha256(data), "");
                        } else {
                            h.log("readbad", ledger, id, Payloads.sha256(data), data.length + " bytes, not the writer's "
                                    + want.length + "-byte payload");
                        }
                    }
                    next = last + 1;
                } catch (Exception e) {
                    h.log("readfail", ledger, next, "", e.toString());
                    if (lh != null) {
                        try {
                            lh.close();
                        } catch (Exception ignored) {
                            // a read-only handle; nothing to flush
                        }
                    }
                    lh = null;
                    Thread.sleep(500);
                }
            }
            bk.close();
        } catch (Exception e) {
            h.log("crash", -1, -1, "", e.toString());
            e.printStackTrace();
        }
    }
}
