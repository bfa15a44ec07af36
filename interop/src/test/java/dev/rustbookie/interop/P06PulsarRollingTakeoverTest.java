package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.bookkeeper.client.api.LedgerMetadata;
import org.apache.bookkeeper.net.BookieId;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * P06 (issue 32): a rolling upgrade of a Pulsar cluster's bookies by binary swap. A Pulsar 4.0.8
 * broker writes to three Java bookies (4.18.2, DbLedgerStorage, Pulsar's choice; managed
 * ledgers E3 W3 A2) while two producers send and a consumer reads the topic. One at a time,
 * at 15 %, 40 % and 65 % of the acknowledged messages, each Java bookie is stopped (the first
 * two with SIGTERM, the last SIGKILLed) and ours is started on its own bk_server.conf and
 * directories. No autorecovery runs and no fourth bookie exists, so nothing can be
 * re-replicated: every ledger's ensembles hold only the three original bookie ids. Every
 * acknowledged message is received by the consumer, once, each producer's in sequence order,
 * byte for byte; and read back again from the start once all three bookies are ours.
 */
@Tag("pulsar")
@Timeout(value = 900, unit = TimeUnit.SECONDS)
class P06PulsarRollingTakeoverTest {
    static final long SEED = 3206;
    /** Messages per producer (two producers). */
    static final int N = Integer.getInteger("interop.pulsar.messages", 6000);

    @Test
    void rollingTakeover() throws Exception {
        List<Process> ours = new ArrayList<>();
        try (Cluster c = new Cluster("p06")) {
            List<JavaBookie> javas = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                javas.add(c.addJava());
            }
            c.startAll();
            Set<BookieId> original = new HashSet<>();
            for (JavaBookie j : javas) {
                original.add(j.bookieId());
            }
            PulsarBroker b = c.track(new PulsarBroker(c, "broker"));
            b.setupMetadata();
            b.start(Duration.ofSeconds(180));
            String name = "p06-rolling";
            String topic = "persistent://public/default/" + name;
            String topicPath = "/admin/v2/persistent/public/default/" + name;
            assertEquals(204, b.http("PUT", topicPath, null).statusCode(), "create " + topic);
            assertEquals(204, b.http("PUT", topicPath + "/subscription/live", null).statusCode());
            assertEquals(204, b.http("PUT", topicPath + "/subscription/replay", null).statusCode());

            Path acks = c.runDir.resolve("pulsar-acks.txt");
            Path live = c.runDir.resolve("pulsar-live.txt");
            Process cons = b.driver("consume-live", List.of("consume", b.serviceUrl(), topic, live.toString(),
                    "live", "Exclusive", Integer.toString(2 * N), Long.toString(SEED), "1", "5"));
            Process prod = b.driver("produce", List.of("produce", b.serviceUrl(), topic, acks.toString(),
                    Integer.toString(N), Long.toString(SEED), "16384"));
            double[] at = {0.15, 0.40, 0.65};
            for (int i = 0; i < 3; i++) {
                long want = (long) (at[i] * 2 * N);
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(240);
                while (P01PulsarTest.count(acks, "ack ") < want) {
                    assertTrue(prod.isAlive() || P01PulsarTest.count(acks, "ack ") >= want,
                            "the producer exited early");
                    assertTrue(System.nanoTime() < deadline, "producers did not reach " + want + " acks");
                    Thread.sleep(20);
                }
                JavaBookie j = javas.get(i);
                long acked = P01PulsarTest.count(acks, "ack ");
                if (i < 2) {
                    j.stop();
                } else {
                    j.kill();
                }
                Cluster.log("swap " + (i + 1) + ": " + j.id() + " " + (i < 2 ? "stopped" : "killed") + " at "
                        + acked + " acks");
                ours.add(OursOnJava.start(c, j, "ours-on-" + j.name));
            }
            assertTrue(prod.waitFor(300, TimeUnit.SECONDS), "producers did not finish within 300 s");
            Procs.forget(prod);
            Map<String, P01PulsarTest.Ack> acked = new HashMap<>();
            for (String l : P01PulsarTest.lines(acks)) {
                String[] f = l.split(" ");
                if (f[0].equals("ack")) {
                    P01PulsarTest.Ack a = new P01PulsarTest.Ack(f[1], Long.parseLong(f[2]), f[3],
                            Integer.parseInt(f[4]), f[5]);
                    assertEquals(null, acked.put(a.producer() + "/" + a.seq(), a), "acknowledged twice: " + l);
                }
            }
            assertEquals(0, prod.exitValue(), "producer driver failed");
            assertEquals(2 * N, acked.size(), "every message acknowledged to the producers");
            assertTrue(cons.waitFor(300, TimeUnit.SECONDS), "the live consumer did not finish");
            Procs.forget(cons);
            assertEquals(0, cons.exitValue(), "live consumer driver failed");
            verify(live, acked, "live consumer (through the swaps)");

            // Everything again from the start, now that every bookie is ours.
            Path replay = c.runDir.resolve("pulsar-replay.txt");
            Process again = b.driver("consume-replay", List.of("consume", b.serviceUrl(), topic, replay.toString(),
                    "replay", "Exclusive", Integer.toString(2 * N), Long.toString(SEED), "1", "3"));
            assertTrue(again.waitFor(300, TimeUnit.SECONDS), "the replay consumer did not finish");
            Procs.forget(again);
            assertEquals(0, again.exitValue(), "replay consumer driver failed");
            verify(replay, acked, "replay consumer (all bookies ours)");

            // Nothing re-replicated: the topic's ledgers only ever had the three original bookies.
            String stats = b.http("GET", topicPath + "/internalStats", null).body();
            Matcher m = Pattern.compile("\"ledgerId\"\\s*:\\s*(\\d+)").matcher(stats);
            Set<Long> ledgers = new java.util.TreeSet<>();
            while (m.find()) {
                ledgers.add(Long.parseLong(m.group(1)));
            }
            org.apache.bookkeeper.client.BookKeeper bk = c.client(false);
            for (long id : ledgers) {
                LedgerMetadata md = bk.getLedgerManager().readLedgerMetadata(id).get().getValue();
                for (List<BookieId> ensemble : md.getAllEnsembles().values()) {
                    assertTrue(original.containsAll(ensemble), "ledger " + id + " ensemble " + ensemble);
                }
            }
            Cluster.log("ledgers " + ledgers + ": every ensemble within " + original);
        } finally {
            for (Process p : ours) {
                OursOnJava.stop(p);
            }
        }
    }

    /** Every acknowledged message received once, each producer's in sequence order, byte for byte. */
    static void verify(Path received, Map<String, P01PulsarTest.Ack> acked, String who) throws Exception {
        Map<String, Long> next = new HashMap<>();
        Set<String> seen = new HashSet<>();
        int n = 0;
        for (String l : P01PulsarTest.lines(received)) {
            String[] f = l.split(" ");
            if (f[0].equals("error")) {
                throw new AssertionError(who + ": " + l);
            }
            if (!f[0].equals("msg")) {
                continue;
            }
            n++;
            String producer = f[2];
            long seq = Long.parseLong(f[3]);
            assertTrue(seen.add(producer + "/" + seq), who + ": received twice: " + l);
            long want = next.getOrDefault(producer, 0L);
            assertEquals(want, seq, who + ": " + producer + "'s messages in order: " + l);
            next.put(producer, want + 1);
            P01PulsarTest.Ack a = acked.get(producer + "/" + seq);
            assertTrue(a != null, who + ": a message never acknowledged: " + l);
            assertEquals(a.size(), Integer.parseInt(f[5]), who + ": size of " + l);
            assertEquals(a.sha(), f[6], who + ": bytes of " + l);
            assertEquals("OK", f[7], who + ": payload of " + l);
        }
        assertEquals(acked.size(), n, who + ": every acknowledged message received once");
        Cluster.log(who + ": all " + n + " messages received once, in order, byte for byte");
    }
}
