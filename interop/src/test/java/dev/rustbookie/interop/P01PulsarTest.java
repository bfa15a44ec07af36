package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.bookkeeper.client.api.LedgerMetadata;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * P01 Pulsar (issue #13, tier "pulsar"): a real Apache Pulsar 4.0.8 broker (own JVM, see
 * PulsarBroker) over three of our bookies, managed ledgers E3 W3 A2, broker deduplication on.
 * Two producers ("p-batch" with batching, "p-single" without) send N messages each (16 B..16 KiB,
 * mostly ≤ 1 KiB) to a persistent topic; when 40 % are acknowledged the broker is SIGKILLed and
 * restarted: the new broker recovers the topic's open ledger (open with recovery, which fences
 * it on our bookies), rebuilds the deduplication state from it, and the producers' pending
 * messages are re-sent (sendTimeout 0). Then one Exclusive consumer reads the topic from the
 * start: every acknowledged message is received, once (deduplication on: the re-sent messages
 * that had been persisted before the kill are dropped by the broker), each producer's in
 * sequence order, byte for byte (SHA-256 against the producer's acks and the regenerated
 * payload). The topic's ledgers before the current one are closed in the BookKeeper metadata
 * (the one open at the kill: by the recovery), and that one answers a raw add with EFENCED on
 * every bookie of its ensemble. The Pulsar client runs in its own JVM too
 * (interop/pulsar's PulsarDriver), on the broker's classpath.
 */
@Tag("pulsar")
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class P01PulsarTest {
    static final long SEED = 1401;
    /** Messages per producer (two producers). */
    static final int N = Integer.getInteger("interop.pulsar.messages", 2000);

    @Test
    void pulsarOnOurBookies() throws Exception {
        try (Cluster c = new Cluster("p01")) {
            for (int i = 0; i < 3; i++) {
                c.addRust();
            }
            c.startAll();
            // "ours", or "java" when -Dinterop.impl=java made every bookie a Java one
            scenario(c, "java".equals(System.getProperty("interop.impl", System.getenv("INTEROP_IMPL"))) ? "java" : "ours");
        }
    }

    record Ack(String producer, long seq, String id, int size, String sha) {}

    static List<String> lines(Path f) throws Exception {
        return Files.exists(f) ? Files.readAllLines(f, StandardCharsets.UTF_8) : List.of();
    }

    static long count(Path f, String prefix) throws Exception {
        return lines(f).stream().filter(l -> l.startsWith(prefix)).count();
    }

    static void scenario(Cluster c, String what) throws Exception {
        scenario(c, what, "p01-" + what, 0, "Exclusive", 1);
    }

    /**
     * The scenario on TOPIC (PARTITIONS > 0: a partitioned topic), consumed by CONSUMERS
     * consumers of one subscription of type SUBTYPE (Exclusive: each producer's messages in
     * sequence order; Shared: exactly once, in any order).
     */
    static void scenario(Cluster c, String what, String name, int partitions, String subType, int consumers)
            throws Exception {
        long t0 = System.nanoTime();
        PulsarBroker b = c.track(new PulsarBroker(c, "broker"));
        b.setupMetadata();
        b.start(Duration.ofSeconds(180));
        String topic = "persistent://public/default/" + name;
        String topicPath = "/admin/v2/persistent/public/default/" + name;
        String sub = "sub-" + subType.toLowerCase();
        // The topic and its subscription first: with no subscription (and no retention) the
        // broker trims ledgers the moment nothing needs them.
        if (partitions > 0) {
            assertEquals(204, b.http("PUT", topicPath + "/partitions", Integer.toString(partitions)).statusCode(),
                    "create " + topic + " with " + partitions + " partitions");
        } else {
            assertEquals(204, b.http("PUT", topicPath, null).statusCode(), "create " + topic);
        }
        assertEquals(204, b.http("PUT", topicPath + "/subscription/" + sub, null).statusCode(),
                "create subscription " + sub);

        // 1. Produce, with a broker SIGKILL + restart in the middle.
        Path acks = c.runDir.resolve("pulsar-acks.txt");
        Process prod = b.driver("produce", List.of("produce", b.serviceUrl(), topic, acks.toString(),
                Integer.toString(N), Long.toString(SEED), "16384"));
        long killAt = 2L * N * 4 / 10;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(180);
        while (count(acks, "ack ") < killAt) {
            assertTrue(prod.isAlive(), () -> "the producer exited early (" + prod.exitValue() + ")");
            assertTrue(System.nanoTime() < deadline, "producers did not reach " + killAt + " acks in 180 s");
            Thread.sleep(20);
        }
        long ackedAtKill = count(acks, "ack ");
        b.kill();
        Cluster.log(what + ": broker SIGKILLed with " + ackedAtKill + " of " + 2 * N + " messages acknowledged");
        b.awaitSessionGone(Duration.ofSeconds(60));
        b.start(Duration.ofSeconds(180));
        assertTrue(prod.waitFor(300, TimeUnit.SECONDS), "producers did not finish within 300 s after the restart");
        Procs.forget(prod);
        List<String> produced = lines(acks);
        assertEquals(0, prod.exitValue(), "producer driver failed:\n" + String.join("\n", produced.stream()
                .filter(l -> l.startsWith("fail")).limit(20).toList()));
        Map<String, Ack> acked = new HashMap<>();
        int dupReceipts = 0;
        for (String l : produced) {
            String[] f = l.split(" ");
            if (f[0].equals("ack")) {
                Ack a = new Ack(f[1], Long.parseLong(f[2]), f[3], Integer.parseInt(f[4]), f[5]);
                assertEquals(null, acked.put(a.producer + "/" + a.seq, a), "acknowledged twice: " + l);
                if (a.id.startsWith("-1:")) {
                    dupReceipts++;
                }
            }
        }
        assertEquals(2 * N, acked.size(), "every message acknowledged to the producers");
        Cluster.log(what + ": all " + acked.size() + " messages acknowledged ("
                + produced.get(produced.size() - 1) + "; " + dupReceipts
                + " receipts for re-sent messages the broker had already persisted)");

        // 2. Consume everything.
        Path recv = c.runDir.resolve("pulsar-received.txt");
        Process cons = b.driver("consume", List.of("consume", b.serviceUrl(), topic, recv.toString(), sub,
                subType, Integer.toString(2 * N), Long.toString(SEED), Integer.toString(consumers), "3"));
        assertTrue(cons.waitFor(300, TimeUnit.SECONDS), "consumer did not finish within 300 s");
        Procs.forget(cons);
        assertEquals(0, cons.exitValue(), "consumer driver failed");
        Map<String, Long> next = new HashMap<>();
        Map<String, Integer> perConsumer = new java.util.TreeMap<>();
        java.util.Set<String> seen = new java.util.HashSet<>();
        java.util.Set<String> partitionsSeen = new java.util.TreeSet<>();
        int received = 0;
        for (String l : lines(recv)) {
            String[] f = l.split(" ");
            if (f[0].equals("error")) {
                throw new AssertionError("consumer: " + l);
            }
            if (!f[0].equals("msg")) {
                continue;
            }
            received++;
            perConsumer.merge(f[1], 1, Integer::sum);
            String producer = f[2];
            long seq = Long.parseLong(f[3]);
            assertTrue(seen.add(producer + "/" + seq), "received twice (dedup on): " + l);
            if (subType.equals("Exclusive")) {
                long want = next.getOrDefault(producer, 0L);
                assertEquals(want, seq, producer + ": messages in order, each once (dedup on): " + l);
                next.put(producer, want + 1);
            }
            String[] id = f[4].split(":");
            partitionsSeen.add(id[2]);
            Ack a = acked.get(producer + "/" + seq);
            assertTrue(a != null, "received a message never acknowledged: " + l);
            assertEquals(a.size, Integer.parseInt(f[5]), "size of " + l);
            assertEquals(a.sha, f[6], "bytes of " + l);
            assertEquals("OK", f[7], "payload of " + l);
        }
        assertEquals(2 * N, received, "every acknowledged message received exactly once");
        Cluster.log(what + ": all " + received + " messages received once, "
                + (subType.equals("Exclusive") ? "in order, " : "") + "byte for byte; per consumer " + perConsumer
                + ", partitions " + partitionsSeen);
        if (partitions > 0) {
            assertEquals(partitions, partitionsSeen.size(), "messages on every partition: " + partitionsSeen);
            assertEquals(consumers, perConsumer.size(), "every shared consumer got messages: " + perConsumer);
        }

        // 3. The topic's ledgers (each partition's): all but the current one closed (the one
        // open at the kill by the new broker's recovery, which fenced it on the bookies).
        List<String> paths = new ArrayList<>();
        if (partitions > 0) {
            for (int i = 0; i < partitions; i++) {
                paths.add(topicPath + "-partition-" + i);
            }
        } else {
            paths.add(topicPath);
        }
        org.apache.bookkeeper.client.BookKeeper bk = c.client(false);
        Raw raw = c.raw(false);
        for (String path : paths) {
            String stats = b.http("GET", path + "/internalStats", null).body();
            List<Long> ledgers = new ArrayList<>();
            Matcher m = Pattern.compile("\"ledgerId\"\\s*:\\s*(\\d+)").matcher(stats);
            while (m.find()) {
                long id = Long.parseLong(m.group(1));
                if (!ledgers.contains(id)) {
                    ledgers.add(id);
                }
            }
            assertTrue(ledgers.size() >= 2, "a ledger before and one after the restart: " + stats);
            StringBuilder sb = new StringBuilder();
            for (long id : ledgers.subList(0, ledgers.size() - 1)) {
                LedgerMetadata md = bk.getLedgerManager().readLedgerMetadata(id).get().getValue();
                assertTrue(md.isClosed(), path + ": ledger " + id + " closed: " + md);
                sb.append(" ").append(id).append(" (closed at entry ").append(md.getLastEntryId()).append(", ensemble ")
                        .append(md.getAllEnsembles().values()).append(")");
            }
            Cluster.log(what + ": " + path.substring(path.lastIndexOf('/') + 1) + " ledgers " + ledgers + ":" + sb);
            // The ledger open at the kill (the one before the current) is fenced on every bookie
            // of its ensemble: a raw add with its master key (Pulsar's ledger password is empty)
            // answers EFENCED (-101).
            long recovered = ledgers.get(ledgers.size() - 2);
            org.apache.bookkeeper.client.LedgerHandle lh = bk.openLedgerNoRecovery(recovered,
                    org.apache.bookkeeper.client.BookKeeper.DigestType.CRC32C, new byte[0]);
            long last = lh.getLastAddConfirmed();
            List<org.apache.bookkeeper.net.BookieId> ensemble = lh.getLedgerMetadata().getAllEnsembles()
                    .lastEntry().getValue();
            for (org.apache.bookkeeper.net.BookieId id : ensemble) {
                int rc = raw.add(id, recovered, lh.getLedgerKey(), last + 1, last, new byte[] {1, 2, 3}, 0);
                assertEquals(-101, rc, path + ": add to the recovered ledger " + recovered + " on " + id);
            }
            lh.close();
            Cluster.log(what + ": ledger " + recovered + " fenced on " + ensemble);
        }
        c.assertHealthy();
        Cluster.log(what + ": Pulsar scenario done in " + (System.nanoTime() - t0) / 1_000_000 + " ms");
    }
}
