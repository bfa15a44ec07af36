package dev.rustbookie.interop.pulsar;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import org.HdrHistogram.Histogram;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;

/**
 * The Pulsar client side of P05 (tag "pulsar-bench"): producer latency while a tailing consumer
 * and a catch-up consumer read the same topic. Each mode runs in its own JVM (the catch-up
 * reader is another application than the producers: its allocations must not pause their
 * clock). Modes, each ending with one line "result key=value ..." that the test parses:
 *
 * <pre>
 * fill SERVICE_URL TOPIC COUNT SIZE MAX_BATCH
 *   The backlog: one producer "fill" sends COUNT messages of SIZE bytes flat out (phase 0,
 *   sequence 0..COUNT-1), batching on with at most MAX_BATCH messages an entry (1 ms, 128 KiB:
 *   the client's defaults otherwise; MAX_BATCH 1 = batching off).
 * live SERVICE_URL TOPIC SYNC_DIR RATE SECONDS SIZE PRODUCERS BATCHING WARMUP_SECONDS
 *   First a warm-up of WARMUP_SECONDS at RATE on TOPIC-warmup (own producers and consumer: the
 *   JIT of this JVM and of the freshly restarted broker, not the measured topic). Then a tailing
 *   Exclusive consumer on subscription "tail" (started at Latest) and PRODUCERS producers
 *   "live-P" (BATCHING: the client's default batching, 1 ms / 1000 messages / 128 KiB, or none).
 *   Writes SYNC_DIR/live.ready, waits for SYNC_DIR/go, then sends RATE * SECONDS messages open
 *   loop: message i is due at t0 + i / RATE (producer i mod PRODUCERS), is sent at that time or
 *   as soon as the sender thread gets there, and its latency is counted from the due time (a
 *   stalled send delays the later ones, whose latency then includes the stall: no coordinated
 *   omission). The due time (this JVM's nanoTime) is in the payload: the tailing consumer's
 *   end-to-end latency is receipt minus due time. SYNC_DIR/caughtup (written by the catch-up
 *   driver) splits the producer latencies into "during catch-up" (due before the file was seen,
 *   polled every 20 ms) and after.
 * catchup SERVICE_URL TOPIC SYNC_DIR BACKLOG LIVE SIZE PRODUCERS
 *   Subscribes an Exclusive consumer, paused (no permits: the broker reads nothing yet), to the
 *   existing subscription "catchup", writes SYNC_DIR/catchup.ready, waits for SYNC_DIR/go, then
 *   resumes it and reads flat out (default receiver queue, cumulative acks every 1000): the
 *   BACKLOG phase-0 messages in sequence order (then SYNC_DIR/caughtup), then the LIVE phase-1
 *   messages, each once, each producer's in order; stops when all came or after 60 s without a
 *   message. Catch-up time: from go to the last backlog message.
 * </pre>
 *
 * Payload (SIZE >= 40 bytes): sequence (long), phase (int), producer (int), due nanoTime (long,
 * 0 in phase 0), bytes (seq * 31 + i), the sequence again in the last 8 bytes. Latencies are
 * recorded in microseconds into HdrHistograms (3 significant digits).
 */
public final class LatencyDriver {
    private LatencyDriver() {}

    static final int MIN_SIZE = 40;

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "fill" -> fill(args[1], args[2], Long.parseLong(args[3]), Integer.parseInt(args[4]),
                    Integer.parseInt(args[5]));
            case "live" -> live(args[1], args[2], Paths.get(args[3]), Integer.parseInt(args[4]), Integer.parseInt(args[5]),
                    Integer.parseInt(args[6]), Integer.parseInt(args[7]), Boolean.parseBoolean(args[8]),
                    Integer.parseInt(args[9]));
            case "catchup" -> catchup(args[1], args[2], Paths.get(args[3]), Long.parseLong(args[4]),
                    Long.parseLong(args[5]), Integer.parseInt(args[6]), Integer.parseInt(args[7]));
            default -> throw new IllegalArgumentException("unknown mode: " + Arrays.toString(args));
        }
        System.exit(0);
    }

    // ---- payload ----

    static byte[] payload(long seq, int phase, int producer, long dueNanos, int size) {
        byte[] b = new byte[size];
        for (int i = 24; i < size - 8; i++) {
            b[i] = (byte) (seq * 31 + i);
        }
        ByteBuffer bb = ByteBuffer.wrap(b);
        bb.putLong(0, seq);
        bb.putInt(8, phase);
        bb.putInt(12, producer);
        bb.putLong(16, dueNanos);
        bb.putLong(size - 8, seq);
        return b;
    }

    /** A payload's header; ok = the size, the trailing sequence and a middle byte match. */
    record Parsed(long seq, int phase, int producer, long dueNanos, boolean ok) {}

    static Parsed parse(byte[] d, int size) {
        if (d.length != size || size < MIN_SIZE) {
            return new Parsed(-1, -1, -1, 0, false);
        }
        ByteBuffer bb = ByteBuffer.wrap(d);
        long seq = bb.getLong(0);
        int mid = 24 + (size - 32) / 2;
        boolean ok = bb.getLong(size - 8) == seq && d[mid] == (byte) (seq * 31 + mid);
        return new Parsed(seq, bb.getInt(8), bb.getInt(12), bb.getLong(16), ok);
    }

    // ---- plumbing ----

    static PulsarClient client(String url) throws Exception {
        return PulsarDriver.client(url);
    }

    static void awaitFile(Path f, long timeoutSeconds) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutSeconds);
        while (!Files.exists(f)) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException(f + " did not appear within " + timeoutSeconds + " s");
            }
            Thread.sleep(2);
        }
    }

    static void touch(Path f, String content) throws Exception {
        Path tmp = f.resolveSibling(f.getFileName() + ".tmp");
        Files.writeString(tmp, content, StandardCharsets.UTF_8);
        Files.move(tmp, f, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
    }

    static String pct(Histogram h, String prefix) {
        if (h.getTotalCount() == 0) {
            return prefix + "n=0 " + prefix + "p50_us=-1 " + prefix + "p99_us=-1 " + prefix + "p999_us=-1 " + prefix + "max_us=-1";
        }
        return prefix + "n=" + h.getTotalCount()
                + " " + prefix + "p50_us=" + h.getValueAtPercentile(50)
                + " " + prefix + "p99_us=" + h.getValueAtPercentile(99)
                + " " + prefix + "p999_us=" + h.getValueAtPercentile(99.9)
                + " " + prefix + "max_us=" + h.getMaxValue();
    }

    static void distribution(String what, Histogram h) {
        System.out.println("---- " + what + " (ms)");
        if (h.getTotalCount() > 0) {
            h.outputPercentileDistribution(System.out, 5, 1000.0);
        }
        System.out.flush();
    }

    // ---- fill ----

    static void fill(String url, String topic, long count, int size, int maxBatch) throws Exception {
        if (size < MIN_SIZE || count < 1 || maxBatch < 1) {
            throw new IllegalArgumentException("fill: COUNT >= 1, SIZE >= " + MIN_SIZE + ", MAX_BATCH >= 1");
        }
        try (PulsarClient client = client(url)) {
            Producer<byte[]> p = client.newProducer()
                    .topic(topic)
                    .producerName("fill")
                    .enableBatching(maxBatch > 1)
                    .batchingMaxMessages(maxBatch)
                    .batchingMaxBytes(128 * 1024)
                    .batchingMaxPublishDelay(1, TimeUnit.MILLISECONDS)
                    .blockIfQueueFull(true)
                    .create();
            AtomicLong acked = new AtomicLong();
            AtomicLong failed = new AtomicLong();
            AtomicReference<Throwable> first = new AtomicReference<>();
            long t0 = System.nanoTime();
            for (long seq = 0; seq < count; seq++) {
                p.newMessage().value(payload(seq, 0, 0, 0, size)).sendAsync().whenComplete((id, ex) -> {
                    if (ex != null) {
                        failed.incrementAndGet();
                        first.compareAndSet(null, ex);
                    } else {
                        acked.incrementAndGet();
                    }
                });
                if ((seq + 1) % Math.max(1, count / 10) == 0) {
                    System.out.println("fill: " + (seq + 1) + " sent, " + acked.get() + " acked after "
                            + (System.nanoTime() - t0) / 1_000_000 + " ms");
                }
            }
            p.flush();
            long lastDone = -1;
            long lastProgress = System.nanoTime();
            while (acked.get() + failed.get() < count) {
                long done = acked.get() + failed.get();
                if (done != lastDone) {
                    lastDone = done;
                    lastProgress = System.nanoTime();
                } else if (System.nanoTime() - lastProgress > TimeUnit.SECONDS.toNanos(120)) {
                    break;
                }
                Thread.sleep(10);
            }
            long ms = (System.nanoTime() - t0) / 1_000_000;
            p.close();
            if (first.get() != null) {
                System.out.println("first failure: " + first.get());
            }
            System.out.printf("result acked=%d failed=%d ms=%d mb_s=%.1f%n", acked.get(), failed.get(), ms,
                    acked.get() * (double) size / (1 << 20) / Math.max(1e-3, ms / 1000.0));
        }
    }

    // ---- live: open-loop producers and the tailing consumer ----

    /** The tailing consumer's checks and its end-to-end histogram (one thread writes them). */
    static final class Tail {
        final BitSet seen = new BitSet();
        final long[] last;
        final Histogram e2e = new Histogram(3);
        volatile long distinct;
        long dup;
        long outOfOrder;
        long bad;
        long stray;
        volatile long received;
        volatile long lastReceipt = System.nanoTime();

        Tail(int producers) {
            last = new long[producers];
            Arrays.fill(last, -1);
        }
    }

    static List<Producer<byte[]>> producers(PulsarClient client, String topic, String prefix, int count,
                                            boolean batching) throws Exception {
        List<Producer<byte[]>> ps = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            ps.add(client.newProducer()
                    .topic(topic)
                    .producerName(prefix + i)
                    .enableBatching(batching)
                    .batchingMaxPublishDelay(1, TimeUnit.MILLISECONDS)
                    .batchingMaxMessages(1000)
                    .batchingMaxBytes(128 * 1024)
                    .sendTimeout(30, TimeUnit.SECONDS)
                    .blockIfQueueFull(true)
                    .create());
        }
        return ps;
    }

    /** An open-loop run's outcome: latUs[i] in µs (-1: failed, -2: not completed). */
    record SendRun(int[] latUs, long t0, long end, long maxLagNs, long completed, long failed, Throwable firstFailure) {
        long due(int i, int rate) {
            return t0 + (long) i * 1_000_000_000L / rate;
        }
    }

    /**
     * Sends N messages at RATE msg/s in all, message i due at t0 + i / RATE on producer i mod
     * |ps|, and waits (at most 300 s) for them to complete; latency from the due time.
     */
    static SendRun openLoop(List<Producer<byte[]>> ps, int rate, int n, int phase, int size) throws InterruptedException {
        int[] latUs = new int[n];
        Arrays.fill(latUs, -2);
        CountDownLatch done = new CountDownLatch(n);
        AtomicLong failed = new AtomicLong();
        AtomicReference<Throwable> firstFailure = new AtomicReference<>();
        long t0 = System.nanoTime();
        long maxLag = 0;
        for (int i = 0; i < n; i++) {
            final int idx = i;
            final long due = t0 + (long) i * 1_000_000_000L / rate;
            long now;
            while ((now = System.nanoTime()) < due) {
                LockSupport.parkNanos(due - now);
            }
            maxLag = Math.max(maxLag, now - due);
            int pi = i % ps.size();
            ps.get(pi).newMessage().value(payload(i, phase, pi, due, size)).sendAsync().whenComplete((id, ex) -> {
                long at = System.nanoTime();
                if (ex != null) {
                    latUs[idx] = -1;
                    failed.incrementAndGet();
                    firstFailure.compareAndSet(null, ex);
                } else {
                    latUs[idx] = (int) Math.min(Integer.MAX_VALUE, Math.max(0, (at - due) / 1000));
                }
                done.countDown();
            });
        }
        long end = System.nanoTime();
        done.await(300, TimeUnit.SECONDS);
        return new SendRun(latUs, t0, end, maxLag, n - done.getCount(), failed.get(), firstFailure.get());
    }

    /**
     * The warm-up: SECONDS at RATE on TOPIC-warmup (its own producers and a draining consumer),
     * so that the JIT has compiled this JVM's and the restarted broker's publish and dispatch
     * paths before the measurement; the measured topic is not touched.
     */
    static void warmUp(PulsarClient client, String topic, int rate, int seconds, int size, int producers,
                       boolean batching) throws Exception {
        String warm = topic + "-warmup";
        Consumer<byte[]> wc = client.newConsumer()
                .topic(warm)
                .subscriptionName("warmup")
                .subscriptionInitialPosition(SubscriptionInitialPosition.Latest)
                .subscribe();
        List<Producer<byte[]>> ps = producers(client, warm, "warmup-", producers, batching);
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong got = new AtomicLong();
        Thread drain = new Thread(() -> {
            try {
                while (!stop.get()) {
                    Message<byte[]> m = wc.receive(100, TimeUnit.MILLISECONDS);
                    if (m != null) {
                        got.incrementAndGet();
                        wc.acknowledgeAsync(m);
                    }
                }
            } catch (Exception e) {
                System.out.println("warm-up consumer: " + e);
            }
        }, "warmup-drain");
        drain.start();
        SendRun r = openLoop(ps, rate, rate * seconds, 2, size);
        stop.set(true);
        drain.join(10_000);
        Histogram h = new Histogram(3);
        for (int v : r.latUs) {
            if (v >= 0) {
                h.recordValue(v);
            }
        }
        System.out.println("warm-up on " + warm + ": " + r.completed + " sent (" + r.failed + " failed), "
                + got.get() + " received; " + pct(h, ""));
        for (Producer<byte[]> p : ps) {
            p.close();
        }
        wc.close();
    }

    static void live(String url, String topic, Path sync, int rate, int seconds, int size, int producers,
                     boolean batching, int warmupSeconds) throws Exception {
        long total = (long) rate * seconds;
        if (size < MIN_SIZE || rate < 1 || seconds < 1 || producers < 1 || warmupSeconds < 0 || total > 50_000_000L
                || (long) rate * warmupSeconds > 50_000_000L) {
            throw new IllegalArgumentException("live: RATE >= 1, SECONDS >= 1, RATE * SECONDS <= 50,000,000, SIZE >= "
                    + MIN_SIZE + ", PRODUCERS >= 1, WARMUP_SECONDS >= 0");
        }
        final int n = (int) total;
        try (PulsarClient client = client(url)) {
            if (warmupSeconds > 0) {
                warmUp(client, topic, rate, warmupSeconds, size, producers, batching);
            }
            Consumer<byte[]> tailConsumer = client.newConsumer()
                    .topic(topic)
                    .subscriptionName("tail")
                    .subscriptionType(SubscriptionType.Exclusive)
                    .subscriptionInitialPosition(SubscriptionInitialPosition.Latest)
                    .subscribe();
            List<Producer<byte[]>> ps = producers(client, topic, "live-", producers, batching);
            Tail tail = new Tail(producers);
            AtomicReference<Throwable> tailError = new AtomicReference<>();
            AtomicBoolean stop = new AtomicBoolean();
            Thread tailThread = new Thread(() -> {
                try {
                    while (!stop.get()) {
                        Message<byte[]> m = tailConsumer.receive(100, TimeUnit.MILLISECONDS);
                        if (m == null) {
                            continue;
                        }
                        long now = System.nanoTime();
                        Parsed pm = parse(m.getData(), size);
                        tail.lastReceipt = now;
                        tail.received++;
                        if (!pm.ok || pm.seq < 0 || pm.seq >= n || pm.producer != (int) (pm.seq % producers)) {
                            tail.bad++;
                        } else if (pm.phase != 1) {
                            tail.stray++;
                        } else {
                            if (tail.seen.get((int) pm.seq)) {
                                tail.dup++;
                            } else {
                                tail.seen.set((int) pm.seq);
                                tail.distinct++;
                                tail.e2e.recordValue(Math.max(0, (now - pm.dueNanos) / 1000));
                            }
                            if (pm.seq <= tail.last[pm.producer]) {
                                tail.outOfOrder++;
                            }
                            tail.last[pm.producer] = pm.seq;
                        }
                        tailConsumer.acknowledgeAsync(m);
                    }
                } catch (Throwable e) {
                    tailError.set(e);
                }
            }, "tail");
            tailThread.start();

            AtomicLong caughtUpAt = new AtomicLong(Long.MAX_VALUE);
            Thread watcher = new Thread(() -> {
                Path f = sync.resolve("caughtup");
                while (!stop.get()) {
                    if (Files.exists(f)) {
                        caughtUpAt.set(System.nanoTime());
                        return;
                    }
                    try {
                        Thread.sleep(20);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }, "caughtup-watcher");
            watcher.setDaemon(true);
            watcher.start();

            touch(sync.resolve("live.ready"), "ready\n");
            awaitFile(sync.resolve("go"), 600);

            SendRun r = openLoop(ps, rate, n, 1, size);
            // the tailing consumer: every message, or 30 s without one
            while (tail.distinct < n && tailError.get() == null
                    && System.nanoTime() - tail.lastReceipt < TimeUnit.SECONDS.toNanos(30)) {
                Thread.sleep(10);
            }
            stop.set(true);
            tailThread.join(10_000);
            long caught = caughtUpAt.get();

            Histogram all = new Histogram(3);
            Histogram during = new Histogram(3);
            long unfinished = 0;
            for (int i = 0; i < n; i++) {
                int v = r.latUs[i];
                if (v < 0) {
                    unfinished += v == -2 ? 1 : 0;
                    continue;
                }
                all.recordValue(v);
                if (r.due(i, rate) < caught) {
                    during.recordValue(v);
                }
            }
            double window = Math.max(1, r.end - r.t0);
            double overlap = caught == Long.MAX_VALUE ? 1.0 : Math.min(1.0, Math.max(0, caught - r.t0) / window);
            distribution("producer latency, all sends", all);
            distribution("producer latency, sends due during the catch-up", during);
            distribution("tailing consumer end-to-end latency", tail.e2e);
            if (r.firstFailure != null) {
                System.out.println("first send failure: " + r.firstFailure);
            }
            if (tailError.get() != null) {
                System.out.println("tailing consumer error: " + tailError.get());
            }
            for (Producer<byte[]> p : ps) {
                p.close();
            }
            tailConsumer.close();
            System.out.println("result sent=" + n + " completed=" + r.completed + " failed=" + r.failed
                    + " unfinished=" + unfinished
                    + " send_window_ms=" + (r.end - r.t0) / 1_000_000 + " max_sender_lag_us=" + r.maxLagNs / 1000
                    + " " + pct(all, "") + " " + pct(during, "during_")
                    + String.format(" overlap=%.3f", overlap)
                    + " tail_received=" + tail.received + " tail_distinct=" + tail.distinct + " tail_dup=" + tail.dup
                    + " tail_out_of_order=" + tail.outOfOrder + " tail_bad=" + tail.bad + " tail_stray=" + tail.stray
                    + " tail_error=" + (tailError.get() == null ? 0 : 1)
                    + " " + pct(tail.e2e, "e2e_"));
        }
    }

    // ---- catch-up ----

    static void catchup(String url, String topic, Path sync, long backlog, long live, int size, int producers)
            throws Exception {
        if (size < MIN_SIZE || backlog < 1 || live < 0 || live > Integer.MAX_VALUE || producers < 1) {
            throw new IllegalArgumentException("catchup: BACKLOG >= 1, 0 <= LIVE <= 2^31-1, SIZE >= " + MIN_SIZE);
        }
        try (PulsarClient client = client(url)) {
            // paused: no permits sent to the broker, so nothing is read before "go"
            Consumer<byte[]> c = client.newConsumer()
                    .topic(topic)
                    .subscriptionName("catchup")
                    .subscriptionType(SubscriptionType.Exclusive)
                    .startPaused(true)
                    .subscribe();
            touch(sync.resolve("catchup.ready"), "ready\n");
            awaitFile(sync.resolve("go"), 600);
            long tGo = System.nanoTime();
            c.resume();
            long backlogGot = 0;
            long backlogOutOfOrder = 0;
            long liveBeforeBacklogEnd = 0;
            BitSet seen = new BitSet();
            long[] last = new long[producers];
            Arrays.fill(last, -1);
            long liveDistinct = 0;
            long liveDup = 0;
            long liveOutOfOrder = 0;
            long bad = 0;
            long received = 0;
            long tFirst = -1;
            long tCaught = -1;
            long lastReceipt = System.nanoTime();
            Message<byte[]> lastMsg = null;
            while (backlogGot < backlog || liveDistinct < live) {
                Message<byte[]> m = c.receive(1, TimeUnit.SECONDS);
                long now = System.nanoTime();
                if (m == null) {
                    if (now - lastReceipt > TimeUnit.SECONDS.toNanos(60)) {
                        break;
                    }
                    continue;
                }
                lastReceipt = now;
                if (tFirst < 0) {
                    tFirst = now;
                }
                received++;
                lastMsg = m;
                Parsed pm = parse(m.getData(), size);
                if (!pm.ok) {
                    bad++;
                } else if (pm.phase == 0) {
                    if (pm.seq != backlogGot || liveDistinct > 0) {
                        backlogOutOfOrder++;
                    }
                    backlogGot++;
                    if (backlogGot == backlog) {
                        tCaught = now;
                        touch(sync.resolve("caughtup"), "caught up " + (tCaught - tGo) / 1_000_000 + " ms after go\n");
                    }
                } else if (pm.phase == 1 && pm.seq >= 0 && pm.seq < live && pm.producer == (int) (pm.seq % producers)) {
                    if (backlogGot < backlog) {
                        liveBeforeBacklogEnd++;
                    }
                    if (seen.get((int) pm.seq)) {
                        liveDup++;
                    } else {
                        seen.set((int) pm.seq);
                        liveDistinct++;
                    }
                    if (pm.seq <= last[pm.producer]) {
                        liveOutOfOrder++;
                    }
                    last[pm.producer] = pm.seq;
                } else {
                    bad++;
                }
                if (received % 1000 == 0) {
                    c.acknowledgeCumulativeAsync(m);
                }
            }
            if (lastMsg != null) {
                c.acknowledgeCumulative(lastMsg);
            }
            c.close();
            double catchupS = tCaught < 0 ? -1 : (tCaught - tGo) / 1e9;
            System.out.printf("result received=%d backlog=%d backlog_received=%d backlog_out_of_order=%d live=%d "
                            + "live_distinct=%d live_dup=%d live_out_of_order=%d live_before_backlog_end=%d bad=%d "
                            + "first_ms=%d catchup_ms=%d catchup_msg_s=%.0f%n",
                    received, backlog, backlogGot, backlogOutOfOrder, live, liveDistinct, liveDup, liveOutOfOrder,
                    liveBeforeBacklogEnd, bad, tFirst < 0 ? -1 : (tFirst - tGo) / 1_000_000,
                    tCaught < 0 ? -1 : (tCaught - tGo) / 1_000_000, catchupS > 0 ? backlog / catchupS : 0.0);
        }
    }
}
