package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;

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
 * A write burst larger than a small write cache (dbStorage_writeCacheMaxSizeMb=16): 3 bookies
 * of one kind, E3 W3 A2, v3, 2,500 pipelined adds of 32 KiB (80 MiB). A Java bookie
 * (DbLedgerStorage) holds an add while its write cache is full (up to dbStorage_maxThrottleTimeMs,
 * 10 s) and every add succeeds. Ours once answered such an add ETOOMANYREQUESTS at once; the
 * client took the bookie for failed, could not replace it (3 bookies) and the ledger's adds
 * failed with -6 (NotEnoughBookies). Ours now stops reading and lets the adds it already read
 * into an overshoot of the cache. Smoke tier: our bookies; full tier: the Java reference.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class F01WriteCacheBurstTest {
    static final long SEED = 201;
    static final LongToIntFunction SIZE = e -> 32 << 10;

    @Tag("smoke")
    @ParameterizedTest(name = "burstBeyondWriteCache[{0}]")
    @ValueSource(strings = {"rust"})
    void ours(String impl) throws Exception {
        burstBeyondWriteCache(impl);
    }

    @Tag("full")
    @ParameterizedTest(name = "burstBeyondWriteCache[{0}]")
    @ValueSource(strings = {"java"})
    void reference(String impl) throws Exception {
        burstBeyondWriteCache(impl);
    }

    void burstBeyondWriteCache(String impl) throws Exception {
        try (Cluster c = new Cluster("f01-" + impl)) {
            for (int i = 0; i < 3; i++) {
                Bookie b = impl.equals("java") ? c.addJava() : new RustBookie(c, "rust" + (i + 1));
                if (!impl.equals("java")) {
                    c.bookies.add(b);
                }
                b.extraConf.put("dbStorage_writeCacheMaxSizeMb", "16");
            }
            c.startAll();
            BookKeeper bk = c.client(false);
            LedgerHandle lh = bk.createLedger(3, 3, 2, DigestType.CRC32C, Ops.PASSWORD);
            Ops.AckLog acks = new Ops.AckLog(lh.getId());
            Ops.addAsync(lh, SEED, 0, 2500, SIZE, acks);
            assertEquals(2500, acks.acked.size());
            lh.close();
            Ops.verify(c.client(false).openLedger(lh.getId(), DigestType.CRC32C, Ops.PASSWORD), SEED, lh.getId(), 0,
                    2499, SIZE, false);
            c.assertHealthy();
        }
    }
}
