package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * P05 (issue #13, tag "pulsar-bench", a measurement, not in "pulsar"): Pulsar producer latency
 * while a tailing consumer and a catch-up consumer read the same topic, with our bookies and with
 * Java bookies in the same run. A round is one leg per implementation, each on a cluster of its
 * own (ZooKeeper, three bookies of one kind with the harness's bk_server.conf, a Pulsar 4.0.8
 * broker, E3 W3 A2); the legs alternate their order from round to round (ours first in odd
 * rounds) so that a drift of the shared machine does not favour one side. A leg:
 *
 * <ol>
 * <li>the topic and its subscription "catchup" are created (it exists and does not consume);
 *     one producer fills the backlog (-Dinterop.pulsar.backlogMb, default 1024) with messages of
 *     -Dinterop.pulsar.msgSize bytes (1024) flat out, batching on with at most
 *     -Dinterop.pulsar.fillBatch messages an entry (16);</li>
 * <li>the broker is stopped and started again (its entry cache cold); the bookies' write caches
 *     are made cold as in P03 (ours: PUT /api/v1/bookie/flush; Java: the test waits until 65 s
 *     after the last add, past DbLedgerStorage's 60 s flushInterval);</li>
 * <li>the producers' JVM warms up for -Dinterop.pulsar.warmupSeconds (10) at the live rate on
 *     another topic (JIT of the client and of the restarted broker's publish path; a cold JVM's
 *     first seconds would otherwise own the p99); the catch-up consumer subscribes paused;</li>
 * <li>at once (a "go" file both client JVMs wait for): -Dinterop.pulsar.producers (2) producers
 *     send -Dinterop.pulsar.rate (5,000) msg/s in all for -Dinterop.pulsar.seconds (60) s, open
 *     loop, latency from each message's due time (no coordinated omission); a tailing consumer
 *     on subscription "tail" (started at Latest) receives them; the catch-up consumer on
 *     "catchup", in a JVM of its own, resumes and drains the backlog flat out and then the new
 *     messages.</li>
 * </ol>
 *
 * Batching: on, with the Pulsar client's defaults for the live producers (1 ms, 1000 messages,
 * 128 KiB: what a real application's producer does unless told otherwise; at 2,500 msg/s a
 * producer that makes entries of a few messages). The backlog is filled flat out to save time,
 * so its batches are capped (16 messages, 16 KiB) to stay of the order of a live topic's
 * entries rather than 128 KiB ones that no real consumer sees. -Dinterop.pulsar.batching=false
 * turns batching off for the live producers, -Dinterop.pulsar.fillBatch=1 for the fill.
 * Deduplication is off (Pulsar's default); the broker's entry cache is the harness's 64 MB
 * (tailing reads hit it, the catch-up reads go to the bookies, as in a real broker).
 *
 * Checks (each leg): no send failed (fill and live), the tailing consumer received every live
 * message exactly once and each producer's in order, the catch-up consumer received the backlog
 * in order and then every live message once; our bookies healthy at the end. No latency is
 * asserted (a shared, noisy machine). Prints one "P05 rN ours|java: ..." line per leg and a
 * summary (medians over -Dinterop.pulsar.rounds rounds, default 1, and ours / java ratios), also
 * appended to target/p05-latency.txt. With -Dinterop.impl=java both legs run Java bookies (an
 * A/A check of the harness).
 */
@Tag("pulsar-bench")
@Timeout(value = 6, unit = TimeUnit.HOURS)
class P05PulsarLatencyTest {
    static final int ROUNDS = Integer.getInteger("interop.pulsar.rounds", 1);
    static final long BACKLOG_MB = Long.getLong("interop.pulsar.backlogMb", 1024);
    static final int SIZE = Integer.getInteger("interop.pulsar.msgSize", 1024);
    static final int FILL_BATCH = Integer.getInteger("interop.pulsar.fillBatch", 16);
    static final int RATE = Integer.getInteger("interop.pulsar.rate", 5000);
    static final int SECONDS = Integer.getInteger("interop.pulsar.seconds", 60);
    static final int PRODUCERS = Integer.getInteger("interop.pulsar.producers", 2);
    static final int WARMUP = Integer.getInteger("interop.pulsar.warmupSeconds", 10);
    static final boolean BATCHING = Boolean.parseBoolean(System.getProperty("interop.pulsar.batching", "true"));
    static final String DRIVER = "dev.rustbookie.interop.pulsar.LatencyDriver";

    /** One leg's figures (latencies in µs). */
    record Leg(String impl, int round, Map<String, String> live, Map<String, String> catchup, Map<String, String> fill) {
        double get(Map<String, String> m, String k) {
            return Double.parseDouble(m.get(k));
        }
    }

    @Test
    void pulsarProducerLatencyUnderCatchUp() throws Exception {
        assertTrue(ROUNDS >= 1 && BACKLOG_MB >= 1 && SIZE >= 40 && RATE >= 1 && SECONDS >= 1 && PRODUCERS >= 1
                && FILL_BATCH >= 1 && WARMUP >= 0, "P05 properties out of range");
        long backlog = BACKLOG_MB * (1L << 20) / SIZE;
        String head = String.format("P05 setup: backlog %d MiB = %d msgs of %d B (fill batches <= %d), live %d msg/s x %d s "
                        + "from %d producers (batching %s, %d s warm-up), E3 W3 A2, %d round(s)",
                BACKLOG_MB, backlog, SIZE, FILL_BATCH, RATE, SECONDS, PRODUCERS, BATCHING ? "on" : "off", WARMUP, ROUNDS);
        report(head);
        List<Leg> legs = new ArrayList<>();
        for (int r = 1; r <= ROUNDS; r++) {
            List<String> order = r % 2 == 1 ? List.of("ours", "java") : List.of("java", "ours");
            for (String impl : order) {
                Leg leg = leg(impl, r, backlog);
                legs.add(leg);
                report(line(leg));
            }
        }
        for (String s : summary(legs)) {
            report(s);
        }
    }

    static void report(String s) throws Exception {
        Cluster.log(s);
        System.out.println(s);
        Path f = Settings.targetDir().resolve("p05-latency.txt");
        Files.createDirectories(f.getParent());
        Files.writeString(f, java.time.Instant.now() + " " + s + "\n", StandardCharsets.UTF_8,
                StandardOpenOption.CREATE, StandardOpenOption.APPEND);
    }

    static Leg leg(String impl, int round, long backlog) throws Exception {
        try (Cluster c = new Cluster("p05-" + impl + "-r" + round)) {
            for (int i = 0; i < 3; i++) {
                if (impl.equals("java")) {
                    c.addJava();
                } else {
                    c.addRust();
                }
            }
            c.startAll();
            PulsarBroker b = c.track(new PulsarBroker(c, "broker"));
            b.extraConf.put("brokerDeduplicationEnabled", "false");
            b.setupMetadata();
            b.start(Duration.ofSeconds(180));
            String name = "p05-latency";
            String topic = "persistent://public/default/" + name;
            String topicPath = "/admin/v2/persistent/public/default/" + name;
            assertEquals(204, b.http("PUT", topicPath, null).statusCode(), "create " + topic);
            assertEquals(204, b.http("PUT", topicPath + "/subscription/catchup", null).statusCode(), "create catchup");
            String tag = "r" + round + " " + impl;

            // 1. The backlog.
            Process fill = b.driver(DRIVER, "fill", List.of("fill", b.serviceUrl(), topic, Long.toString(backlog),
                    Integer.toString(SIZE), Integer.toString(FILL_BATCH)));
            long fillLimit = 600 + BACKLOG_MB;
            assertTrue(fill.waitFor(fillLimit, TimeUnit.SECONDS), "fill did not finish within " + fillLimit + " s");
            long filledAt = System.nanoTime();
            Procs.forget(fill);
            Map<String, String> fillR = result(c, "pulsar-fill-1.log");
            assertEquals(0, fill.exitValue(), "fill driver failed: " + fillR);
            assertEquals("0", fillR.get("failed"), "fill: failed sends: " + fillR);
            assertEquals(Long.toString(backlog), fillR.get("acked"), "fill: acknowledged: " + fillR);
            String internal = b.http("GET", topicPath + "/internalStats", null).body();
            Cluster.log(tag + ": filled " + fillR + "; managed ledger " + field(internal, "numberOfEntries") + " entries, "
                    + field(internal, "totalSize") + " B");

            // 2. Cold broker, cold bookie write caches.
            b.close();
            b.start(Duration.ofSeconds(180));
            for (Bookie k : c.bookies) {
                if (!k.isJava()) {
                    Cluster.log(tag + ": " + k.name + " " + P03PulsarBacklogTest.cold(k));
                }
            }
            if (c.bookies.stream().anyMatch(Bookie::isJava)) {
                long waitMs = 65_000 - (System.nanoTime() - filledAt) / 1_000_000;
                if (waitMs > 0) {
                    Thread.sleep(waitMs);
                }
                Cluster.log(tag + ": Java bookies: waited until 65 s after the last add (flushInterval 60 s)");
            }

            // 3. Producers, tailing consumer and catch-up consumer at once.
            Path sync = c.runDir.resolve("sync");
            Files.createDirectories(sync);
            long live = (long) RATE * SECONDS;
            Process liveP = b.driver(DRIVER, "live", List.of("live", b.serviceUrl(), topic, sync.toString(),
                    Integer.toString(RATE), Integer.toString(SECONDS), Integer.toString(SIZE), Integer.toString(PRODUCERS),
                    Boolean.toString(BATCHING), Integer.toString(WARMUP)));
            Process catchP = b.driver(DRIVER, "catchup", List.of("catchup", b.serviceUrl(), topic, sync.toString(),
                    Long.toString(backlog), Long.toString(live), Integer.toString(SIZE), Integer.toString(PRODUCERS)));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(180 + 2L * WARMUP);
            while (!(Files.exists(sync.resolve("live.ready")) && Files.exists(sync.resolve("catchup.ready")))) {
                assertTrue(liveP.isAlive() && catchP.isAlive(), "a client driver exited before it was ready: "
                        + result(c, "pulsar-live-2.log") + " / " + result(c, "pulsar-catchup-3.log"));
                assertTrue(System.nanoTime() < deadline, "client drivers not ready within " + (180 + 2 * WARMUP) + " s");
                Thread.sleep(20);
            }
            Files.writeString(sync.resolve("go"), "go\n");
            Cluster.log(tag + ": go");
            long liveLimit = SECONDS + 420;  // the warm-up is over before "go"
            assertTrue(liveP.waitFor(liveLimit, TimeUnit.SECONDS), "live driver did not finish within " + liveLimit + " s");
            Procs.forget(liveP);
            long catchLimit = 600 + backlog / 1000;
            assertTrue(catchP.waitFor(catchLimit, TimeUnit.SECONDS), "catch-up driver did not finish within " + catchLimit + " s");
            Procs.forget(catchP);
            Map<String, String> liveR = result(c, "pulsar-live-2.log");
            Map<String, String> catchR = result(c, "pulsar-catchup-3.log");
            Cluster.log(tag + ": live " + liveR);
            Cluster.log(tag + ": catch-up " + catchR);
            assertEquals(0, liveP.exitValue(), "live driver failed: " + liveR);
            assertEquals(0, catchP.exitValue(), "catch-up driver failed: " + catchR);

            String n = Long.toString(live);
            assertEquals(n, liveR.get("completed"), "sends completed: " + liveR);
            assertEquals("0", liveR.get("failed"), "failed sends (first one in logs/pulsar-live-2.log): " + liveR);
            assertEquals(n, liveR.get("tail_distinct"), "live messages the tailing consumer received: " + liveR);
            for (String k : List.of("tail_dup", "tail_out_of_order", "tail_bad", "tail_stray", "tail_error")) {
                assertEquals("0", liveR.get(k), k + ": " + liveR);
            }
            assertEquals(Long.toString(backlog), catchR.get("backlog_received"), "backlog the catch-up consumer received: " + catchR);
            assertEquals(n, catchR.get("live_distinct"), "live messages the catch-up consumer received: " + catchR);
            for (String k : List.of("backlog_out_of_order", "live_dup", "live_out_of_order", "live_before_backlog_end", "bad")) {
                assertEquals("0", catchR.get(k), k + ": " + catchR);
            }
            for (Bookie k : c.bookies) {
                if (!k.isJava()) {
                    Cluster.log(tag + ": " + k.name + " reads: " + P03PulsarBacklogTest.readStats(k));
                }
            }
            c.assertHealthy();
            return new Leg(impl, round, liveR, catchR, fillR);
        }
    }

    /** The "result k=v ..." line of a driver's log, as a map (empty, with a "tail" entry, if absent). */
    static Map<String, String> result(Cluster c, String log) throws Exception {
        String l = P03PulsarBacklogTest.lastLine(c, log, "result ");
        Map<String, String> m = new LinkedHashMap<>();
        if (!l.startsWith("result ")) {
            m.put("tail", l);
            return m;
        }
        for (String kv : l.substring(7).trim().split("\\s+")) {
            int eq = kv.indexOf('=');
            if (eq > 0) {
                m.put(kv.substring(0, eq), kv.substring(eq + 1));
            }
        }
        return m;
    }

    static String field(String json, String key) {
        Matcher m = Pattern.compile("\"" + key + "\"\\s*:\\s*(\\d+)").matcher(json);
        return m.find() ? m.group(1) : "?";
    }

    static String ms(double us) {
        return String.format("%.2f", us / 1000.0);
    }

    static String line(Leg l) {
        Map<String, String> v = l.live;
        Map<String, String> k = l.catchup;
        return String.format("P05 r%d %-4s: produce %d msg/s x %d s: p50 %s p99 %s p99.9 %s max %s ms"
                        + " (sends due during catch-up: %s, p99 %s ms; %.0f%% of the window) | tail e2e p50 %s p99 %s ms"
                        + " | catch-up %d msgs in %.1f s = %.0f msg/s | fill %.1f MiB/s",
                l.round, l.impl, RATE, SECONDS, ms(l.get(v, "p50_us")), ms(l.get(v, "p99_us")), ms(l.get(v, "p999_us")),
                ms(l.get(v, "max_us")), v.get("during_n"), ms(l.get(v, "during_p99_us")), 100 * l.get(v, "overlap"),
                ms(l.get(v, "e2e_p50_us")), ms(l.get(v, "e2e_p99_us")), (long) l.get(k, "backlog_received"),
                l.get(k, "catchup_ms") / 1000.0, l.get(k, "catchup_msg_s"), l.get(l.fill, "mb_s"));
    }

    static double median(List<Double> xs) {
        double[] a = xs.stream().mapToDouble(Double::doubleValue).sorted().toArray();
        if (a.length == 0) {
            return Double.NaN;
        }
        return a.length % 2 == 1 ? a[a.length / 2] : (a[a.length / 2 - 1] + a[a.length / 2]) / 2;
    }

    static List<String> summary(List<Leg> legs) {
        String[][] metrics = {
            {"live", "p50_us", "producer p50 ms"},
            {"live", "p99_us", "producer p99 ms"},
            {"live", "p999_us", "producer p99.9 ms"},
            {"live", "max_us", "producer max ms"},
            {"live", "during_p99_us", "producer p99 during catch-up ms"},
            {"live", "e2e_p50_us", "tail e2e p50 ms"},
            {"live", "e2e_p99_us", "tail e2e p99 ms"},
            {"catchup", "catchup_msg_s", "catch-up msg/s"},
        };
        List<String> out = new ArrayList<>();
        out.add(String.format("P05 summary, median of %d round(s) (ours / java: < 1 = ours lower for latencies, > 1 = ours faster for msg/s):",
                legs.stream().mapToInt(Leg::round).max().orElse(0)));
        out.add(String.format("P05   %-33s %12s %12s %10s", "metric", "ours", "java", "ours/java"));
        for (String[] m : metrics) {
            double[] med = new double[2];
            String[] impls = {"ours", "java"};
            for (int i = 0; i < 2; i++) {
                String impl = impls[i];
                med[i] = median(legs.stream().filter(l -> l.impl.equals(impl))
                        .map(l -> l.get(m[0].equals("live") ? l.live : l.catchup, m[1])).toList());
            }
            boolean lat = m[1].endsWith("_us");
            String a = lat ? ms(med[0]) : String.format("%.0f", med[0]);
            String j = lat ? ms(med[1]) : String.format("%.0f", med[1]);
            out.add(String.format("P05   %-33s %12s %12s %10.2f", m[2], a, j, med[0] / med[1]));
        }
        return out;
    }
}
