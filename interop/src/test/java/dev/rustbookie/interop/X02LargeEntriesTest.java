package dev.rustbookie.interop;

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
 * Extra: entries of 1 MiB and 4 MiB (the bookie's frame limit and the client's
 * nettyMaxFrameSizeBytes are both 5 MiB): 3 Rust bookies, E3 W3 A2, 8 x 1 MiB then 4 x 4 MiB
 * (pipelined), read back byte-identical after close; v3 and v2.
 */
@Tag("smoke")
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class X02LargeEntriesTest {
    static final long SEED = 102;
    static final LongToIntFunction SIZE = e -> e < 8 ? (1 << 20) : (4 << 20);

    @ParameterizedTest(name = "largeEntries[{0}]")
    @ValueSource(strings = {"v3", "v2"})
    void largeEntries(String protocol) throws Exception {
        boolean v2 = protocol.equals("v2");
        try (Cluster c = new Cluster("x02-" + protocol)) {
            for (int i = 0; i < 3; i++) {
                c.addRust();
            }
            c.startAll();
            BookKeeper bk = c.client(v2);
            LedgerHandle lh = bk.createLedger(3, 3, 2, DigestType.CRC32C, Ops.PASSWORD);
            long lid = lh.getId();
            Ops.addAsync(lh, SEED, 0, 12, SIZE, null);
            lh.close();
            LedgerHandle rh = c.client(v2).openLedger(lid, DigestType.CRC32C, Ops.PASSWORD);
            Ops.verify(rh, SEED, lid, 0, 11, SIZE, false);
            c.assertHealthy();
        }
    }
}
