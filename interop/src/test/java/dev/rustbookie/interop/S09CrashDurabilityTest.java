package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import java.util.function.LongToIntFunction;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeper.DigestType;
import org.apache.bookkeeper.client.LedgerHandle;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Timeout;

/**
 * S09 bookie crash durability (docs/interop.md §1.7): 1 Rust bookie, E1 W1 A1, journalSyncData=true;
 * 20,000 x 1 KiB pipelined (the last one after the others are acked); SIGKILL straight after the last ack; restart. The bookie must wait
 * out its stale ephemeral node and re-register within zkTimeout + 5 s; every acked entry reads
 * back byte-identical; readLastAddConfirmed >= last acked - 1. v3 and v2 legs. Not scaled down.
 */
@Tag("smoke")
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class S09CrashDurabilityTest {
    static final long SEED = 9;
    static final int N = 20_000;
    static final LongToIntFunction SIZE = e -> 1024;

    @ParameterizedTest(name = "crashAfterLastAck[{0}]")
    @ValueSource(strings = {"v3", "v2"})
    void crashAfterLastAck(String protocol) throws Exception {
        boolean v2 = protocol.equals("v2");
        try (Cluster c = new Cluster("s09-" + protocol)) {
            Bookie b = c.addRust();
            c.startAll();
            BookKeeper writer = c.client(v2);
            LedgerHandle lh = writer.createLedger(1, 1, 1, DigestType.CRC32C, Ops.PASSWORD);
            long lid = lh.getId();
            Ops.AckLog acks = new Ops.AckLog(lid);
            long t0 = System.nanoTime();
            // pipelined, except the last add: it is sent once every other add is acked, so it
            // carries LAC = N - 2 (with all adds in flight, the last one carries an older LAC)
            Ops.addAsync(lh, SEED, 0, N - 1, SIZE, acks);
            Ops.addAsync(lh, SEED, N - 1, N, SIZE, acks);
            b.kill();
            long killed = System.nanoTime();
            acks.save(c);
            Cluster.log(String.format("%d acked in %.1f s, bookie SIGKILLed", acks.acked.size(), (killed - t0) / 1e9));
            assertEquals(N, acks.acked.size());

            long t1 = System.nanoTime();
            b.launch();
            b.awaitReady(java.time.Duration.ofSeconds(30));
            double reg = (System.nanoTime() - t1) / 1e9;
            Cluster.log(String.format("re-registered %.1f s after the restart", reg));
            assertTrue(reg <= 6 + 5, "re-registered within zkTimeout + 5 s (took " + reg + " s)");

            BookKeeper reader = c.client(v2);
            LedgerHandle rh = reader.openLedgerNoRecovery(lid, DigestType.CRC32C, Ops.PASSWORD);
            long lac = rh.readLastConfirmed();
            assertTrue(lac >= acks.maxAcked() - 1, "readLastAddConfirmed " + lac + " >= last acked - 1");
            Ops.verify(rh, SEED, lid, 0, acks.maxAcked(), SIZE, true);
            c.assertHealthy();
        }
    }
}
