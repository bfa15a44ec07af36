package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.LedgerEntry;
import org.apache.bookkeeper.client.LedgerHandle;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * S15 (issue 44): our image variant (deploy/pulsar/) as the Pulsar Helm chart runs a bookie, with
 * only the bookie image changed: Pulsar 4.0.8 under charts 4.7.0 and 4.4.0, Pulsar 3.3.6 under
 * chart 4.7.0, Pulsar 3.0.7 under chart 3.6.0 — each with the conf/bookkeeper.conf its release
 * ships, the environment the chart's default values render (edited only in the metadata service,
 * directories and ports) and the chart's own init-container and container scripts. The init
 * container's whatisinstanceid loop ends on an initialised cluster and keeps waiting on an empty
 * one; apply-config-from-env.py rewrites the file byte for byte as Pulsar's own script does (run
 * on the same input, from the 4.0.8 source release); the chart's probes (GET
 * /api/v1/bookie/state, /api/v1/bookie/is_ready) and its scrape (/metrics) answer on the chart's
 * http port; the four bookies register under the ids Java bookies would take and serve a Java
 * client's ledger.
 */
@Tag("smoke")
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class S15PulsarImageTest {

    @Test
    void theHelmChartRunsOurImage() throws Exception {
        Path pulsarScript = StockConfs.pulsarApplyConfigScript("4.0.8");
        try (Cluster c = new Cluster("s15", "/ledgers")) {
            List<PulsarImageBookie> bookies = List.of(
                    new PulsarImageBookie(c, "4.0.8", "4.7.0"),
                    new PulsarImageBookie(c, "4.0.8", "4.4.0"),
                    new PulsarImageBookie(c, "3.3.6", "4.7.0"),
                    new PulsarImageBookie(c, "3.0.7", "3.6.0"));
            c.bookies.addAll(bookies);

            // The init container (pulsar-bookkeeper-verify-clusterid): waits on whatisinstanceid.
            for (PulsarImageBookie b : bookies) {
                b.prepare();
                Path out = b.dir.resolve("init.out");
                int rc = b.runScript(PulsarImageBookie.initScript(), 60, out);
                assertEquals(0, rc, b + " init container: " + Files.readString(out));
                assertTrue(Files.readString(out).contains("InstanceId: "), Files.readString(out));
            }
            // ... and keeps waiting while the cluster has no metadata (here: another root).
            PulsarImageBookie probe = bookies.get(0);
            Path out = probe.dir.resolve("init-uninitialised.out");
            String elsewhere = PulsarImageBookie.initScript().replace("bin/apply-config-from-env.py conf/bookkeeper.conf;",
                    "bin/apply-config-from-env.py conf/bookkeeper.conf; sed -i 's|/ledgers$|/no-cluster-here|' conf/bookkeeper.conf;");
            assertEquals(124, probe.runScript(elsewhere, 8, out), "still waiting when killed by timeout");

            c.startAll();

            for (PulsarImageBookie b : bookies) {
                assertTrue(c.isRegistered(b.id()), b + " registered as " + b.id());
                // The chart's probes and scrape, on its http port.
                var state = b.http("GET", "/api/v1/bookie/state", null);
                assertEquals(200, state.statusCode(), b + " liveness");
                assertTrue(state.body().replace(" ", "").contains("\"running\":true"), state.body());
                assertEquals(200, b.http("GET", "/api/v1/bookie/is_ready", null).statusCode(), b + " readiness");
                var metrics = b.http("GET", "/metrics", null);
                assertEquals(200, metrics.statusCode(), b + " /metrics");
                assertTrue(metrics.body().contains("bookie_SERVER_STATUS 1"), b + " metrics");

                // The file our apply-config-from-env.py wrote is the one Pulsar's script writes.
                Path theirs = b.pulsarsOwnRewrite(pulsarScript);
                assertArrayEquals(Files.readAllBytes(theirs), b.confNow().getBytes(StandardCharsets.ISO_8859_1),
                        b + ": conf/bookkeeper.conf as Pulsar's apply-config-from-env.py rewrites it");
                assertEquals(PulsarImageBookie.applyLines(Files.readString(b.dir.resolve("pulsar-image.out"))),
                        PulsarImageBookie.applyLines(b.logText()), b + ": the same messages");

                String log = b.logText();
                assertFalse(log.contains("is not honoured"), b + ": the chart turns autorecovery off in its bookies");
                assertFalse(log.contains("no bookie of BookKeeper 4.14"), b + " knows every key");
                assertFalse(log.contains("is given more than once"), b + ": no key twice");
                Map<String, String> env = b.chartEnv();
                Cluster.log(b + " started from the chart's environment: " + env.keySet());
            }

            BookKeeper bk = c.client(false);
            LedgerHandle lh = bk.createLedger(4, 4, 4, BookKeeper.DigestType.CRC32C, "s15".getBytes());
            List<byte[]> sent = new ArrayList<>();
            for (int i = 0; i < 40; i++) {
                byte[] e = Payloads.payload(15, lh.getId(), i, 64 + i * 101);
                sent.add(e);
                lh.addEntry(e);
            }
            lh.close();
            try (LedgerHandle rh = bk.openLedger(lh.getId(), BookKeeper.DigestType.CRC32C, "s15".getBytes())) {
                Enumeration<LedgerEntry> got = rh.readEntries(0, sent.size() - 1);
                for (int i = 0; got.hasMoreElements(); i++) {
                    assertArrayEquals(sent.get(i), got.nextElement().getEntry(), "entry " + i);
                }
            }
            // The chart's recovery StatefulSet on the same image: its init container, then
            // `exec bin/bookkeeper autorecovery` with its own ConfigMap (the bookies' turns the
            // daemon off in them): it is elected auditor.
            PulsarImageBookie recovery = new PulsarImageBookie(c, "4.0.8", "4.7.0", "recovery");
            recovery.prepare();
            Path rout = recovery.dir.resolve("init.out");
            assertEquals(0, recovery.runScript(PulsarImageBookie.recoveryInitScript(), 60, rout),
                    "recovery init container: " + Files.readString(rout));
            Process rp = recovery.startScript(recovery.containerScript());
            try {
                String want = "Auditor: " + recovery.id();
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                String got = "";
                while (System.nanoTime() < deadline && !got.equals(want)) {
                    assertTrue(rp.isAlive(), "the recovery pod's process exited: " + recovery.logText());
                    got = bookies.get(0).http("GET", "/api/v1/autorecovery/who_is_auditor", null).body();
                    Thread.sleep(200);
                }
                assertEquals(want, got, "the recovery pod is the auditor; its log: " + recovery.logTail(20));
                // its own HTTP server (httpServerEnabled in its ConfigMap), as AutoRecoveryMain's:
                // the routes, and the series the chart's PodMonitor scrapes
                assertEquals(want, recovery.http("GET", "/api/v1/autorecovery/who_is_auditor", null).body());
                assertEquals(200, recovery.http("GET", "/heartbeat", null).statusCode());
                var rm = recovery.http("GET", "/metrics", null);
                assertEquals(200, rm.statusCode());
                assertTrue(rm.body().contains("\nautorecovery_is_auditor 1\n"), rm.body());
                assertTrue(rm.body().contains("\nreplication_worker_NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED 0\n"), rm.body());
                assertFalse(recovery.logText().contains("is not honoured"), "the recovery ConfigMap's keys are known");
            } finally {
                Procs.stop(rp, 10_000);
            }
            for (PulsarImageBookie b : bookies) {
                assertNotEquals(0, c.registrationOwner(b.id()), b + " still registered");
            }
            c.assertHealthy();
        }
    }
}
