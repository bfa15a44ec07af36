package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.bookkeeper.client.BKException;
import org.apache.bookkeeper.client.BookKeeperAdmin;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.client.api.LedgerMetadata;
import org.apache.bookkeeper.net.BookieId;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * P04 Pulsar under faults, on every subscription type, and through retention (issue #13, tier
 * "pulsar-full"). Each case: a real Pulsar 4.0.8 broker (PulsarBroker, E3 W3 A2 managed
 * ledgers) over four of our bookies (Java ones with -Dinterop.impl=java, to check the test).
 * <ol>
 * <li>{@link #bookieKillAndAutorecovery}: P01's two producers (batching and not, deduplication
 * on) on a topic; at 40 % acknowledged, one bookie of the topic's current ledger is SIGKILLed.
 * The broker changes the ensemble and goes on: every message is acknowledged. Java's
 * autorecovery (AutoRecoveryMain, own JVM) then re-replicates every ledger that named the dead
 * bookie: afterwards no ensemble of any ledger names it, nothing is left under-replicated, and
 * every entry of every ledger reads back raw from every bookie of its write set, the copies
 * the same (ids, length, payload byte for byte; the replication worker re-packages an entry
 * with its own LAC, so the LAC field and digest of a copied entry may differ, with Java bookies
 * too). One Exclusive consumer reads every acknowledged message once, in order, byte
 * for byte. The killed bookie restarts, registers, and serves raw reads of the entries it held
 * (the same payloads as the new replicas; it may lack only a fragment's last few entries, in flight
 * at the kill).</li>
 * <li>{@link #subscriptionsCompressionChunking}: a 4-partition topic and a non-partitioned
 * topic, each with two LZ4 producers (batching with key-based batches, and no batching) of
 * N / 2 messages (16 B..16 KiB, 64 keys), each read by a Key_Shared and a Failover
 * subscription of two consumers; a third topic gets messages of 1..7 MiB from a chunking
 * producer (LZ4, chunks of ≤ 1.5 MiB, every third message above the broker's 5 MiB
 * maxMessageSize), read by a Failover (two consumers) and an Exclusive subscription. All
 * consumers subscribe before the producers start. Every acknowledged message is received once
 * per subscription, byte for byte; Key_Shared: each key on one consumer, per producer and key in
 * sequence order; Failover: one active consumer per partition (per topic when not
 * partitioned), per producer in sequence order; the chunk topic holds more entries than
 * messages.</li>
 * <li>{@link #retentionDeletesLedgersAndGcReclaims}: retention 0 (time and size), ledgers of
 * at most 100 entries rolled at once, deduplication off, bookies with 1 MiB entry logs. One
 * producer (batching off) writes M messages of 8 KiB; one consumer reads and acknowledges them
 * all. Pulsar deletes every consumed ledger (gone from the BookKeeper metadata); after a forced
 * GC (PUT /api/v1/bookie/gc) no bookie serves their entries, and the entry-log bytes of every
 * bookie drop to less than half of what they were after producing.</li>
 * </ol>
 * Scaled by -Dinterop.pulsar.messages (per producer in case 1 as in P01, default 2000; per topic
 * in case 2, default 4000), -Dinterop.pulsar.chunked (case 2, default 9) and
 * -Dinterop.pulsar.retention.messages (case 3, default 3000).
 */
@Tag("pulsar-full")
@Timeout(value = 900, unit = TimeUnit.SECONDS)
class P04PulsarFaultsTest {
    static final long SEED = 1404;

    static String impl() {
        return "java".equals(System.getProperty("interop.impl", System.getenv("INTEROP_IMPL"))) ? "java" : "ours";
    }

    static Cluster fourBookies(String name) throws Exception {
        Cluster c = new Cluster(name);
        for (int i = 0; i < 4; i++) {
            c.addRust();
        }
        return c;
    }

    static PulsarBroker broker(Cluster c, Map<String, String> extra) throws Exception {
        PulsarBroker b = c.track(new PulsarBroker(c, "broker"));
        b.extraConf.putAll(extra);
        b.setupMetadata();
        b.start(Duration.ofSeconds(180));
        return b;
    }

    /** The ledger ids of a topic (internalStats "ledgers", oldest first; the last is the current one). */
    static List<Long> topicLedgers(PulsarBroker b, String topicPath) throws Exception {
        String stats = b.http("GET", topicPath + "/internalStats", null).body();
        int cursors = stats.indexOf("\"cursors\"");
        Matcher m = Pattern.compile("\"ledgerId\"\\s*:\\s*(\\d+)").matcher(cursors < 0 ? stats : stats.substring(0, cursors));
        List<Long> out = new ArrayList<>();
        while (m.find()) {
            long id = Long.parseLong(m.group(1));
            if (!out.contains(id)) {
                out.add(id);
            }
        }
        return out;
    }

    static long statsNumber(PulsarBroker b, String path, String field) throws Exception {
        String stats = b.http("GET", path, null).body();
        Matcher m = Pattern.compile("\"" + field + "\"\\s*:\\s*(-?\\d+)").matcher(stats);
        assertTrue(m.find(), field + " in " + path + ": " + stats);
        return Long.parseLong(m.group(1));
    }

    static void awaitExit(Process p, int seconds, String what) throws Exception {
        assertTrue(p.waitFor(seconds, TimeUnit.SECONDS), what + " did not finish within " + seconds + " s");
        Procs.forget(p);
        assertEquals(0, p.exitValue(), what + " failed (see its log under logs/)");
    }

    static Bookie bookieOf(Cluster c, BookieId id) {
        for (Bookie b : c.bookies) {
            if (b.bookieId().equals(id)) {
                return b;
            }
        }
        throw new AssertionError("no bookie " + id + " in " + c.bookies);
    }

    // ---------------------------------------------------------------------------------------
    // 1. Bookie SIGKILL while producing + autorecovery

    /** Entry ranges [first, last] of each ensemble of a ledger ({@code last} -1: none). */
    static NavigableMap<Long, long[]> fragments(LedgerMetadata md, long lastEntry) {
        NavigableMap<Long, long[]> out = new TreeMap<>();
        List<Long> starts = new ArrayList<>(md.getAllEnsembles().keySet());
        for (int i = 0; i < starts.size(); i++) {
            long first = starts.get(i);
            long last = i + 1 < starts.size() ? starts.get(i + 1) - 1 : lastEntry;
            out.put(first, new long[] {first, last});
        }
        return out;
    }

    /** The last entry of a ledger: the closed one's, or the LAC of an open one (read from its bookies). */
    static long lastEntry(BookKeeperAdmin admin, long id, LedgerMetadata md) throws Exception {
        if (md.isClosed()) {
            return md.getLastEntryId();
        }
        LedgerHandle lh = admin.openLedgerNoRecovery(id);
        try {
            return lh.readLastConfirmed();
        } finally {
            lh.close();
        }
    }

    static Map<Long, LedgerMetadata> allLedgers(BookKeeperAdmin admin, org.apache.bookkeeper.client.BookKeeper bk)
            throws Exception {
        Map<Long, LedgerMetadata> out = new TreeMap<>();
        for (long id : admin.listLedgers()) {
            try {
                out.put(id, bk.getLedgerManager().readLedgerMetadata(id).get().getValue());
            } catch (java.util.concurrent.ExecutionException e) {
                if (!(e.getCause() instanceof BKException.BKNoSuchLedgerExistsOnMetadataServerException)) {
                    throw e;
                }
            }
        }
        return out;
    }

    /** Ledgers marked under-replicated: the urL* znodes of the ROOT/underreplication/ledgers tree. */
    static int underReplicated(Cluster c) throws Exception {
        String base = c.root + "/underreplication/ledgers";
        if (c.zk().exists(base, false) == null) {
            return 0;
        }
        int n = 0;
        for (String p : org.apache.zookeeper.ZKUtil.listSubTreeBFS(c.zk(), base)) {
            if (p.substring(p.lastIndexOf('/') + 1).startsWith("urL")) {
                n++;
            }
        }
        return n;
    }

    /**
     * Two stored copies of an entry hold the same entry: ledger id, entry id, length and payload
     * equal. The LAC field (and so the digest) may differ: the replication worker re-packages
     * each entry it copies with its handle's LAC (Java's LedgerFragmentReplicator does so).
     */
    static boolean sameEntry(LedgerMetadata md, byte[] a, byte[] b) {
        int digest = switch (md.getDigestType()) {
            case CRC32 -> 8;
            case CRC32C -> 4;
            case MAC -> 20;
            case DUMMY -> 0;
        };
        return a != null && b != null && a.length == b.length && a.length >= 32 + digest
                && Arrays.equals(a, 0, 16, b, 0, 16) && Arrays.equals(a, 24, 32, b, 24, 32)
                && Arrays.equals(a, 32 + digest, a.length, b, 32 + digest, b.length);
    }

    static boolean names(LedgerMetadata md, BookieId id) {
        return md.getAllEnsembles().values().stream().anyMatch(e -> e.contains(id));
    }

    @Test
    void bookieKillAndAutorecovery() throws Exception {
        final int n = Integer.getInteger("interop.pulsar.messages", 2000);
        String what = impl();
        try (Cluster c = fourBookies("p04-kill")) {
            c.startAll();
            long t0 = System.nanoTime();
            PulsarBroker b = broker(c, Map.of());
            String name = "p04-kill";
            String topic = "persistent://public/default/" + name;
            String topicPath = "/admin/v2/persistent/public/default/" + name;
            assertEquals(204, b.http("PUT", topicPath, null).statusCode(), "create " + topic);
            assertEquals(204, b.http("PUT", topicPath + "/subscription/sub-exclusive", null).statusCode(),
                    "create subscription");

            // 1. Produce; SIGKILL a bookie of the current ledger at 40 %.
            org.apache.bookkeeper.client.BookKeeper bk = c.client(false);
            List<Long> before = topicLedgers(b, topicPath);
            long current = before.get(before.size() - 1);
            LedgerMetadata atStart = bk.getLedgerManager().readLedgerMetadata(current).get().getValue();
            List<BookieId> ensemble = atStart.getAllEnsembles().lastEntry().getValue();
            Bookie victim = bookieOf(c, ensemble.get(1));
            Path acks = c.runDir.resolve("pulsar-acks.txt");
            Process prod = b.driver("produce", List.of("produce", b.serviceUrl(), topic, acks.toString(),
                    Integer.toString(n), Long.toString(SEED), "16384"));
            long killAt = 2L * n * 4 / 10;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(180);
            while (P01PulsarTest.count(acks, "ack ") < killAt) {
                assertTrue(prod.isAlive(), () -> "the producer exited early (" + prod.exitValue() + ")");
                assertTrue(System.nanoTime() < deadline, "producers did not reach " + killAt + " acks in 180 s");
                Thread.sleep(20);
            }
            long ackedAtKill = P01PulsarTest.count(acks, "ack ");
            victim.kill();
            long killedAt = System.nanoTime();
            assertTrue(ackedAtKill < 2L * n, "killed while producing (" + ackedAtKill + " acknowledged)");
            Cluster.log(what + ": SIGKILLed " + victim + ", of ledger " + current + "'s ensemble " + ensemble + ", with "
                    + ackedAtKill + " of " + 2 * n + " messages acknowledged");
            awaitExit(prod, 300, "producer");
            Map<String, P01PulsarTest.Ack> acked = new HashMap<>();
            for (String l : P01PulsarTest.lines(acks)) {
                String[] f = l.split(" ");
                if (f[0].equals("ack")) {
                    P01PulsarTest.Ack a = new P01PulsarTest.Ack(f[1], Long.parseLong(f[2]), f[3], Integer.parseInt(f[4]),
                            f[5]);
                    assertEquals(null, acked.put(a.producer() + "/" + a.seq(), a), "acknowledged twice: " + l);
                }
            }
            assertEquals(2 * n, acked.size(), "every message acknowledged to the producers");
            Cluster.log(what + ": all " + acked.size() + " messages acknowledged, the last "
                    + (System.nanoTime() - killedAt) / 1_000_000 + " ms after the kill");

            // 2. The ledgers that name the dead bookie; the broker's ensemble change(s).
            BookKeeperAdmin admin = c.admin();
            Map<Long, LedgerMetadata> snapshot = new TreeMap<>();
            Map<Long, Long> lastEntries = new HashMap<>();
            List<Long> topicNow = topicLedgers(b, topicPath);
            StringBuilder changes = new StringBuilder();
            for (Map.Entry<Long, LedgerMetadata> e : allLedgers(admin, bk).entrySet()) {
                LedgerMetadata md = e.getValue();
                if (names(md, victim.bookieId())) {
                    snapshot.put(e.getKey(), md);
                    lastEntries.put(e.getKey(), lastEntry(admin, e.getKey(), md));
                }
                if (md.getAllEnsembles().size() > 1) {
                    changes.append(" ").append(e.getKey()).append(md.getAllEnsembles());
                }
            }
            LedgerMetadata cur = snapshot.get(current);
            assertTrue(cur != null, "ledger " + current + " named " + victim);
            assertTrue(cur.getAllEnsembles().size() > 1
                    && !cur.getAllEnsembles().lastEntry().getValue().contains(victim.bookieId()),
                    "the broker replaced " + victim + " in its ledger " + current + ": " + cur);
            assertTrue(changes.length() > 0, "an ensemble change after the kill");
            Cluster.log(what + ": topic ledgers " + topicNow + "; ensemble changes:" + changes + "; ledgers naming "
                    + victim.id() + ": " + snapshot.keySet() + " (last entries " + lastEntries + ")");

            // 3. Autorecovery re-replicates them.
            AutoRecovery ar = c.track(new AutoRecovery(c, "autorecovery"));
            long tr = System.nanoTime();
            ar.start();
            deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(240);
            Set<Long> left = new TreeSet<>(snapshot.keySet());
            int under = -1;
            while (true) {
                assertTrue(ar.isAlive(), "autorecovery exited; see logs/autorecovery.log");
                left.clear();
                for (Map.Entry<Long, LedgerMetadata> e : allLedgers(admin, bk).entrySet()) {
                    if (names(e.getValue(), victim.bookieId())) {
                        left.add(e.getKey());
                    }
                }
                under = underReplicated(c);
                if (left.isEmpty() && under == 0) {
                    break;
                }
                assertTrue(System.nanoTime() < deadline, "within 240 s autorecovery left " + left + " naming "
                        + victim.id() + ", " + under + " marked under-replicated");
                Thread.sleep(1000);
            }
            long recoveryMs = (System.nanoTime() - tr) / 1_000_000;
            Map<Long, LedgerMetadata> after = allLedgers(admin, bk);
            StringBuilder moved = new StringBuilder();
            for (long id : snapshot.keySet()) {
                LedgerMetadata md = after.get(id);
                moved.append(" ").append(id).append(md == null ? " (deleted)" : (md.isClosed() ? " closed " : " open ")
                        + md.getAllEnsembles());
            }
            Cluster.log(what + ": autorecovery re-replicated " + snapshot.size() + " ledgers in " + recoveryMs
                    + " ms, none names " + victim.id() + " any more:" + moved);

            // 4. Every entry of every ledger from every bookie of its write set (E = W): same bytes.
            Raw raw = c.raw(false);
            long reads = 0;
            for (Map.Entry<Long, LedgerMetadata> e : after.entrySet()) {
                long id = e.getKey();
                LedgerMetadata md = e.getValue();
                assertEquals(md.getEnsembleSize(), md.getWriteQuorumSize(), "E = W for " + id);
                long last = md.isClosed() ? md.getLastEntryId()
                        : Math.max(lastEntry(admin, id, md), lastEntries.getOrDefault(id, -1L));
                for (long[] fr : fragments(md, last).values()) {
                    List<BookieId> ens = md.getAllEnsembles().floorEntry(fr[0]).getValue();
                    for (long entry = fr[0]; entry <= fr[1]; entry++) {
                        byte[] first = null;
                        for (BookieId bid : ens) {
                            Raw.Result r = raw.read(bid, id, entry);
                            reads++;
                            assertEquals(0, r.rc(), "raw read of " + id + ":" + entry + " on " + bid + " (ensemble "
                                    + ens + ")");
                            if (first == null) {
                                first = r.data();
                            } else {
                                assertTrue(sameEntry(md, first, r.data()), id + ":" + entry + " differs on " + bid);
                            }
                        }
                    }
                }
            }
            Cluster.log(what + ": " + reads + " raw reads of the " + after.size()
                    + " ledgers from every bookie of their write sets, the replicas the same entries");

            // 5. Every acknowledged message once, in order, byte for byte.
            Path recv = c.runDir.resolve("pulsar-received.txt");
            Process cons = b.driver("consume", List.of("consume", b.serviceUrl(), topic, recv.toString(),
                    "sub-exclusive", "Exclusive", Integer.toString(2 * n), Long.toString(SEED), "1", "3"));
            awaitExit(cons, 300, "consumer");
            Map<String, Long> next = new HashMap<>();
            int received = 0;
            for (String l : P01PulsarTest.lines(recv)) {
                String[] f = l.split(" ");
                assertFalse(f[0].equals("error"), "consumer: " + l);
                if (!f[0].equals("msg")) {
                    continue;
                }
                received++;
                long want = next.getOrDefault(f[2], 0L);
                assertEquals(want, Long.parseLong(f[3]), f[2] + ": in order, each once: " + l);
                next.put(f[2], want + 1);
                P01PulsarTest.Ack a = acked.get(f[2] + "/" + f[3]);
                assertTrue(a != null, "never acknowledged: " + l);
                assertEquals(a.size(), Integer.parseInt(f[5]), "size of " + l);
                assertEquals(a.sha(), f[6], "bytes of " + l);
                assertEquals("OK", f[7], "payload of " + l);
            }
            assertEquals(2 * n, received, "every acknowledged message received once");
            Cluster.log(what + ": all " + received + " messages received once, in order, byte for byte");

            // 6. The killed bookie comes back and serves what it held.
            victim.start();
            assertTrue(c.isRegistered(victim.id()), victim + " registered again");
            long held = 0;
            long missing = 0;
            StringBuilder gaps = new StringBuilder();
            for (Map.Entry<Long, LedgerMetadata> e : snapshot.entrySet()) {
                long id = e.getKey();
                LedgerMetadata was = e.getValue();
                LedgerMetadata now = after.get(id);
                for (long[] fr : fragments(was, lastEntries.get(id)).values()) {
                    if (!was.getAllEnsembles().floorEntry(fr[0]).getValue().contains(victim.bookieId())) {
                        continue;
                    }
                    long firstMissing = -1;
                    for (long entry = fr[0]; entry <= fr[1]; entry++) {
                        Raw.Result r = raw.read(victim.bookieId(), id, entry);
                        if (r.rc() == 0) {
                            assertTrue(firstMissing < 0, victim + " lacks " + id + ":" + firstMissing + " but holds "
                                    + id + ":" + entry + " (only a fragment's tail may be missing)");
                            held++;
                            if (now != null) {
                                BookieId replica = now.getAllEnsembles().floorEntry(entry).getValue().get(0);
                                assertTrue(sameEntry(now, raw.read(replica, id, entry).data(), r.data()),
                                        id + ":" + entry + " on " + victim + " is the replica's on " + replica);
                            }
                        } else {
                            assertTrue(r.rc() == -13 || r.rc() == -7, "raw read of " + id + ":" + entry + " on "
                                    + victim + " -> " + r.rc());
                            if (firstMissing < 0) {
                                firstMissing = entry;
                            }
                            missing++;
                        }
                    }
                    if (firstMissing >= 0) {
                        gaps.append(" ").append(id).append(":").append(firstMissing).append("..").append(fr[1]);
                    }
                }
            }
            assertTrue(held > 0, victim + " serves entries it held");
            Cluster.log(what + ": " + victim + " back: serves " + held + " entries it held, the same as the new "
                    + "replicas; lacks " + missing + (gaps.length() > 0 ? " (fragment tails:" + gaps + ")" : "")
                    + "; its list_ledgers: " + victim.http("GET", "/api/v1/bookie/list_ledgers", null).body()
                    .replaceAll("\\s+", " "));
            c.assertHealthy();
            Cluster.log(what + ": P04 bookie kill + autorecovery done in " + (System.nanoTime() - t0) / 1_000_000
                    + " ms");
        }
    }

    // ---------------------------------------------------------------------------------------
    // 2. Subscriptions, compression, chunking

    record MixAck(int size, String sha, String key) {}

    @Test
    void subscriptionsCompressionChunking() throws Exception {
        final int perTopic = Integer.getInteger("interop.pulsar.messages", 4000);
        final int perProducer = Math.max(1, perTopic / 2);
        final int chunked = Integer.getInteger("interop.pulsar.chunked", 9);
        String what = impl();
        try (Cluster c = fourBookies("p04-subs")) {
            c.startAll();
            long t0 = System.nanoTime();
            PulsarBroker b = broker(c, Map.of());
            String ns = "persistent://public/default/";
            String nsPath = "/admin/v2/persistent/public/default/";
            String part = ns + "p04-part";
            String single = ns + "p04-single";
            String chunks = ns + "p04-chunks";
            assertEquals(204, b.http("PUT", nsPath + "p04-part/partitions", "4").statusCode(), "create " + part);
            assertEquals(204, b.http("PUT", nsPath + "p04-single", null).statusCode(), "create " + single);
            assertEquals(204, b.http("PUT", nsPath + "p04-chunks", null).statusCode(), "create " + chunks);
            // topic,subscription,type,consumers,receiver queue
            List<String> specs = List.of(part + ",ks,Key_Shared,2,200", part + ",fo,Failover,2,200",
                    single + ",ks,Key_Shared,2,200", single + ",fo,Failover,2,200",
                    chunks + ",fo,Failover,2,4", chunks + ",ex,Exclusive,1,4");
            long expected = 2L * 2 * 2 * perProducer + 2L * chunked;

            Path recv = c.runDir.resolve("pulsar-received.txt");
            List<String> cargs = new ArrayList<>(List.of("consume-subs", b.serviceUrl(), recv.toString(),
                    Long.toString(SEED), Long.toString(expected), "5"));
            cargs.addAll(specs);
            Process cons = b.driver("consume-subs", cargs, "768m");
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            while (P01PulsarTest.count(recv, "ready") == 0) {
                assertTrue(cons.isAlive(), "the consumer driver exited early");
                assertTrue(System.nanoTime() < deadline, "consumers not subscribed within 120 s");
                Thread.sleep(100);
            }
            Path acks = c.runDir.resolve("pulsar-acks.txt");
            long tp = System.nanoTime();
            Process prod = b.driver("produce-mix", List.of("produce-mix", b.serviceUrl(), acks.toString(),
                    Long.toString(SEED), Integer.toString(perProducer), "64", part + "," + single, chunks,
                    Integer.toString(chunked)), "512m");
            awaitExit(prod, 840, "producer");
            long produceMs = (System.nanoTime() - tp) / 1_000_000;
            awaitExit(cons, 300, "consumer");
            long consumeMs = (System.nanoTime() - tp) / 1_000_000;

            Map<String, MixAck> acked = new HashMap<>();
            Map<String, Integer> perTopicAcked = new TreeMap<>();
            for (String l : P01PulsarTest.lines(acks)) {
                String[] f = l.split(" ");
                assertFalse(f[0].equals("fail"), "producer: " + l);
                if (f[0].equals("ack")) {
                    // ack TOPIC PRODUCER P SEQ KEY MESSAGE_ID SIZE SHA256
                    assertEquals(null, acked.put(f[1] + " " + f[2] + " " + f[4],
                            new MixAck(Integer.parseInt(f[7]), f[8], f[5])), "acknowledged twice: " + l);
                    perTopicAcked.merge(f[1], 1, Integer::sum);
                }
            }
            assertEquals(2 * 2 * perProducer + chunked, acked.size(), "every message acknowledged: " + perTopicAcked);

            // per subscription: received once each; order and consumer assignment as the type promises
            Map<String, Set<String>> got = new TreeMap<>();
            Map<String, Long> lastSeq = new HashMap<>();
            Map<String, Set<String>> consumersOf = new HashMap<>();
            Map<String, Map<String, Integer>> perConsumer = new TreeMap<>();
            int largest = 0;
            for (String l : P01PulsarTest.lines(recv)) {
                String[] f = l.split(" ");
                assertFalse(f[0].equals("error"), "consumer: " + l);
                if (!f[0].equals("msg")) {
                    continue;
                }
                // msg TOPIC SUBSCRIPTION CONSUMER PRODUCER P SEQ KEY PARTITION MESSAGE_ID SIZE SHA256 OK|BAD
                String topic = f[1];
                String sub = topic + " " + f[2];
                String id = topic + " " + f[4] + " " + f[6];
                MixAck a = acked.get(id);
                assertTrue(a != null, "received a message never acknowledged: " + l);
                assertTrue(got.computeIfAbsent(sub, k -> new HashSet<>()).add(id), "received twice on " + sub + ": " + l);
                assertEquals(a.size, Integer.parseInt(f[10]), "size of " + l);
                assertEquals(a.sha, f[11], "bytes of " + l);
                assertEquals("OK", f[12], "payload of " + l);
                assertEquals(a.key, f[7], "key of " + l);
                largest = Math.max(largest, a.size);
                perConsumer.computeIfAbsent(sub, k -> new TreeMap<>()).merge(f[3], 1, Integer::sum);
                boolean keyShared = f[2].equals("ks");
                boolean partitioned = !f[8].equals("-");
                // ordering unit: per key on Key_Shared and for the key-based batching producer
                // (its batches are per key: Pulsar orders its messages per key only); else per
                // partition (or topic)
                boolean perKey = keyShared || f[4].equals("lz4-batch");
                String unit = perKey ? f[7] : f[8];
                String orderKey = sub + " " + f[4] + " " + unit;
                long seq = Long.parseLong(f[6]);
                Long prev = lastSeq.put(orderKey, seq);
                assertTrue(prev == null || prev < seq, sub + ": " + f[4] + "'s messages of "
                        + (perKey ? "key " : "partition ") + unit + " in order: " + seq + " after " + prev);
                // which consumers served a key (Key_Shared) or a partition / the topic (Failover, Exclusive)
                String assignKey = sub + " " + (keyShared ? "key " + f[7] : "partition " + f[8]);
                consumersOf.computeIfAbsent(assignKey, k -> new TreeSet<>()).add(f[3]);
                assertTrue(!partitioned || topic.equals(part), "partition on a non-partitioned topic: " + l);
            }
            for (String spec : specs) {
                String[] s = spec.split(",");
                String sub = s[0] + " " + s[1];
                int want = perTopicAcked.getOrDefault(s[0], 0);
                assertEquals(want, got.getOrDefault(sub, Set.of()).size(), "every message once on " + sub);
            }
            for (Map.Entry<String, Set<String>> e : consumersOf.entrySet()) {
                assertEquals(1, e.getValue().size(), e.getKey() + " served by one consumer: " + e.getValue());
            }
            assertEquals(2, perConsumer.get(part + " ks").size(), "both Key_Shared consumers of " + part + " used");
            assertEquals(2, perConsumer.get(single + " ks").size(), "both Key_Shared consumers of " + single + " used");
            assertEquals(2, perConsumer.get(part + " fo").size(), "both Failover consumers of " + part + " active");
            assertEquals(1, perConsumer.get(single + " fo").size(), "one active Failover consumer on " + single);
            long chunkEntries = statsNumber(b, nsPath + "p04-chunks/internalStats", "entriesAddedCounter");
            assertTrue(chunkEntries > chunked, "chunked messages stored as several entries: " + chunkEntries
                    + " entries for " + chunked + " messages");
            assertTrue(largest > 5 << 20, "a message above the broker's maxMessageSize went through: " + largest);
            Cluster.log(what + ": produced " + acked.size() + " messages in " + produceMs + " ms (" + perTopicAcked
                    + "), consumed by every subscription by " + consumeMs + " ms; per consumer " + perConsumer + "; "
                    + chunked + " chunked messages (largest " + largest + " B) in " + chunkEntries + " entries");
            c.assertHealthy();
            Cluster.log(what + ": P04 subscriptions/compression/chunking done in "
                    + (System.nanoTime() - t0) / 1_000_000 + " ms");
        }
    }

    // ---------------------------------------------------------------------------------------
    // 3. Retention: Pulsar deletes consumed ledgers, the bookies' GC reclaims their space

    /** Bytes of entry-log files: ours ledgers/shard-N/XXXXXXXXXXXXXXXX.log, Java's ledgers/current/X.log. */
    static long entryLogBytes(Bookie b) throws Exception {
        return entryLogs(b).values().stream().mapToLong(Long::longValue).sum();
    }

    /**
     * The entry-log files of a bookie (path under its ledger dir -> size). The bookie's GC may
     * delete or rename files while they are listed: the listing is then taken again.
     */
    static Map<String, Long> entryLogs(Bookie b) throws Exception {
        for (int attempt = 1; ; attempt++) {
            try {
                return listEntryLogs(b);
            } catch (java.io.UncheckedIOException | java.nio.file.NoSuchFileException e) {
                if (attempt == 20) {
                    throw e;
                }
                Thread.sleep(100);
            }
        }
    }

    static Map<String, Long> listEntryLogs(Bookie b) throws IOException {
        Pattern name = Pattern.compile("[0-9a-f]+\\.log");
        Map<String, Long> out = new TreeMap<>();
        try (Stream<Path> s = Files.walk(b.dir.resolve("ledgers"))) {
            for (Path p : (Iterable<Path>) s::iterator) {
                String dir = p.getParent().getFileName().toString();
                if (Files.isRegularFile(p) && name.matcher(p.getFileName().toString()).matches()
                        && (dir.equals("current") || dir.startsWith("shard-"))) {
                    out.put(b.dir.resolve("ledgers").relativize(p).toString(), Files.size(p));
                }
            }
        }
        return out;
    }

    static String describe(Map<String, Long> files) {
        return files.size() + " files, " + files.values().stream().mapToLong(Long::longValue).sum() + " B";
    }

    @Test
    void retentionDeletesLedgersAndGcReclaims() throws Exception {
        final int messages = Integer.getInteger("interop.pulsar.retention.messages", 3000);
        final int size = 8192;
        String what = impl();
        try (Cluster c = fourBookies("p04-retention")) {
            for (Bookie k : c.bookies) {
                k.extraConf.put("logSizeLimit", Integer.toString(1 << 20));
                if (k.isJava()) {
                    // DbLedgerStorage's write cache into entry logs every second (default 60 s)
                    k.extraConf.put("flushInterval", "1000");
                }
            }
            c.startAll();
            long t0 = System.nanoTime();
            Map<String, String> conf = new LinkedHashMap<>();
            conf.put("brokerDeduplicationEnabled", "false");
            conf.put("defaultRetentionTimeInMinutes", "0");
            conf.put("defaultRetentionSizeInMB", "0");
            conf.put("managedLedgerMaxEntriesPerLedger", "100");
            conf.put("managedLedgerMinLedgerRolloverTimeMinutes", "0");
            conf.put("retentionCheckIntervalInSeconds", "2");
            // the consumer's last cumulative ack may come within a second of the one before:
            // the mark-delete rate limit (1/s) then leaves it to the cursors' periodic flush
            // (60 s by default), which holds back the trim of the last ledgers
            conf.put("managedLedgerCursorPositionFlushSeconds", "2");
            PulsarBroker b = broker(c, conf);
            String name = "p04-retention";
            String topic = "persistent://public/default/" + name;
            String topicPath = "/admin/v2/persistent/public/default/" + name;
            String sub = "sub-retention";
            assertEquals(204, b.http("PUT", topicPath, null).statusCode(), "create " + topic);
            assertEquals(204, b.http("PUT", topicPath + "/subscription/" + sub, null).statusCode(), "create " + sub);

            long deadline;
            Process prod = b.driver("bench-produce", List.of("bench-produce", b.serviceUrl(), topic,
                    Integer.toString(messages), Integer.toString(size)));
            awaitExit(prod, 600, "producer");
            List<Long> ledgers = topicLedgers(b, topicPath);
            assertTrue(ledgers.size() >= 5, "ledgers rolled every 100 entries: " + ledgers);
            org.apache.bookkeeper.client.BookKeeper bk = c.client(false);
            for (long id : ledgers) {
                bk.getLedgerManager().readLedgerMetadata(id).get();
            }
            // the entry logs hold the data: ours flushed on request, Java's every second
            for (Bookie k : c.bookies) {
                if (!k.isJava()) {
                    assertEquals(200, k.http("PUT", "/api/v1/bookie/flush", "").statusCode(), "flush " + k);
                }
            }
            Thread.sleep(3000);
            Map<String, Long> bytesBefore = new LinkedHashMap<>();
            Map<String, String> filesBefore = new LinkedHashMap<>();
            for (Bookie k : c.bookies) {
                Map<String, Long> f = entryLogs(k);
                bytesBefore.put(k.name, f.values().stream().mapToLong(Long::longValue).sum());
                filesBefore.put(k.name, describe(f));
            }
            Cluster.log(what + ": " + messages + " x " + size + " B in ledgers " + ledgers + "; entry logs "
                    + filesBefore);

            Process cons = b.driver("bench-consume", List.of("bench-consume", b.serviceUrl(), topic, sub,
                    Integer.toString(messages), Integer.toString(size)));
            awaitExit(cons, 300, "consumer");
            deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (statsNumber(b, topicPath + "/stats", "msgBacklog") != 0) {
                assertTrue(System.nanoTime() < deadline, "backlog of " + sub + " not 0 within 30 s: "
                        + b.http("GET", topicPath + "/stats", null).body());
                Thread.sleep(500);
            }

            // Pulsar deletes every consumed ledger (the current one stays).
            long td = System.nanoTime();
            deadline = td + TimeUnit.SECONDS.toNanos(120);
            List<Long> alive = new ArrayList<>();
            List<Long> deleted = new ArrayList<>();
            List<Long> current = List.of();
            while (true) {
                current = topicLedgers(b, topicPath);
                alive.clear();
                deleted.clear();
                for (long id : ledgers) {
                    if (current.contains(id)) {
                        continue;
                    }
                    try {
                        bk.getLedgerManager().readLedgerMetadata(id).get();
                        alive.add(id);
                    } catch (java.util.concurrent.ExecutionException e) {
                        assertTrue(e.getCause() instanceof BKException.BKNoSuchLedgerExistsOnMetadataServerException,
                                "metadata of " + id + ": " + e);
                        deleted.add(id);
                    }
                }
                // the last one or two (the one holding the mark-delete position) may stay current
                if (alive.isEmpty() && deleted.size() >= ledgers.size() - 2) {
                    break;
                }
                assertTrue(System.nanoTime() < deadline, "within 120 s Pulsar deleted " + deleted + ", not "
                        + alive + " (topic ledgers now " + current + ")");
                Thread.sleep(1000);
            }
            Set<Long> listed = new HashSet<>();
            for (long id : c.admin().listLedgers()) {
                listed.add(id);
            }
            for (long id : deleted) {
                assertFalse(listed.contains(id), "ledger " + id + " still listed in ZooKeeper");
            }
            Cluster.log(what + ": Pulsar deleted " + deleted.size() + " consumed ledgers in "
                    + (System.nanoTime() - td) / 1_000_000 + " ms; topic ledgers now " + current);

            // A forced GC on every bookie: the deleted ledgers' entries and their space go.
            long tg = System.nanoTime();
            for (Bookie k : c.bookies) {
                assertEquals(200, k.http("PUT", "/api/v1/bookie/gc", "{}").statusCode(), "PUT gc on " + k);
            }
            Raw raw = c.raw(false);
            deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            Map<String, Long> bytesAfter = new LinkedHashMap<>();
            String waitingFor = "";
            while (true) {
                waitingFor = "";
                for (Bookie k : c.bookies) {
                    long now = entryLogBytes(k);
                    bytesAfter.put(k.name, now);
                    if (now * 2 >= bytesBefore.get(k.name)) {
                        waitingFor += " " + k.name + " entry logs " + now + " B (were " + bytesBefore.get(k.name) + ")";
                    }
                    for (long id : deleted) {
                        int rc = raw.read(k.bookieId(), id, 0).rc();
                        if (rc != -7 && rc != -13) {
                            waitingFor += " " + k.name + " serves " + id + ":0 (" + rc + ")";
                            break;
                        }
                    }
                }
                if (waitingFor.isEmpty()) {
                    break;
                }
                assertTrue(System.nanoTime() < deadline, "120 s after a forced GC:" + waitingFor);
                Thread.sleep(1000);
                // Java's forced GC is one pass: ask again until it has seen every deletion
                for (Bookie k : c.bookies) {
                    k.http("PUT", "/api/v1/bookie/gc", "{}");
                }
            }
            long sumBefore = bytesBefore.values().stream().mapToLong(Long::longValue).sum();
            long sumAfter = bytesAfter.values().stream().mapToLong(Long::longValue).sum();
            StringBuilder gc = new StringBuilder();
            for (Bookie k : c.bookies) {
                if (!k.isJava()) {
                    Matcher m = Pattern.compile("(?m)^bookie_gc_RECLAIMED_(DELETION|COMPACTION)_SPACE_BYTES\\S*\\s+(\\S+)")
                            .matcher(k.http("GET", "/metrics", null).body());
                    gc.append(" ").append(k.name).append(":");
                    while (m.find()) {
                        gc.append(" ").append(m.group(1).toLowerCase()).append(" ").append(m.group(2));
                    }
                }
            }
            StringBuilder left = new StringBuilder();
            for (Bookie k : c.bookies) {
                left.append(" ").append(k.name).append(" ").append(entryLogs(k));
            }
            Cluster.log(what + ": entry logs left after the GC:" + left);
            Cluster.log(what + ": forced GC: no bookie serves the " + deleted.size() + " deleted ledgers; entry-log bytes "
                    + bytesBefore + " -> " + bytesAfter + " (" + sumBefore + " -> " + sumAfter + " B, "
                    + (sumBefore - sumAfter) + " B reclaimed) in " + (System.nanoTime() - tg) / 1_000_000 + " ms"
                    + (gc.length() > 0 ? "; reclaimed (metrics):" + gc : ""));
            c.assertHealthy();
            Cluster.log(what + ": P04 retention + GC done in " + (System.nanoTime() - t0) / 1_000_000 + " ms");
        }
    }
}
