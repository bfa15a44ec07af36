package dev.rustbookie.interop.pulsar;

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pulsar.client.api.BatcherBuilder;
import org.apache.pulsar.client.api.CompressionType;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;

/**
 * The Pulsar client side of tier "pulsar", in its own JVM (the Pulsar 4.0.8 client next to the
 * broker's classpath; see ../pom.xml for why not in the test JVM). Modes:
 *
 * <pre>
 * produce SERVICE_URL TOPIC OUT_FILE COUNT SEED MAX_SIZE
 *   Two producers on TOPIC, "p-batch" (batching: up to 100 messages / 64 KiB / 5 ms) and
 *   "p-single" (no batching), COUNT messages each, sent alternately with explicit sequence ids
 *   0..COUNT-1 (the broker's deduplication key with the producer name), sizes 16 B..MAX_SIZE.
 *   sendTimeout 0: the client keeps pending messages across broker restarts and re-sends them.
 *   One line per acknowledged message, in acknowledgement order, flushed as it comes:
 *     ack PRODUCER SEQ MESSAGE_ID SIZE SHA256
 *   and "fail PRODUCER SEQ EXCEPTION" for a send that failed; "done" at the end.
 * consume SERVICE_URL TOPIC OUT_FILE SUBSCRIPTION TYPE EXPECTED SEED CONSUMERS IDLE_SECONDS
 *   CONSUMERS consumers (TYPE Exclusive or Shared) from the earliest message, acknowledging each;
 *   stops IDLE_SECONDS after the last message once EXPECTED were received (or 60 s without any
 *   message). One line per message:  msg CONSUMER PRODUCER SEQ MESSAGE_ID SIZE SHA256 OK|BAD
 *   (OK: the bytes are the ones the producer generated for that producer, sequence id and size;
 *   the size itself is checked against the producer's acks by the test).
 * bench-produce SERVICE_URL TOPIC COUNT SIZE
 *   One producer, batching off (one entry per message), COUNT messages of SIZE bytes (see
 *   benchPayload: the sequence number 0..COUNT-1 at both ends); prints "produced COUNT in MS ms".
 * bench-consume SERVICE_URL TOPIC SUBSCRIPTION COUNT SIZE
 *   One Exclusive consumer on SUBSCRIPTION (default receiver queue), cumulative acks every 1000;
 *   checks every message (in order, size, the sequence number at both ends, a byte in the middle)
 *   and prints "consumed COUNT first_to_last_ns NS bad BAD first_ms T1 last_ms T2 cpu_ms CPU" (clock:
 *   first receive to last; T1, T2 wall clock in ms since the epoch; CPU this JVM used between).
 * produce-mix SERVICE_URL OUT_FILE SEED COUNT KEYS TOPICS CHUNK_TOPIC CHUNKED
 *   On each topic of TOPICS (comma-separated) two LZ4-compressing producers, "lz4-batch"
 *   (batching, key-based batches: up to 100 messages / 64 KiB / 5 ms) and "lz4-single" (no
 *   batching), COUNT messages each, 16 B..16 KiB, keys k0..k(KEYS-1), explicit sequence ids.
 *   On CHUNK_TOPIC ("-": none) one producer "chunked" (chunking on, batching off, LZ4, chunks of
 *   at most 1.5 MiB) sends CHUNKED messages of 1 MiB + 1 B .. 7 MiB (every third above the
 *   broker's 5 MiB maxMessageSize: possible only as chunks). Payload identity: payload(SEED, P, SEQ, SIZE) with P the
 *   message property "p" (2 * topic index + producer, 100 for "chunked"). One line per ack:
 *     ack TOPIC PRODUCER P SEQ KEY MESSAGE_ID SIZE SHA256
 *   "fail ..." for a failed send; "done" at the end.
 * consume-subs SERVICE_URL OUT_FILE SEED EXPECTED IDLE_SECONDS SPEC...
 *   SPEC = TOPIC,SUBSCRIPTION,TYPE,CONSUMERS,QUEUE: CONSUMERS consumers of that subscription
 *   (receiver queue QUEUE), all subscribed from the earliest message before "ready" is written
 *   (so producers may start after it), acknowledging each message. Stops IDLE_SECONDS after the
 *   last message once EXPECTED messages were received over all subscriptions (or after 120 s
 *   without any). One line per message, in receive order per consumer:
 *     msg TOPIC SUBSCRIPTION CONSUMER PRODUCER P SEQ KEY PARTITION MESSAGE_ID SIZE SHA256 OK|BAD
 * </pre>
 */
public final class PulsarDriver {
    private PulsarDriver() {}

    static final String[] PRODUCERS = {"p-batch", "p-single"};

    static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
        z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
        return z ^ (z >>> 31);
    }

    static int size(long seed, int producer, long seq, int max) {
        long h = mix(seed * 31 + producer * 1_000_003L + seq);
        // mostly small messages, a few large ones
        int bound = (h & 7) == 0 ? max : Math.min(max, 1024);
        return 16 + (int) Long.remainderUnsigned(h >>> 3, bound - 15);
    }

    /** A function of (seed, producer, seq, size): header (producer, seq, size), then splitmix64. */
    static byte[] payload(long seed, int producer, long seq, int size) {
        byte[] b = new byte[size];
        ByteBuffer bb = ByteBuffer.wrap(b);
        long state = mix(seed + mix(producer + 1) + mix(seq + 0x51ed27L));
        for (int i = 0; i < size; i++) {
            if ((i & 7) == 0) {
                state += 0x9e3779b97f4a7c15L;
            }
            b[i] = (byte) (mix(state) >>> ((i & 7) * 8));
        }
        bb.putInt(0, producer);
        bb.putInt(4, (int) seq);
        bb.putInt(8, size);
        return b;
    }

    static String sha256(byte[] b) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static String id(MessageId m) {
        return m.toString().replace(' ', '_');
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "produce" -> produce(args[1], args[2], Paths.get(args[3]), Integer.parseInt(args[4]),
                    Long.parseLong(args[5]), Integer.parseInt(args[6]));
            case "consume" -> consume(args[1], args[2], Paths.get(args[3]), args[4], SubscriptionType.valueOf(args[5]),
                    Integer.parseInt(args[6]), Long.parseLong(args[7]), Integer.parseInt(args[8]),
                    Integer.parseInt(args[9]));
            case "bench-produce" -> benchProduce(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]));
            case "bench-consume" -> benchConsume(args[1], args[2], args[3], Integer.parseInt(args[4]),
                    Integer.parseInt(args[5]));
            case "produce-mix" -> produceMix(args[1], Paths.get(args[2]), Long.parseLong(args[3]),
                    Integer.parseInt(args[4]), Integer.parseInt(args[5]), args[6], args[7], Integer.parseInt(args[8]));
            case "consume-subs" -> consumeSubs(args[1], Paths.get(args[2]), Long.parseLong(args[3]),
                    Long.parseLong(args[4]), Integer.parseInt(args[5]), Arrays.copyOfRange(args, 6, args.length));
            default -> throw new IllegalArgumentException(Arrays.toString(args));
        }
        System.exit(0);
    }

    static PulsarClient client(String url) throws Exception {
        return PulsarClient.builder()
                .serviceUrl(url)
                .operationTimeout(60, TimeUnit.SECONDS)
                .connectionTimeout(5, TimeUnit.SECONDS)
                .ioThreads(1)
                .listenerThreads(1)
                .startingBackoffInterval(100, TimeUnit.MILLISECONDS)
                .maxBackoffInterval(2, TimeUnit.SECONDS)
                .build();
    }

    static void produce(String url, String topic, Path out, int count, long seed, int max) throws Exception {
        try (PulsarClient client = client(url); BufferedWriter w = Files.newBufferedWriter(out, StandardCharsets.UTF_8)) {
            List<Producer<byte[]>> ps = new ArrayList<>();
            for (String name : PRODUCERS) {
                boolean batch = name.equals("p-batch");
                ps.add(client.newProducer()
                        .topic(topic)
                        .producerName(name)
                        .enableBatching(batch)
                        .batchingMaxMessages(100)
                        .batchingMaxBytes(64 * 1024)
                        .batchingMaxPublishDelay(5, TimeUnit.MILLISECONDS)
                        .sendTimeout(0, TimeUnit.SECONDS)
                        .maxPendingMessages(500)
                        .blockIfQueueFull(true)
                        .create());
            }
            AtomicLong acked = new AtomicLong();
            AtomicReference<Throwable> failed = new AtomicReference<>();
            List<CompletableFuture<?>> all = new ArrayList<>();
            long t0 = System.nanoTime();
            for (long seq = 0; seq < count; seq++) {
                for (int p = 0; p < ps.size(); p++) {
                    final int pi = p;
                    final long s = seq;
                    int sz = size(seed, p, seq, max);
                    byte[] data = payload(seed, p, seq, sz);
                    String sha = sha256(data);
                    all.add(ps.get(p).newMessage().sequenceId(seq).key(PRODUCERS[p] + "-" + seq)
                            .property("p", Integer.toString(p)).property("seq", Long.toString(seq))
                            .value(data).sendAsync()
                            .whenComplete((mid, ex) -> {
                                synchronized (w) {
                                    try {
                                        if (ex != null) {
                                            failed.compareAndSet(null, ex);
                                            w.write("fail " + PRODUCERS[pi] + " " + s + " " + ex.toString().replace('\n', ' ') + "\n");
                                        } else {
                                            acked.incrementAndGet();
                                            w.write("ack " + PRODUCERS[pi] + " " + s + " " + id(mid) + " " + sz + " " + sha + "\n");
                                        }
                                        w.flush();
                                    } catch (IOException e) {
                                        failed.compareAndSet(null, e);
                                    }
                                }
                            }));
                }
            }
            for (CompletableFuture<?> f : all) {
                try {
                    f.get(10, TimeUnit.MINUTES);
                } catch (Exception e) {
                    // recorded by whenComplete
                }
            }
            for (Producer<byte[]> p : ps) {
                p.close();
            }
            synchronized (w) {
                w.write("done " + acked.get() + " acked in " + (System.nanoTime() - t0) / 1_000_000 + " ms\n");
                w.flush();
            }
            if (failed.get() != null) {
                failed.get().printStackTrace();
                System.exit(2);
            }
        }
    }

    static void consume(String url, String topic, Path out, String sub, SubscriptionType type, int expected, long seed,
                        int consumers, int idleSeconds) throws Exception {
        try (PulsarClient client = client(url); BufferedWriter w = Files.newBufferedWriter(out, StandardCharsets.UTF_8)) {
            List<Consumer<byte[]>> cs = new ArrayList<>();
            for (int i = 0; i < consumers; i++) {
                cs.add(client.newConsumer()
                        .topic(topic)
                        .subscriptionName(sub)
                        .subscriptionType(type)
                        .consumerName("c" + i)
                        .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                        .receiverQueueSize(200)
                        .subscribe());
            }
            AtomicLong received = new AtomicLong();
            AtomicLong last = new AtomicLong(System.nanoTime());
            List<Thread> threads = new ArrayList<>();
            for (int i = 0; i < consumers; i++) {
                final int ci = i;
                Thread t = new Thread(() -> {
                    Consumer<byte[]> c = cs.get(ci);
                    try {
                        while (true) {
                            long idle = (System.nanoTime() - last.get()) / 1_000_000_000L;
                            if (received.get() >= expected ? idle >= idleSeconds : idle >= 60) {
                                return;
                            }
                            Message<byte[]> m = c.receive(200, TimeUnit.MILLISECONDS);
                            if (m == null) {
                                continue;
                            }
                            last.set(System.nanoTime());
                            received.incrementAndGet();
                            byte[] data = m.getValue();
                            String prod = m.getProducerName();
                            int p = Integer.parseInt(m.getProperty("p"));
                            long seq = Long.parseLong(m.getProperty("seq"));
                            boolean ok = m.getSequenceId() == seq && PRODUCERS[p].equals(prod)
                                    && Arrays.equals(data, payload(seed, p, seq, data.length));
                            synchronized (w) {
                                w.write("msg c" + ci + " " + prod + " " + seq + " " + id(m.getMessageId()) + " " + data.length
                                        + " " + sha256(data) + " " + (ok ? "OK" : "BAD") + "\n");
                            }
                            c.acknowledge(m);
                        }
                    } catch (Exception e) {
                        synchronized (w) {
                            try {
                                w.write("error c" + ci + " " + e.toString().replace('\n', ' ') + "\n");
                            } catch (IOException ignored) {
                                // nothing to do
                            }
                        }
                        e.printStackTrace();
                    }
                }, "consumer-" + i);
                t.start();
                threads.add(t);
            }
            for (Thread t : threads) {
                t.join();
            }
            synchronized (w) {
                w.write("done " + received.get() + " received\n");
            }
            for (Consumer<byte[]> c : cs) {
                c.close();
            }
        }
    }

    /** SIZE bytes: the sequence number at offset 0 and at the end, (seq * 31 + i) elsewhere. */
    static byte[] benchPayload(long seq, int size) {
        byte[] b = new byte[size];
        for (int i = 0; i < size; i++) {
            b[i] = (byte) (seq * 31 + i);
        }
        ByteBuffer bb = ByteBuffer.wrap(b);
        bb.putLong(0, seq);
        bb.putLong(size - 8, seq);
        return b;
    }

    static void benchProduce(String url, String topic, int count, int size) throws Exception {
        try (PulsarClient client = client(url)) {
            Producer<byte[]> p = client.newProducer()
                    .topic(topic)
                    .enableBatching(false)
                    .sendTimeout(0, TimeUnit.SECONDS)
                    .maxPendingMessages(1000)
                    .blockIfQueueFull(true)
                    .create();
            AtomicReference<Throwable> failed = new AtomicReference<>();
            AtomicLong acked = new AtomicLong();
            long t0 = System.nanoTime();
            CompletableFuture<?> lastF = null;
            for (long seq = 0; seq < count; seq++) {
                lastF = p.newMessage().value(benchPayload(seq, size)).sendAsync().whenComplete((mid, ex) -> {
                    if (ex != null) {
                        failed.compareAndSet(null, ex);
                    } else {
                        acked.incrementAndGet();
                    }
                });
            }
            p.flush();
            if (lastF != null) {
                try {
                    lastF.get(10, TimeUnit.MINUTES);
                } catch (Exception e) {
                    failed.compareAndSet(null, e);
                }
            }
            p.close();
            System.out.println("produced " + acked.get() + " in " + (System.nanoTime() - t0) / 1_000_000 + " ms");
            if (failed.get() != null || acked.get() != count) {
                if (failed.get() != null) {
                    failed.get().printStackTrace();
                }
                System.exit(2);
            }
        }
    }

    /** This JVM's CPU time so far (all threads), in ns. */
    static long processCpuNs() {
        return ((com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory
                .getOperatingSystemMXBean()).getProcessCpuTime();
    }

    static void benchConsume(String url, String topic, String sub, int count, int size) throws Exception {
        try (PulsarClient client = client(url)) {
            Consumer<byte[]> c = client.newConsumer()
                    .topic(topic)
                    .subscriptionName(sub)
                    .subscriptionType(SubscriptionType.Exclusive)
                    .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                    .subscribe();
            long first = 0;
            long last = 0;
            long firstMs = 0;
            long firstCpuNs = 0;
            long bad = 0;
            int got = 0;
            while (got < count) {
                Message<byte[]> m = c.receive(60, TimeUnit.SECONDS);
                if (m == null) {
                    break;
                }
                last = System.nanoTime();
                if (got == 0) {
                    first = last;
                    firstMs = System.currentTimeMillis();
                    firstCpuNs = processCpuNs();
                }
                byte[] d = m.getData();
                ByteBuffer bb = ByteBuffer.wrap(d);
                int mid = size / 2;
                if (d.length != size || bb.getLong(0) != got || bb.getLong(size - 8) != got
                        || d[mid] != (byte) (got * 31L + mid)) {
                    if (bad++ < 10) {
                        System.out.println("bad message " + got + ": size " + d.length + " seq "
                                + (d.length >= 8 ? bb.getLong(0) : -1) + " id " + m.getMessageId());
                    }
                }
                got++;
                if (got % 1000 == 0 || got == count) {
                    c.acknowledgeCumulativeAsync(m);
                }
            }
            long cpuMs = (processCpuNs() - firstCpuNs) / 1_000_000;
            long lastMs = firstMs + (last - first) / 1_000_000;
            System.out.println("consumed " + got + " first_to_last_ns " + (last - first) + " bad " + bad
                    + " first_ms " + firstMs + " last_ms " + lastMs + " cpu_ms " + cpuMs);
            c.close();
        }
    }

    // ---- produce-mix / consume-subs (P04: subscription types, compression, chunking) ----

    static final String[] MIX_PRODUCERS = {"lz4-batch", "lz4-single"};
    static final int CHUNKED_P = 100;

    static String mixProducerName(int p) {
        return p == CHUNKED_P ? "chunked" : MIX_PRODUCERS[p % 2];
    }

    static String mixKey(long seed, int p, long seq, int keys) {
        return "k" + Long.remainderUnsigned(mix(seed * 7 + p * 1_000_003L + seq + 17), keys);
    }

    /** Every third (from seq 0) above the broker's 5 MiB maxMessageSize, the others 1..5 MiB. */
    static int chunkedSize(long seed, long seq) {
        long h = mix(seed * 13 + seq);
        return seq % 3 == 0 ? (5 << 20) + 1 + (int) Long.remainderUnsigned(h, 2 << 20)
                : (1 << 20) + 1 + (int) Long.remainderUnsigned(h, 4 << 20);
    }

    static void produceMix(String url, Path out, long seed, int count, int keys, String topics, String chunkTopic,
                           int chunked) throws Exception {
        try (PulsarClient client = client(url); BufferedWriter w = Files.newBufferedWriter(out, StandardCharsets.UTF_8)) {
            record Target(String topic, int p, Producer<byte[]> producer, int count, boolean chunks) {}
            List<Target> targets = new ArrayList<>();
            String[] ts = topics.split(",");
            for (int t = 0; t < ts.length; t++) {
                for (int i = 0; i < MIX_PRODUCERS.length; i++) {
                    boolean batch = i == 0;
                    targets.add(new Target(ts[t], 2 * t + i, client.newProducer()
                            .topic(ts[t])
                            .producerName(MIX_PRODUCERS[i])
                            .compressionType(CompressionType.LZ4)
                            .enableBatching(batch)
                            .batcherBuilder(BatcherBuilder.KEY_BASED)
                            .batchingMaxMessages(100)
                            .batchingMaxBytes(64 * 1024)
                            .batchingMaxPublishDelay(5, TimeUnit.MILLISECONDS)
                            .sendTimeout(0, TimeUnit.SECONDS)
                            .maxPendingMessages(500)
                            .blockIfQueueFull(true)
                            .create(), count, false));
                }
            }
            if (!chunkTopic.equals("-") && chunked > 0) {
                targets.add(new Target(chunkTopic, CHUNKED_P, client.newProducer()
                        .topic(chunkTopic)
                        .producerName("chunked")
                        .compressionType(CompressionType.LZ4)
                        .enableBatching(false)
                        .enableChunking(true)
                        .chunkMaxMessageSize(3 << 19)
                        .sendTimeout(0, TimeUnit.SECONDS)
                        .maxPendingMessages(4)
                        .blockIfQueueFull(true)
                        .create(), chunked, true));
            }
            AtomicLong acked = new AtomicLong();
            AtomicReference<Throwable> failed = new AtomicReference<>();
            List<CompletableFuture<?>> all = new ArrayList<>();
            long t0 = System.nanoTime();
            int max = targets.stream().mapToInt(Target::count).max().orElse(0);
            for (long seq = 0; seq < max; seq++) {
                for (Target t : targets) {
                    if (seq >= t.count) {
                        continue;
                    }
                    final long s = seq;
                    int sz = t.chunks ? chunkedSize(seed, seq) : size(seed, t.p, seq, 16384);
                    byte[] data = payload(seed, t.p, seq, sz);
                    String sha = sha256(data);
                    String key = t.chunks ? "k" + (seq % 4) : mixKey(seed, t.p, seq, keys);
                    String name = mixProducerName(t.p);
                    all.add(t.producer.newMessage().sequenceId(seq).key(key)
                            .property("p", Integer.toString(t.p)).property("seq", Long.toString(seq))
                            .value(data).sendAsync()
                            .whenComplete((mid, ex) -> {
                                synchronized (w) {
                                    try {
                                        if (ex != null) {
                                            failed.compareAndSet(null, ex);
                                            w.write("fail " + t.topic + " " + name + " " + t.p + " " + s + " "
                                                    + ex.toString().replace('\n', ' ') + "\n");
                                        } else {
                                            acked.incrementAndGet();
                                            w.write("ack " + t.topic + " " + name + " " + t.p + " " + s + " " + key + " "
                                                    + id(mid) + " " + sz + " " + sha + "\n");
                                        }
                                        w.flush();
                                    } catch (IOException e) {
                                        failed.compareAndSet(null, e);
                                    }
                                }
                            }));
                }
            }
            for (CompletableFuture<?> f : all) {
                try {
                    f.get(10, TimeUnit.MINUTES);
                } catch (Exception e) {
                    // recorded by whenComplete
                }
            }
            for (Target t : targets) {
                t.producer.close();
            }
            synchronized (w) {
                w.write("done " + acked.get() + " acked in " + (System.nanoTime() - t0) / 1_000_000 + " ms\n");
                w.flush();
            }
            if (failed.get() != null) {
                failed.get().printStackTrace();
                System.exit(2);
            }
        }
    }

    static void consumeSubs(String url, Path out, long seed, long expected, int idleSeconds, String[] specs)
            throws Exception {
        try (PulsarClient client = client(url); BufferedWriter w = Files.newBufferedWriter(out, StandardCharsets.UTF_8)) {
            record Sub(String topic, String sub, String name, Consumer<byte[]> consumer) {}
            List<Sub> subs = new ArrayList<>();
            for (String spec : specs) {
                String[] f = spec.split(",");
                int n = Integer.parseInt(f[3]);
                for (int i = 0; i < n; i++) {
                    subs.add(new Sub(f[0], f[1], "c" + i, client.newConsumer()
                            .topic(f[0])
                            .subscriptionName(f[1])
                            .subscriptionType(SubscriptionType.valueOf(f[2]))
                            .consumerName(f[1] + "-c" + i)
                            .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                            .receiverQueueSize(Integer.parseInt(f[4]))
                            .subscribe()));
                }
            }
            synchronized (w) {
                w.write("ready " + subs.size() + " consumers\n");
                w.flush();
            }
            AtomicLong received = new AtomicLong();
            AtomicLong last = new AtomicLong(System.nanoTime());
            List<Thread> threads = new ArrayList<>();
            for (Sub s : subs) {
                Thread t = new Thread(() -> {
                    try {
                        while (true) {
                            long idle = (System.nanoTime() - last.get()) / 1_000_000_000L;
                            if (received.get() >= expected ? idle >= idleSeconds : idle >= 120) {
                                return;
                            }
                            Message<byte[]> m = s.consumer.receive(200, TimeUnit.MILLISECONDS);
                            if (m == null) {
                                continue;
                            }
                            last.set(System.nanoTime());
                            received.incrementAndGet();
                            byte[] data = m.getValue();
                            int p = Integer.parseInt(m.getProperty("p"));
                            long seq = Long.parseLong(m.getProperty("seq"));
                            String prod = m.getProducerName();
                            boolean ok = m.getSequenceId() == seq && mixProducerName(p).equals(prod)
                                    && Arrays.equals(data, payload(seed, p, seq, data.length));
                            String topic = m.getTopicName();
                            int dash = topic.lastIndexOf("-partition-");
                            String partition = dash < 0 ? "-" : topic.substring(dash + "-partition-".length());
                            synchronized (w) {
                                w.write("msg " + s.topic + " " + s.sub + " " + s.name + " " + prod + " " + p + " " + seq
                                        + " " + m.getKey() + " " + partition + " " + id(m.getMessageId()) + " "
                                        + data.length + " " + sha256(data) + " " + (ok ? "OK" : "BAD") + "\n");
                            }
                            s.consumer.acknowledge(m);
                        }
                    } catch (Exception e) {
                        synchronized (w) {
                            try {
                                w.write("error " + s.sub + " " + s.name + " " + e.toString().replace('\n', ' ') + "\n");
                            } catch (IOException ignored) {
                                // nothing to do
                            }
                        }
                        e.printStackTrace();
                    }
                }, s.sub + "-" + s.name);
                t.start();
                threads.add(t);
            }
            for (Thread t : threads) {
                t.join();
            }
            synchronized (w) {
                w.write("done " + received.get() + " received\n");
                w.flush();
            }
            for (Sub s : subs) {
                s.consumer.close();
            }
        }
    }
}
