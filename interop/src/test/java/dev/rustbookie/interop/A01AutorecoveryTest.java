package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.LongToIntFunction;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeperAdmin;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.client.api.LedgerMetadata;
import org.apache.bookkeeper.net.BookieId;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A01 (issue 45): a cluster of ours heals itself. Four of our bookies with
 * autoRecoveryDaemonEnabled=true (no Java autorecovery anywhere); Java client ledgers E3 W2 A2,
 * closed and open (their writer gone); one bookie SIGKILLed for good. One of ours is elected
 * auditor, marks the lost bookie's ledgers, and our workers copy the missing fragments and
 * rewrite the metadata (the open ledgers fenced, recovered and closed after the grace period):
 * within a bound no ledger names the dead bookie. Then a second bookie is killed, and every
 * acknowledged entry still reads back byte for byte through the Java client. The admin routes
 * answer as Java's (who_is_auditor, status, list_under_replicated_ledger).
 */
@Tag("smoke")
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class A01AutorecoveryTest {
    static final long SEED = 45;
    static final LongToIntFunction SIZE = e -> 100 + (int) ((e * 7919) % 4000);

    @Test
    void ourBookiesHealTheLossOfOne() throws Exception {
        try (Cluster c = new Cluster("a01")) {
            for (int i = 0; i < 4; i++) {
                Bookie b = c.addRust();
                b.extraConf.put("autoRecoveryDaemonEnabled", "true");
                b.extraConf.put("openLedgerRereplicationGracePeriod", "3000");
                b.extraConf.put("rwRereplicateBackoffMs", "1000");
            }
            c.startAll();
            Bookie first = c.bookies.get(0);
            waitFor("an auditor", 30, () -> first.http("GET", "/api/v1/autorecovery/who_is_auditor", null).statusCode() == 200);
            String auditor = first.http("GET", "/api/v1/autorecovery/who_is_auditor", null).body();
            assertTrue(auditor.startsWith("Auditor: 127.0.0.1:"), auditor);
            assertEquals("{\n  \"enabled\" : true\n}", first.http("GET", "/api/v1/autorecovery/status", null).body());

            // Ledgers: closed ones, and open ones whose writer goes away.
            BookKeeper writer = c.client(false);
            List<Long> ids = new ArrayList<>();
            List<Ops.AckLog> logs = new ArrayList<>();
            List<Long> open = new ArrayList<>();
            for (int l = 0; l < 8; l++) {
                LedgerHandle lh = writer.createLedger(3, 2, 2, BookKeeper.DigestType.CRC32C, Ops.PASSWORD);
                Ops.AckLog log = new Ops.AckLog(lh.getId());
                Ops.addAsync(lh, SEED, 0, 300, SIZE, log);
                ids.add(lh.getId());
                logs.add(log);
                if (l < 6) {
                    lh.close();
                } else {
                    open.add(lh.getId());
                }
            }
            writer.close(); // the open ledgers stay open in their metadata
            for (Ops.AckLog log : logs) {
                log.save(c);
            }

            // One bookie lost for good: not the auditor (the election is not what is tested) nor
            // the one the routes are asked, the one in the most open ledgers (so one open ledger
            // is recovered at least: an open ledger has three of the four).
            BookKeeperAdmin admin = c.admin();
            java.util.Map<Long, LedgerMetadata> before = new java.util.HashMap<>();
            for (long id : ids) {
                before.put(id, admin.getLedgerMetadata(admin.openLedgerNoRecovery(id)));
            }
            Bookie lost = c.bookies.stream().filter(b -> b != first && !auditor.endsWith(b.id()))
                    .max(java.util.Comparator.comparingLong(b -> open.stream()
                            .filter(id -> A02AutorecoveryMixedTest.names(before.get(id), b.bookieId())).count()))
                    .orElseThrow();
            BookieId lostId = lost.bookieId();
            List<Long> touched = ids.stream().filter(id -> A02AutorecoveryMixedTest.names(before.get(id), lostId)).toList();
            Cluster.log("losing " + lost + ": ledgers " + touched + " name it, open ones " + open);
            long t0 = System.nanoTime();
            lost.kill();
            waitFor("no ledger to name " + lostId + " and those that did closed", 120, () -> {
                for (long id : ids) {
                    LedgerMetadata md = admin.getLedgerMetadata(admin.openLedgerNoRecovery(id));
                    if (A02AutorecoveryMixedTest.names(md, lostId) || (touched.contains(id) && !md.isClosed())) {
                        return false;
                    }
                }
                return true;
            });
            Cluster.log(String.format("healed: every ledger off %s, those it held closed, %.1f s after the kill",
                    lostId, (System.nanoTime() - t0) / 1e9));
            waitFor("no under-replicated ledger left", 30, () ->
                    first.http("GET", "/api/v1/autorecovery/list_under_replicated_ledger", null).statusCode() == 404);
            assertEquals("No under replicated ledgers found",
                    first.http("GET", "/api/v1/autorecovery/list_under_replicated_ledger", null).body());
            for (int i = 0; i < ids.size(); i++) {
                if (touched.contains(ids.get(i))) {
                    LedgerMetadata md = admin.getLedgerMetadata(admin.openLedgerNoRecovery(ids.get(i)));
                    assertTrue(md.getLastEntryId() >= logs.get(i).maxAcked(),
                            "ledger " + ids.get(i) + " closed at " + md.getLastEntryId() + " keeps its acknowledged entries");
                }
            }

            // The daemons' series in the bookies' /metrics: one auditor, the copies counted
            // under Java's name (scope replication_, as in a Java bookie).
            int auditors = 0;
            long replicated = 0;
            for (Bookie b : c.bookies) {
                if (b.isAlive()) {
                    String m = b.http("GET", "/metrics", null).body();
                    auditors += m.contains("\nautorecovery_is_auditor 1\n") ? 1 : 0;
                    java.util.regex.Matcher r = java.util.regex.Pattern
                            .compile("\nreplication_replication_worker_NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED (\\d+)\n").matcher(m);
                    assertTrue(r.find(), b + " /metrics has the worker's counter");
                    replicated += Long.parseLong(r.group(1));
                }
            }
            assertEquals(1, auditors, "one auditor in /metrics");
            assertTrue(replicated >= touched.size() - open.size(), "ledgers replicated per /metrics: " + replicated);

            // A second loss loses nothing.
            Bookie second = c.bookies.stream().filter(b -> b != lost && b != first && !auditor.endsWith(b.id())).findFirst()
                    .orElseGet(() -> c.bookies.stream().filter(b -> b != lost && !auditor.endsWith(b.id())).findFirst().orElseThrow());
            second.kill();
            BookKeeper reader = c.client(false);
            for (int i = 0; i < ids.size(); i++) {
                long id = ids.get(i);
                try (LedgerHandle rh = reader.openLedgerNoRecovery(id, BookKeeper.DigestType.CRC32C, Ops.PASSWORD)) {
                    // a ledger the first loss did not touch may still be open: read past its LAC
                    Ops.verify(rh, SEED, id, 0, logs.get(i).maxAcked(), SIZE, !rh.isClosed());
                }
            }
            Cluster.log("every acknowledged entry read back with two of four bookies lost");
            for (Bookie b : c.bookies) {
                if (b.isAlive()) {
                    assertFalse(b.logText().contains("panicked"), b + " log");
                }
            }
            c.assertHealthy();
        }
    }

    interface Check {
        boolean ok() throws Exception;
    }

    static void waitFor(String what, int seconds, Check check) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        Exception last = null;
        while (System.nanoTime() < deadline) {
            try {
                if (check.ok()) {
                    return;
                }
            } catch (Exception e) {
                last = e;
            }
            Thread.sleep(250);
        }
        throw new AssertionError("timed out waiting for " + what + (last == null ? "" : " (last error: " + last + ")"));
    }
}
