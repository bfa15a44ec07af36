package dev.rustbookie.interop;

import java.util.function.LongToIntFunction;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeper.DigestType;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.conf.ClientConfiguration;

/**
 * The ledgers the takeover tier (X06-X08) has a Java bookie hold before it is stopped: written
 * by the real Java client, E1 W1 A1 on that bookie. `closed` (N entries, closed); `zombie`
 * (N entries, fenced by a recovery open while its writer still has it); `deleted` (20 entries,
 * deleted in the metadata, not yet collected by the bookie); `lac` (20 entries, then a pause
 * past the explicit-LAC interval, so the writer sends its explicit LAC); `live` (N entries
 * acknowledged, its writer still open).
 */
final class JavaLedgers {
    final BookKeeper writer;
    final LedgerHandle closed;
    final LedgerHandle zombie;
    final LedgerHandle deleted;
    final LedgerHandle lac;
    final LedgerHandle live;
    final Ops.AckLog acks;
    private final long seed;
    private final int n;
    private final LongToIntFunction size;
    /** The live ledger's last acknowledged entry when the bookie stopped. */
    long acked = -1;

    JavaLedgers(Cluster c, long seed, int n, LongToIntFunction size) throws Exception {
        this.seed = seed;
        this.n = n;
        this.size = size;
        ClientConfiguration cc = c.clientConf(false);
        cc.setExplictLacInterval(100); // sic: Java's spelling
        writer = c.client(cc);
        closed = create(writer);
        Ops.addSync(closed, seed, 0, n, size, null);
        closed.close();
        zombie = create(writer);
        Ops.addSync(zombie, seed, 0, n, size, null);
        c.client(false).openLedger(zombie.getId(), DigestType.CRC32C, Ops.PASSWORD).close();
        deleted = create(writer);
        Ops.addSync(deleted, seed, 0, 20, size, null);
        deleted.close();
        writer.deleteLedger(deleted.getId());
        lac = create(writer);
        Ops.addSync(lac, seed, 0, 20, size, null);
        // Past the explicit-LAC interval with no adds, the writer sends its explicit LAC (19;
        // entry 19 carried 18). On a loaded machine its timer can be late: wait until the Java
        // bookie answers 19, so that what the takeover must serve is known to be there.
        BookKeeper reader = c.client(false);
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(20);
        long explicit = -1;
        while (explicit < 19 && System.nanoTime() < deadline) {
            Thread.sleep(100);
            LedgerHandle r = reader.openLedgerNoRecovery(lac.getId(), DigestType.CRC32C, Ops.PASSWORD);
            explicit = r.readExplicitLastConfirmed();
        }
        if (explicit != 19) {
            throw new IllegalStateException("the writer's explicit LAC never reached the Java bookie: " + explicit);
        }
        live = create(writer);
        acks = new Ops.AckLog(live.getId());
        Ops.addSync(live, seed, 0, n, size, acks);
        // Java's DbLedgerStorage persists an explicit LAC (its RocksDB ledger metadata) only at a
        // checkpoint that has entries to flush in that ledger's directory, while the journal's
        // lastMark moves past the LAC's record at every checkpoint: with two ledger directories
        // and no more adds in `lac`'s, a killed Java bookie loses the explicit LAC itself (and
        // so serves 18, as ours then does). An entry in a ledger of `lac`'s directory (Java:
        // ledger id mod directories) makes the next checkpoint persist it.
        LedgerHandle filler = create(writer);
        while (filler.getId() % 2 != lac.getId() % 2) {
            filler.close();
            filler = create(writer);
        }
        Ops.addSync(filler, seed, 0, 1, size, null);
        filler.close();
    }

    /**
     * Stops the bookie: SIGTERM, or SIGKILL in the middle of the live writer's adds, a moment
     * after a checkpoint (with flushInterval=1000: older entries in the entry logs and index,
     * the newest only in the journal).
     */
    void stop(JavaBookie j, String how) throws Exception {
        if (how.equals("SIGKILL")) {
            Thread.sleep(1500); // a checkpoint
            for (long e = n; e < 10L * n; e++) {
                byte[] p = Payloads.payload(seed, live.getId(), e, size.applyAsInt(e));
                live.asyncAddEntry(p, (rc, h, eid, ctx) -> {
                    if (rc == 0) {
                        acks.ack(eid, p);
                    }
                }, null);
            }
            while (acks.acked.size() < 2 * n) {
                Thread.sleep(1);
            }
            j.kill();
        } else {
            j.stop();
        }
        acked = acks.maxAcked();
        Cluster.log(how + ": Java bookie stopped, live ledger acked through " + acked);
    }

    static LedgerHandle create(BookKeeper bk) throws Exception {
        return bk.createLedger(1, 1, 1, DigestType.CRC32C, Ops.PASSWORD);
    }
}
