package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
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
 * A02 (issue 45): autorecovery in mixed clusters. Four of our bookies and a Java one (4.18.2
 * with its admin server), Java client ledgers E3 W2 A2 (closed, and open with their writer
 * gone), one of our bookies SIGKILLed for good:
 * <ul>
 * <li>{@link #javaAuditorOurWorkers}: Java's AuditorElector (own JVM) is the auditor, two of our
 * `bookie autorecovery --role worker` processes do the copying; the shell's whoisauditor,
 * lostbookierecoverydelay, autorecovery (toggle), listunderreplicated, triggeraudit and
 * decommissionbookie run against it;</li>
 * <li>{@link #ourAuditorJavaWorkers}: our `bookie autorecovery --role auditor` marks the lost
 * bookie's ledgers (listed alike by the shell and by the route on ours and on Java's bookie),
 * then two of Java's ReplicationWorkers (own JVMs) heal them; the decommission route of ours
 * removes the lost bookie's cookie once its data is safe.</li>
 * </ul>
 * In both the autorecovery routes of our bookie (and list_bookies, cluster_info) answer byte for
 * byte as the Java bookie's, every
 * ledger ends closed with no ensemble naming the lost bookie, and a second loss then loses no
 * acknowledged entry.
 */
@Timeout(value = 420, unit = TimeUnit.SECONDS)
class A02AutorecoveryMixedTest {
    static final long SEED = 4502;
    static final LongToIntFunction SIZE = e -> 100 + (int) ((e * 7919) % 4000);
    static final List<String> GET_ROUTES = List.of(
            "/api/v1/autorecovery/status",
            "/api/v1/autorecovery/who_is_auditor",
            "/api/v1/autorecovery/lost_bookie_recovery_delay",
            "/api/v1/autorecovery/list_under_replicated_ledger",
            // the cluster as Java's admin routes describe it (issue 46)
            "/api/v1/bookie/list_bookies",
            "/api/v1/bookie/list_bookies?type=ro",
            "/api/v1/bookie/cluster_info");

    @Test
    @Tag("smoke")
    void javaAuditorOurWorkers() throws Exception {
        try (Cluster c = new Cluster("a02-java-auditor")) {
            Setup s = setup(c);
            AutoRecovery auditor = c.track(new AutoRecovery(c, "java-auditor", AutoRecovery.Kind.JAVA_AUDITOR));
            auditor.start();
            List<AutoRecovery> workers = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                AutoRecovery w = c.track(new AutoRecovery(c, "our-worker-" + i, AutoRecovery.Kind.OURS_WORKER));
                w.start();
                workers.add(w);
            }
            A01AutorecoveryTest.waitFor("the Java auditor", 60, () ->
                    s.ours.http("GET", "/api/v1/autorecovery/who_is_auditor", null).body().equals("Auditor: " + auditor.id()));
            assertTrue(Tools.bookieShell(c, "whoisauditor").contains(auditor.id()), "shell whoisauditor names the Java auditor");
            sameAnswers(s);

            // The shell's lost-bookie delay and toggle, seen by our routes as by Java's.
            assertTrue(says(Tools.bookieShell(c, "lostbookierecoverydelay", "-s", "7"), "7"), "shell set the delay");
            assertEquals("lostBookieRecoveryDelay value: 7",
                    s.ours.http("GET", "/api/v1/autorecovery/lost_bookie_recovery_delay", null).body());
            assertTrue(says(Tools.bookieShell(c, "lostbookierecoverydelay", "-g"), "7"), "shell reads the delay");
            Tools.bookieShell(c, "autorecovery", "-d");
            assertEquals("{\n  \"enabled\" : false\n}", s.ours.http("GET", "/api/v1/autorecovery/status", null).body());
            sameAnswers(s);
            // our PUT routes turn it back, the shell reads what they wrote
            assertEquals(200, s.ours.http("PUT", "/api/v1/autorecovery/status?enabled=true", null).statusCode());
            assertEquals(200, s.ours.http("PUT", "/api/v1/autorecovery/lost_bookie_recovery_delay",
                    "{\"delay_seconds\": 0}").statusCode());
            assertTrue(says(Tools.bookieShell(c, "lostbookierecoverydelay", "-g"), "0"), "shell reads our route's delay");
            sameAnswers(s);

            long t0 = System.nanoTime();
            s.lost.kill();
            healed(c, s, 150);
            Cluster.log(String.format("Java auditor + our workers: healed %.1f s after the kill", (System.nanoTime() - t0) / 1e9));
            String listed = Tools.bookieShell(c, "listunderreplicated");
            if (listed.contains("Under replicated ledger count")) { // 4.18's shell prints the count
                assertTrue(listed.contains("Under replicated ledger count {count=0}"), listed);
            }
            assertEquals(200, s.ours.http("PUT", "/api/v1/autorecovery/trigger_audit", null).statusCode());
            Tools.bookieShell(c, "triggeraudit");
            // decommissionbookie: the lost bookie's data is safe, its cookie goes.
            String dec = Tools.bookieShell(c, "decommissionbookie", "-bookieid", s.lostId.toString());
            assertFalse(c.zk().exists(c.root + "/cookies/" + s.lostId, false) != null, "cookie still there:\n" + dec);
            sameAnswers(s);
            secondLoss(c, s);
            for (AutoRecovery w : workers) {
                assertTrue(w.isAlive(), w.name + " exited");
                assertFalse(w.logText().contains("panicked"), w.name + " log");
            }
            assertTrue(auditor.isAlive(), "the Java auditor exited");
            c.assertHealthy();
        }
    }

    /** In the full tier: A01 runs our auditor in CI, and CI's 35 minutes are nearly spent. */
    @Test
    @Tag("full")
    void ourAuditorJavaWorkers() throws Exception {
        try (Cluster c = new Cluster("a02-our-auditor")) {
            Setup s = setup(c);
            AutoRecovery auditor = c.track(new AutoRecovery(c, "our-auditor", AutoRecovery.Kind.OURS_AUDITOR));
            auditor.start();
            A01AutorecoveryTest.waitFor("our auditor", 60, () ->
                    s.java.http("GET", "/api/v1/autorecovery/who_is_auditor", null).body().equals("Auditor: " + auditor.id()));
            assertTrue(Tools.bookieShell(c, "whoisauditor").contains(auditor.id()), "shell whoisauditor names our auditor");
            sameAnswers(s);

            // No worker yet: the auditor's marks stay for everyone to list.
            Set<Long> expected = s.touched;
            assertFalse(expected.isEmpty(), "some ledger holds the bookie to be lost");
            s.lost.kill();
            A01AutorecoveryTest.waitFor("our auditor to mark " + expected, 60, () ->
                    listed(s.ours.http("GET", "/api/v1/autorecovery/list_under_replicated_ledger", null)).equals(expected));
            sameAnswers(s);
            assertEquals(s.java.http("GET", "/api/v1/autorecovery/list_under_replicated_ledger?printmissingreplica", null).body(),
                    s.ours.http("GET", "/api/v1/autorecovery/list_under_replicated_ledger?printmissingreplica", null).body());
            String missing = s.ours.http("GET", "/api/v1/autorecovery/list_under_replicated_ledger?missingreplica="
                    + s.lostId, null).body();
            assertEquals(expected, listed(missing), missing);
            String shell = Tools.bookieShell(c, "listunderreplicated", "-pmr");
            for (long id : expected) {
                assertTrue(shell.contains(Long.toString(id)), "shell lists " + id + ":\n" + shell);
            }
            assertTrue(shell.contains(s.lostId.toString()), "shell names the missing replica:\n" + shell);

            long t0 = System.nanoTime();
            List<AutoRecovery> workers = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                AutoRecovery w = c.track(new AutoRecovery(c, "java-worker-" + i, AutoRecovery.Kind.JAVA_WORKER));
                w.start();
                workers.add(w);
            }
            healed(c, s, 150);
            Cluster.log(String.format("our auditor + Java workers: healed %.1f s after the workers started",
                    (System.nanoTime() - t0) / 1e9));
            sameAnswers(s);
            // The decommission route: answered at once, the cookie goes (delete_cookie, as Java
            // reads it since 4.16) once the data is safe.
            HttpResponse<String> dec = s.ours.http("PUT", "/api/v1/autorecovery/decommission",
                    "{\"bookie_src\": \"" + s.lostId + "\", \"delete_cookie\": \"true\"}");
            assertEquals(200, dec.statusCode(), dec.body());
            assertEquals("Success send decommission Bookie command " + s.lostId, dec.body());
            A01AutorecoveryTest.waitFor("the decommissioned cookie to go", 120, () ->
                    c.zk().exists(c.root + "/cookies/" + s.lostId, false) == null);
            secondLoss(c, s);
            for (AutoRecovery w : workers) {
                assertTrue(w.isAlive(), w.name + " exited");
            }
            assertTrue(auditor.isAlive(), "our auditor exited");
            assertFalse(auditor.logText().contains("panicked"), "our auditor's log");
            c.assertHealthy();
        }
    }

    /** The cluster, its ledgers, the bookie to lose. */
    static final class Setup {
        Bookie ours;
        Bookie java;
        Bookie lost;
        BookieId lostId;
        final List<Long> ids = new ArrayList<>();
        final List<Ops.AckLog> logs = new ArrayList<>();
        /** The ledgers whose metadata names the bookie to lose. */
        final Set<Long> touched = new TreeSet<>();
    }

    static Setup setup(Cluster c) throws Exception {
        Setup s = new Setup();
        for (int i = 0; i < 4; i++) {
            c.addRust();
        }
        s.java = c.addJava();
        c.startAll();
        BookKeeper writer = c.client(false);
        List<Long> open = new ArrayList<>();
        for (int l = 0; l < 10; l++) {
            LedgerHandle lh = writer.createLedger(3, 2, 2, BookKeeper.DigestType.CRC32C, Ops.PASSWORD);
            Ops.AckLog log = new Ops.AckLog(lh.getId());
            Ops.addAsync(lh, SEED, 0, 200, SIZE, log);
            s.ids.add(lh.getId());
            s.logs.add(log);
            if (l < 8) {
                lh.close();
            } else {
                open.add(lh.getId());
            }
        }
        writer.close(); // two ledgers stay open in their metadata, their writer gone
        for (Ops.AckLog log : s.logs) {
            log.save(c);
        }
        // The bookie to lose: one of ours in the most open ledgers (an open ledger's ensemble has
        // two of ours at least, so one open ledger is recovered at least), then the most ledgers.
        BookKeeperAdmin admin = c.admin();
        Map<Long, LedgerMetadata> md = new HashMap<>();
        for (long id : s.ids) {
            md.put(id, admin.getLedgerMetadata(admin.openLedgerNoRecovery(id)));
        }
        s.lost = c.bookies.stream().filter(b -> !b.isJava())
                .max(Comparator.comparingLong((Bookie b) -> open.stream().filter(id -> names(md.get(id), b.bookieId())).count())
                        .thenComparingLong(b -> s.ids.stream().filter(id -> names(md.get(id), b.bookieId())).count()))
                .orElseThrow();
        s.lostId = s.lost.bookieId();
        s.ours = c.bookies.stream().filter(b -> !b.isJava() && b != s.lost).findFirst().orElseThrow();
        for (long id : s.ids) {
            if (names(md.get(id), s.lostId)) {
                s.touched.add(id);
            }
        }
        Cluster.log("losing " + s.lost + ": ledgers " + s.touched + " name it, open ones " + open);
        return s;
    }

    static boolean names(LedgerMetadata md, BookieId id) {
        return md.getAllEnsembles().values().stream().anyMatch(e -> e.contains(id));
    }

    /** The shell's lostbookierecoverydelay line gives the value (4.14: "ZK: 7", 4.18: "{delay=7}"). */
    static boolean says(String out, String value) {
        return out.matches("(?s).*LostBookieRecoveryDelay value in ZK(: | \\{delay=)" + value + "\\b.*");
    }

    /** Our bookie's autorecovery GET routes answer as the Java bookie's, status and body. */
    static void sameAnswers(Setup s) throws Exception {
        for (String route : GET_ROUTES) {
            HttpResponse<String> j = s.java.http("GET", route, null);
            HttpResponse<String> o = s.ours.http("GET", route, null);
            assertEquals(j.statusCode() + " " + j.body(), o.statusCode() + " " + o.body(), route + ": ours as Java's");
        }
    }

    /** The ledger ids of a list_under_replicated_ledger answer (a JSON array or object). */
    static Set<Long> listed(HttpResponse<String> r) {
        return r.statusCode() == 200 ? listed(r.body()) : Set.of();
    }

    static Set<Long> listed(String body) {
        Set<Long> ids = new TreeSet<>();
        if (body.startsWith("[")) {
            for (String p : body.replaceAll("[\\[\\]\\s]", "").split(",")) {
                if (!p.isEmpty()) {
                    ids.add(Long.parseLong(p));
                }
            }
        }
        return ids;
    }

    /**
     * Within the bound no ledger names the lost bookie, and those that did are closed with their
     * acknowledged entries (the open ones recovered after the grace period).
     */
    static void healed(Cluster c, Setup s, int seconds) throws Exception {
        BookKeeperAdmin admin = c.admin();
        List<String> left = new ArrayList<>();
        try {
            A01AutorecoveryTest.waitFor("no ledger to name " + s.lostId, seconds, () -> {
                left.clear();
                for (long id : s.ids) {
                    LedgerMetadata md = admin.getLedgerMetadata(admin.openLedgerNoRecovery(id));
                    if (names(md, s.lostId) || (s.touched.contains(id) && !md.isClosed())) {
                        left.add(id + " " + md);
                    }
                }
                return left.isEmpty();
            });
        } catch (AssertionError e) {
            throw new AssertionError(e.getMessage() + "; left: " + left, e);
        }
        for (int i = 0; i < s.ids.size(); i++) {
            if (s.touched.contains(s.ids.get(i))) {
                LedgerMetadata md = admin.getLedgerMetadata(admin.openLedgerNoRecovery(s.ids.get(i)));
                assertTrue(md.getLastEntryId() >= s.logs.get(i).maxAcked(),
                        "ledger " + s.ids.get(i) + " closed at " + md.getLastEntryId() + " keeps its acknowledged entries");
            }
        }
        A01AutorecoveryTest.waitFor("no under-replicated ledger left", 30, () ->
                s.ours.http("GET", "/api/v1/autorecovery/list_under_replicated_ledger", null).statusCode() == 404);
    }

    /** A second bookie of ours lost: every acknowledged entry still reads back byte for byte. */
    static void secondLoss(Cluster c, Setup s) throws Exception {
        Bookie second = c.bookies.stream().filter(b -> b != s.lost && b != s.ours && !b.isJava()).findFirst().orElseThrow();
        second.kill();
        BookKeeper reader = c.client(false);
        for (int i = 0; i < s.ids.size(); i++) {
            long id = s.ids.get(i);
            try (LedgerHandle rh = reader.openLedgerNoRecovery(id, BookKeeper.DigestType.CRC32C, Ops.PASSWORD)) {
                // a ledger the first loss did not touch may still be open: read past its LAC
                Ops.verify(rh, SEED, id, 0, s.logs.get(i).maxAcked(), SIZE, !rh.isClosed());
            }
        }
        Cluster.log("every acknowledged entry read back with two bookies lost");
    }
}
