package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeper.DigestType;
import org.apache.bookkeeper.client.LedgerHandle;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Extra: a wrong master key. A ledger written by the client (E1 W1 A1 on one Rust bookie); raw
 * adds to that ledger with another master key are refused UnauthorizedAccess (-102) on v3 and
 * v2; the right key is accepted (a raw add of the next entry); the ledger still reads back.
 */
@Tag("smoke")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class X01WrongMasterKeyTest {
    static final long SEED = 101;

    @Test
    void wrongMasterKeyIsUnauthorized() throws Exception {
        try (Cluster c = new Cluster("x01")) {
            Bookie b = c.addRust();
            c.startAll();
            BookKeeper bk = c.client(false);
            LedgerHandle lh = bk.createLedger(1, 1, 1, DigestType.CRC32C, Ops.PASSWORD);
            long lid = lh.getId();
            Ops.addSync(lh, SEED, 0, 10, e -> 100, null);
            byte[] wrong = "not-the-key-0123456789".getBytes(StandardCharsets.UTF_8);
            wrong = java.util.Arrays.copyOf(wrong, 20);
            for (boolean v2 : new boolean[] {false, true}) {
                Raw raw = c.raw(v2);
                int rc = raw.add(b.bookieId(), lid, wrong, 10, 9, Payloads.payload(SEED, lid, 10, 100), 0);
                assertEquals(-102, rc, (v2 ? "v2" : "v3") + " raw add with a wrong master key");
            }
            Raw raw = c.raw(false);
            int rc = raw.add(b.bookieId(), lid, lh.getLedgerKey(), 10, 9, Payloads.payload(SEED, lid, 10, 100), 0);
            assertEquals(0, rc, "raw add with the ledger's own key");
            lh.close();
            LedgerHandle rh = c.client(false).openLedger(lid, DigestType.CRC32C, Ops.PASSWORD);
            Ops.verify(rh, SEED, lid, 0, 9, e -> 100, false);
            c.assertHealthy();
        }
    }
}
