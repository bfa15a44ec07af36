package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
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
 * P03 (issue #17, tag "pulsar-bench", a measurement, not in "pulsar"): a Pulsar broker's
 * catch-up read of a backlog. Three bookies (ours, or Java ones with -Dinterop.impl=java), E3 W3
 * A2 managed ledgers, broker entry cache off (managedLedgerCacheSizeMB=0, so every read goes to
 * the bookies), deduplication off, Pulsar's default dispatcher read batch sizes. The topic and
 * its subscription are created first; one producer (batching off: one entry per message) sends
 * N (50,000) messages of 1 KiB (the sequence number at both ends). The broker is then stopped
 * cleanly and a new one started (nothing in any broker cache); the write caches are made cold
 * (ours: PUT /api/v1/bookie/flush on each bookie, then their bookie_write_cache_size gauge is
 * watched until 0; Java's DbLedgerStorage flushes every flushInterval = 60 s by default), and for
 * both kinds the test waits until 65 s after the last acknowledged message, so the new broker has
 * settled for as long before the read in both runs; then the page cache is dropped (sync,
 * vm.drop_caches=1, as bkperf read --cold --drop-page-cache does; off with
 * -Dinterop.p03.dropPageCache=false). A fresh Exclusive consumer on the
 * subscription reads all N, checked in order and by content; msg/s from first receive to last.
 * Prints "P03 backlog: N msgs in X s = Y msg/s (impl=ours|java)", and "P03 cpu": the CPU the
 * broker, each bookie and the consumer used over the same window (CpuSampler), in % of one core,
 * and the machine's busy share: which process owns the pace.
 */
@Tag("pulsar-bench")
@Timeout(value = 900, unit = TimeUnit.SECONDS)
class P03PulsarBacklogTest {
    static final int N = Integer.getInteger("interop.pulsar.backlog", 50_000);
    static final int SIZE = 1024;

    @Test
    void pulsarBacklogCatchUp() throws Exception {
        String impl = "java".equals(System.getProperty("interop.impl", System.getenv("INTEROP_IMPL"))) ? "java" : "ours";
        // A control, ours only: -Dinterop.p03.hot=true leaves the backlog in our write caches
        // (no flush; flushInterval and gcWaitTime 1 h, as every GC pass flushes the write cache
        // first), so every read is answered from memory (the run prints
        // read_ahead_runs_total: 0 when it was); msg/s near the cold run's says the broker,
        // not the bookies' read path, sets the pace.
        boolean hot = Boolean.getBoolean("interop.p03.hot");
        try (Cluster c = new Cluster("p03")) {
            for (int i = 0; i < 3; i++) {
                Bookie k = c.addRust();
                if (hot && !k.isJava()) {
                    k.extraConf.put("flushInterval", "3600000");
                    k.extraConf.put("gcWaitTime", "3600000");
                }
            }
            c.startAll();
            PulsarBroker b = c.track(new PulsarBroker(c, "broker"));
            b.extraConf.put("managedLedgerCacheSizeMB", "0");
            b.extraConf.put("brokerDeduplicationEnabled", "false");
            b.setupMetadata();
            b.start(Duration.ofSeconds(180));
            String name = "p03-backlog";
            String topic = "persistent://public/default/" + name;
            String topicPath = "/admin/v2/persistent/public/default/" + name;
            String sub = "sub-backlog";
            assertEquals(204, b.http("PUT", topicPath, null).statusCode(), "create " + topic);
            assertEquals(204, b.http("PUT", topicPath + "/subscription/" + sub, null).statusCode(), "create " + sub);

            // 1. The backlog.
            Process prod = b.driver("bench-produce", List.of("bench-produce", b.serviceUrl(), topic,
                    Integer.toString(N), Integer.toString(SIZE)));
            assertTrue(prod.waitFor(600, TimeUnit.SECONDS), "producer did not finish within 600 s");
            long producedAt = System.nanoTime();
            Procs.forget(prod);
            String prodOut = lastLine(c, "pulsar-bench-produce-1.log", "produced ");
            assertEquals(0, prod.exitValue(), "producer failed: " + prodOut);
            Cluster.log(impl + ": " + prodOut + " (" + N + " x " + SIZE + " B, batching off)");
            String stats = b.http("GET", topicPath + "/stats", null).body();
            Matcher bl = Pattern.compile("\"msgBacklog\"\\s*:\\s*(\\d+)").matcher(stats);
            assertTrue(bl.find() && Long.parseLong(bl.group(1)) == N, "backlog of " + N + " on " + sub + ": " + stats);

            // 2. A new broker (clean stop: nothing cached anywhere in a broker).
            b.close();
            Cluster.log(impl + ": broker stopped");
            b.start(Duration.ofSeconds(180));

            // 3. Cold bookies.
            for (Bookie k : c.bookies) {
                if (!k.isJava()) {
                    Cluster.log(impl + ": " + k.name + " " + (hot ? "hot (control: not flushed)" : cold(k)));
                }
            }
            // Both kinds wait until 65 s after the last add: Java bookies need it (flushInterval
            // 60 s: their write caches flush at their own checkpoint), and ours wait the same so
            // that the restarted broker has settled for as long in both runs (a broker still
            // busy with its start-up work reads slower, whatever the bookies).
            long waitMs = 65_000 - (System.nanoTime() - producedAt) / 1_000_000;
            if (waitMs > 0) {
                Thread.sleep(waitMs);
            }
            Cluster.log(impl + ": waited until 65 s after the last add"
                    + (c.bookies.stream().anyMatch(Bookie::isJava) ? " (Java bookies: their write caches flushed)" : ""));
            // Cold as bkperf read --cold --drop-page-cache is: a backlog hours old is not in the
            // page cache either (a Java bookie reads its entry logs and RocksDB through it; ours
            // reads with O_DIRECT). -Dinterop.p03.dropPageCache=false keeps it (needs root).
            if (Boolean.parseBoolean(System.getProperty("interop.p03.dropPageCache", "true"))) {
                Cluster.log(impl + ": " + dropPageCache());
            }

            // 4. The catch-up read, with the CPU each process uses sampled meanwhile.
            Map<String, Long> pids = new LinkedHashMap<>();
            pids.put("broker", b.pid());
            for (Bookie k : c.bookies) {
                pids.put(k.name, k.pid());
            }
            Process cons;
            String cpu;
            try (CpuSampler sampler = new CpuSampler(pids)) {
                cons = b.driver("bench-consume", List.of("bench-consume", b.serviceUrl(), topic, sub,
                        Integer.toString(N), Integer.toString(SIZE)));
                assertTrue(cons.waitFor(600, TimeUnit.SECONDS), "consumer did not finish within 600 s");
                Procs.forget(cons);
                cpu = cpuShares(sampler, lastLine(c, "pulsar-bench-consume-2.log", "consumed "));
            }
            String out = lastLine(c, "pulsar-bench-consume-2.log", "consumed ");
            assertEquals(0, cons.exitValue(), "consumer failed: " + out);
            Matcher m = Pattern.compile("consumed (\\d+) first_to_last_ns (\\d+) bad (\\d+)").matcher(out);
            assertTrue(m.find(), "consumer output: " + out);
            assertEquals(N, Integer.parseInt(m.group(1)), "messages consumed: " + out);
            assertEquals(0, Long.parseLong(m.group(3)), "messages with wrong content or order: " + out);
            double secs = Long.parseLong(m.group(2)) / 1e9;
            String line = String.format("P03 backlog: %d msgs in %.2f s = %.0f msg/s (impl=%s%s)", N, secs, N / secs, impl,
                    hot ? ", hot control" : "");
            Cluster.log(line);
            System.out.println(line);
            // Who owns the pace: the CPU each process used from first receive to last.
            String cpuLine = "P03 cpu, first to last receive, % of one core (impl=" + impl + "): " + cpu;
            Cluster.log(cpuLine);
            System.out.println(cpuLine);
            for (Bookie k : c.bookies) {
                if (!k.isJava()) {
                    Cluster.log(impl + ": " + k.name + " reads: " + readStats(k));
                }
            }
            c.assertHealthy();
        }
    }

    /**
     * The CPU shares over the consumer's window (its first receive to its last, wall clock, as
     * it prints them): the sampled processes', then the consumer JVM's own (its cpu_ms).
     */
    static String cpuShares(CpuSampler sampler, String consumed) {
        Matcher w = Pattern.compile("first_ms (\\d+) last_ms (\\d+) cpu_ms (\\d+)").matcher(consumed);
        if (!w.find()) {
            return "(no window in the consumer's output: " + consumed + ")";
        }
        long first = Long.parseLong(w.group(1));
        long last = Long.parseLong(w.group(2));
        long consumerPct = Math.round(Long.parseLong(w.group(3)) * 100.0 / Math.max(1, last - first));
        return sampler.window(first, last) + "; consumer JVM " + consumerPct;
    }

    /** sync, then vm.drop_caches=1 (the page cache); says what it did. */
    static String dropPageCache() throws Exception {
        Process sync = new ProcessBuilder("sync").inheritIO().start();
        sync.waitFor(60, TimeUnit.SECONDS);
        try {
            Files.writeString(Path.of("/proc/sys/vm/drop_caches"), "1");
            return "page cache dropped (sync, vm.drop_caches=1)";
        } catch (java.io.IOException e) {
            return "page cache NOT dropped (" + e + "; needs root)";
        }
    }

    /** Ours: PUT /api/v1/bookie/flush, then bookie_write_cache_size until 0 (at most 30 s). */
    static String cold(Bookie k) throws Exception {
        int st = k.http("PUT", "/api/v1/bookie/flush", "{}").statusCode();
        long t0 = System.nanoTime();
        String gauge = "?";
        while (System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(30)) {
            String metrics = k.http("GET", "/metrics", null).body();
            double sum = 0;
            boolean seen = false;
            for (String l : metrics.split("\n")) {
                if (l.startsWith("bookie_write_cache_size")) {
                    String[] f = l.trim().split("\\s+");
                    sum += Double.parseDouble(f[f.length - 1]);
                    seen = true;
                }
            }
            gauge = seen ? Double.toString(sum) : "absent";
            if (seen && sum <= 0) {
                return "flush HTTP " + st + ", bookie_write_cache_size 0 after "
                        + (System.nanoTime() - t0) / 1_000_000 + " ms";
            }
            if (!seen) {
                break;
            }
            Thread.sleep(100);
        }
        return "flush HTTP " + st + ", bookie_write_cache_size " + gauge + " (not confirmed 0)";
    }

    /**
     * Our bookie's read side after the catch-up, from /metrics: single and batch reads served
     * (count, mean and p99 in ms), the cache-miss stage and the read-ahead counters, so the
     * closing note can say whether the bookie or the broker owns a batch's time.
     */
    static String readStats(Bookie k) throws Exception {
        String metrics = k.http("GET", "/metrics", null).body();
        StringBuilder sb = new StringBuilder();
        for (String l : metrics.split("\n")) {
            boolean read = l.startsWith("bookkeeper_server_READ_ENTRY_REQUEST") || l.startsWith("bookkeeper_server_BATCH_READ_ENTRY_REQUEST");
            boolean kept = read && l.contains("success=\"true\"") && (l.contains("_count") || l.contains("_sum") || l.contains("quantile=\"0.5\"") || l.contains("quantile=\"0.99\""));
            kept |= l.startsWith("bookie_rs_stage_latency_ms_count{stage=\"cache_miss_read\"") || l.startsWith("bookie_rs_stage_latency_ms_sum{stage=\"cache_miss_read\"");
            kept |= l.startsWith("bookie_rs_read_ahead_") || l.startsWith("bookie_rs_read_cache_hits");
            if (kept) {
                sb.append(l.replace("bookkeeper_server_", "").replace("bookie_rs_", "")).append("; ");
            }
        }
        return sb.toString();
    }

    static String lastLine(Cluster c, String log, String prefix) throws Exception {
        Path f = c.runDir.resolve("logs").resolve(log);
        if (!Files.exists(f)) {
            return "(no " + f + ")";
        }
        List<String> ls = Files.readAllLines(f, StandardCharsets.UTF_8);
        for (int i = ls.size() - 1; i >= 0; i--) {
            if (ls.get(i).startsWith(prefix)) {
                return ls.get(i);
            }
        }
        return "(no '" + prefix + "' line in " + f + "; tail: " + String.join(" | ", ls.subList(Math.max(0, ls.size() - 5), ls.size())) + ")";
    }
}
