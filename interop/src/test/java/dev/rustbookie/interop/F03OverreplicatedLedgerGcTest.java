package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.LongToIntFunction;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeper.DigestType;
import org.apache.bookkeeper.client.BookKeeperAdmin;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.net.BookieId;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Full tier: over-replicated-ledger GC. 4 Rust bookies (and again 2 Java + 2 Rust); ledger A,
 * E3 W3 A2, 300 x 4 KiB, closed. One of A's Rust bookies (the victim) is stopped and {@code BookKeeperAdmin.recoverBookieData}
 * re-replicates its ledgers to the fourth bookie, which takes the victim out of A's ensemble.
 * The victim restarts with {@code gcOverreplicatedLedgerWaitTime=1000} and
 * {@code gcWaitTime=2000} (no forced GC): within 60 s its {@code /api/v1/bookie/list_ledgers}
 * no longer lists A and a raw read of A there answers NoSuchLedger/NoSuchEntry, while A reads
 * back byte-identical through the client from its new ensemble and no under-replication lock
 * is left behind.
 */
@Tag("full")
@Timeout(value = 420, unit = TimeUnit.SECONDS)
class F03OverreplicatedLedgerGcTest {
    static final long SEED = 303;
    static final int ENTRIES = 300;
    static final LongToIntFunction SIZE = e -> 4096;

    static List<Long> ledgersOf(Bookie b) throws Exception {
        String body = b.http("GET", "/api/v1/bookie/list_ledgers", null).body();
        Matcher m = Pattern.compile("\"ledgers\"\\s*:\\s*\\[([^\\]]*)\\]").matcher(body);
        assertTrue(m.find(), "list_ledgers of " + b + ": " + body);
        List<Long> out = new ArrayList<>();
        for (String s : m.group(1).split(",")) {
            if (!s.isBlank()) {
                out.add(Long.parseLong(s.trim()));
            }
        }
        return out;
    }

    @Test
    void overreplicatedLedgerIsReclaimed() throws Exception {
        scenario("f03", 0);
    }

    @Test
    void overreplicatedLedgerIsReclaimedInAMixedCluster() throws Exception {
        scenario("f03-mixed", 2);
    }

    static void scenario(String name, int javaBookies) throws Exception {
        try (Cluster c = new Cluster(name)) {
            for (int i = 0; i < javaBookies; i++) {
                c.addJava();
            }
            for (int i = javaBookies; i < 4; i++) {
                c.addRust();
            }
            c.startAll();
            BookKeeper bk = c.client(false);
            LedgerHandle a = bk.createLedger(3, 3, 2, DigestType.CRC32C, Ops.PASSWORD);
            Ops.addAsync(a, SEED, 0, ENTRIES, SIZE, null);
            a.close();
            long aid = a.getId();
            List<BookieId> ensemble = a.getLedgerMetadata().getAllEnsembles().get(0L);
            Bookie victim = null;
            for (Bookie x : c.bookies) {
                if (!x.isJava() && ensemble.contains(x.bookieId())) {
                    victim = x;
                    break;
                }
            }
            assertTrue(victim != null, "a bookie of " + ensemble);
            assertTrue(ledgersOf(victim).contains(aid), victim + " holds ledger " + aid);

            // Into its entry logs and index, not only its journal.
            assertEquals(200, victim.http("PUT", "/api/v1/bookie/flush", "").statusCode(), "flush " + victim);
            victim.stop();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (c.isRegistered(victim.id()) && System.nanoTime() < deadline) {
                Thread.sleep(100);
            }
            BookKeeperAdmin admin = c.admin();
            admin.recoverBookieData(victim.bookieId());
            LedgerHandle after = c.client(false).openLedgerNoRecovery(aid, DigestType.CRC32C, Ops.PASSWORD);
            for (List<BookieId> e : after.getLedgerMetadata().getAllEnsembles().values()) {
                assertFalse(e.contains(victim.bookieId()), "recovery moved " + aid + " off " + victim + ": " + e);
            }
            Cluster.log("ledger " + aid + " moved off " + victim + ": "
                    + after.getLedgerMetadata().getAllEnsembles());

            victim.extraConf.put("gcOverreplicatedLedgerWaitTime", "1000");
            victim.extraConf.put("gcWaitTime", "2000");
            victim.start();
            List<Long> before = ledgersOf(victim);
            Cluster.log(victim + " after the restart lists " + before);
            assertTrue(before.contains(aid), victim + " still holds " + aid + " after the restart");
            Raw raw = c.raw(false);
            deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            boolean gone = false;
            while (!gone && System.nanoTime() < deadline) {
                Thread.sleep(500);
                gone = !ledgersOf(victim).contains(aid);
            }
            List<Long> now = ledgersOf(victim);
            Cluster.log(victim + " lists " + now + "; gc_details "
                    + victim.http("GET", "/api/v1/bookie/gc_details", null).body());
            assertTrue(gone, victim + " dropped over-replicated ledger " + aid + " within 60 s: " + now);
            int rc0 = raw.read(victim.bookieId(), aid, 0).rc();
            int rcLast = raw.read(victim.bookieId(), aid, ENTRIES - 1).rc();
            assertTrue((rc0 == -7 || rc0 == -13) && (rcLast == -7 || rcLast == -13),
                    "raw reads of " + aid + " on " + victim + ": " + rc0 + ", " + rcLast);
            assertEquals(List.of(), c.children("/underreplication/locks"),
                    "the GC took A's under-replication lock (creating its parent) and released it");
            LedgerHandle rh = c.client(false).openLedger(aid, DigestType.CRC32C, Ops.PASSWORD);
            Ops.verify(rh, SEED, aid, 0, ENTRIES - 1, SIZE, false);
            c.assertHealthy();
        }
    }
}
