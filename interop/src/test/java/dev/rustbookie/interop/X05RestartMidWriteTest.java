package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.LongToIntFunction;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeper.DigestType;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.net.BookieId;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Timeout;

/**
 * Extra: a bookie restarted mid-write. 4 Rust bookies, E3 W3 A2, a writer at 500 adds/s for
 * 9 s; at 2 s one bookie of the ledger's ensemble is SIGKILLed (restarted at 3 s), at 6 s another
 * one is restarted gracefully (SIGTERM). Every add succeeds (ensemble changes), every entry reads
 * back byte-identical, and the restarted bookies register again. v3 and v2.
 */
@Tag("smoke")
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class X05RestartMidWriteTest {
    static final long SEED = 105;
    static final LongToIntFunction SIZE = e -> Payloads.size(SEED, 0, e, 10, 4096);

    @ParameterizedTest(name = "restartMidWrite[{0}]")
    @ValueSource(strings = {"v3", "v2"})
    void restartMidWrite(String protocol) throws Exception {
        boolean v2 = protocol.equals("v2");
        try (Cluster c = new Cluster("x05-" + protocol)) {
            for (int i = 0; i < 4; i++) {
                c.addRust();
            }
            c.startAll();
            BookKeeper bk = c.client(v2);
            LedgerHandle lh = bk.createLedger(3, 3, 2, DigestType.CRC32C, Ops.PASSWORD);
            long lid = lh.getId();
            List<BookieId> ens = lh.getLedgerMetadata().getAllEnsembles().get(0L);
            Bookie crash = c.bookies.stream().filter(b -> ens.contains(b.bookieId())).findFirst().orElseThrow();

            ConcurrentHashMap<Long, Integer> rcs = new ConcurrentHashMap<>();
            int total = 4500;
            CompletableFuture<Void> done = new CompletableFuture<>();
            Thread writer = new Thread(() -> {
                long start = System.nanoTime();
                for (long i = 0; i < total; i++) {
                    long due = start + i * 2_000_000L;
                    long now;
                    while ((now = System.nanoTime()) < due) {
                        java.util.concurrent.locks.LockSupport.parkNanos(due - now);
                    }
                    final long call = i;
                    lh.asyncAddEntry(Payloads.payload(SEED, lid, call, SIZE.applyAsInt(call)), (rc, h, eid, ctx) -> {
                        rcs.put(call, rc == 0 && eid != call ? -9999 : rc);
                        if (rcs.size() == total) {
                            done.complete(null);
                        }
                    }, null);
                }
            }, "writer");
            writer.start();
            Thread.sleep(2000);
            crash.kill();
            Cluster.log("SIGKILLed " + crash);
            Thread.sleep(1000);
            crash.launch();
            Thread.sleep(2000);
            // a bookie of the current ensemble other than the crashed one, restarted gracefully
            List<BookieId> cur = lh.getLedgerMetadata().getAllEnsembles().lastEntry().getValue();
            Bookie graceful = c.bookies.stream()
                    .filter(b -> b != crash && cur.contains(b.bookieId())).findFirst().orElseThrow();
            graceful.stop();
            Cluster.log("stopped " + graceful);
            graceful.launch();
            done.get(60, TimeUnit.SECONDS);
            writer.join();
            crash.awaitReady(java.time.Duration.ofSeconds(30));
            graceful.awaitReady(java.time.Duration.ofSeconds(30));
            long failed = rcs.values().stream().filter(rc -> rc != 0).count();
            Cluster.log("ensembles: " + lh.getLedgerMetadata().getAllEnsembles());
            assertEquals(0, failed, "failed adds (rc != 0 or a wrong entry id): " + failed);
            assertTrue(lh.getLedgerMetadata().getAllEnsembles().size() >= 2, "ensemble changes happened");
            lh.close();
            LedgerHandle rh = c.client(v2).openLedger(lid, DigestType.CRC32C, Ops.PASSWORD);
            assertEquals(total - 1, rh.getLastAddConfirmed());
            Ops.verify(rh, SEED, lid, 0, total - 1, SIZE, false);
            c.assertHealthy();
        }
    }
}
