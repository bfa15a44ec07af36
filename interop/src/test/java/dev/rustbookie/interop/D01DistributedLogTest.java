package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.bookkeeper.client.BKException;
import org.apache.distributedlog.DLSN;
import org.apache.distributedlog.DistributedLogConfiguration;
import org.apache.distributedlog.LogRecord;
import org.apache.distributedlog.LogRecordWithDLSN;
import org.apache.distributedlog.LogSegmentMetadata;
import org.apache.distributedlog.api.AsyncLogReader;
import org.apache.distributedlog.api.AsyncLogWriter;
import org.apache.distributedlog.api.DistributedLogManager;
import org.apache.distributedlog.api.namespace.Namespace;
import org.apache.distributedlog.api.namespace.NamespaceBuilder;
import org.apache.distributedlog.exceptions.BKTransmitException;
import org.apache.distributedlog.impl.metadata.BKDLConfig;
import org.apache.distributedlog.metadata.DLMetadata;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * D01 DistributedLog (issue #13, tier 2): BookKeeper's log-stream library, unchanged, over our
 * bookies, and over a mixed cluster (2 Java + 2 ours). Per cluster: a namespace bound in the
 * test's ZooKeeper over the cluster's ledgers root; async writers append N records of mixed
 * sizes in four sessions (four segments, so four ledgers) while a tailing reader follows them
 * with a bounded lag (it reads open segments with v3 long-poll reads); every record comes
 * back in order, byte for byte, and again from a DLSN in the middle. A second writer takes the
 * log over (write lock off, as in upstream's testTwoWritersOnLockDisabled): it recovers the
 * open segment, which fences the ledger on the bookies, and the first writer's next write fails
 * with LedgerFencedException; the second writer's records follow. Truncation: the log is
 * truncated at a DLSN, purged below it, DL deletes the purged segments' ledgers, and after a
 * forced GC on every bookie no bookie serves them while the rest of the log still reads back.
 */
@Tag("dl")
@Timeout(value = 900, unit = TimeUnit.SECONDS)
class D01DistributedLogTest {
    static final long SEED = 1301;
    static final int N = Integer.getInteger("interop.dl.records", 100_000);

    @Test
    void distributedLogOnOurBookies() throws Exception {
        try (Cluster c = new Cluster("d01")) {
            for (int i = 0; i < 3; i++) {
                c.addRust();
            }
            c.startAll();
            scenario(c, "ours");
        }
    }

    @Test
    void distributedLogOnAMixedCluster() throws Exception {
        try (Cluster c = new Cluster("d01m")) {
            c.addJava();
            c.addJava();
            c.addRust();
            c.addRust();
            c.startAll();
            scenario(c, "mixed");
        }
    }

    static int size(long txid) {
        return Payloads.size(SEED, 0, txid, 16, 4096);
    }

    static byte[] payload(long txid) {
        return Payloads.payload(SEED, 0, txid, size(txid));
    }

    static DistributedLogConfiguration conf() {
        DistributedLogConfiguration conf = new DistributedLogConfiguration();
        conf.setEnsembleSize(3);
        conf.setWriteQuorumSize(3);
        conf.setAckQuorumSize(2);
        conf.setZKSessionTimeoutSeconds(10);
        conf.setBKClientZKSessionTimeout(10);
        // Records batched into record sets of up to 64 KiB, transmitted at least every 2 ms
        // (one BookKeeper entry each): the tailing reader's lag stays bounded. (Immediate
        // flush, one entry and a control record per write, one transmit at a time, gave
        // 2,500 records/s.)
        conf.setImmediateFlushEnabled(false);
        conf.setOutputBufferSize(64 * 1024);
        conf.setPeriodicFlushFrequencyMilliSeconds(2);
        // No time-based rolling: segments start with each writer session (scenario()).
        conf.setLogSegmentRollingIntervalMinutes(0);
        conf.setExplicitTruncationByApplication(true);
        conf.setRetentionPeriodHours(Integer.MAX_VALUE);
        conf.setLockTimeout(5);
        conf.setWriteLockEnabled(false);
        conf.setCreateStreamIfNotExists(true);
        // The reader's own read-ahead (DL defaults: 10 records, batches of 2).
        conf.setReadAheadMaxRecords(10_000);
        conf.setReadAheadBatchSize(64);
        return conf;
    }

    static void scenario(Cluster c, String what) throws Exception {
        URI uri = URI.create("distributedlog://" + c.zk.servers() + "/dl-" + c.name);
        DLMetadata.create(new BKDLConfig(c.zk.servers(), c.root)).create(uri);
        Namespace ns = NamespaceBuilder.newBuilder().conf(conf()).uri(uri).clientId("interop-" + what).build();
        try {
            ns.createLog("log-a");
            DistributedLogManager dlm = ns.openLog("log-a");

            // 1. Writer and tailing reader at the same time. The records go in four writer
            // sessions, each starting a log segment (a ledger): DL's size-based rolling compares
            // the record-set buffer, not the segment, so it never rolls by size here. The last
            // session's writer stays open (its segment in progress) for the takeover.
            AtomicLong readTo = new AtomicLong(0);
            // When each record was acknowledged to the writer (0: not yet), and the largest time
            // from a record's acknowledgement to the tailing reader reading it.
            java.util.concurrent.atomic.AtomicLongArray ackedAt = new java.util.concurrent.atomic.AtomicLongArray(N + 1);
            AtomicLong maxLagNanos = new AtomicLong(0);
            AtomicReference<Throwable> readerFailed = new AtomicReference<>();
            AsyncLogReader tail = dlm.openAsyncLogReader(DLSN.InitialDLSN).get(30, TimeUnit.SECONDS);
            Thread follower = new Thread(() -> {
                try {
                    for (long txid = 1; txid <= N; txid++) {
                        LogRecordWithDLSN r = tail.readNext().get(60, TimeUnit.SECONDS);
                        assertEquals(txid, r.getTransactionId(), "tailing reader: records in order");
                        assertArrayEquals(payload(txid), r.getPayload(), "tailing reader: record " + txid);
                        readTo.set(txid);
                        long acked = ackedAt.get((int) txid);
                        if (acked != 0) {
                            maxLagNanos.accumulateAndGet(System.nanoTime() - acked, Math::max);
                        }
                    }
                } catch (Throwable t) {
                    readerFailed.set(t);
                }
            }, "dl-tail");
            follower.start();
            long t0 = System.nanoTime();
            List<DLSN> dlsns = new ArrayList<>(N + 1);
            dlsns.add(null);
            java.util.ArrayDeque<CompletableFuture<DLSN>> window = new java.util.ArrayDeque<>();
            AsyncLogWriter w1 = null;
            for (long txid = 1; txid <= N; txid++) {
                if ((txid - 1) % (N / 4) == 0 && txid + N / 4 - 1 <= N) {
                    if (w1 != null) {
                        w1.asyncClose().get(30, TimeUnit.SECONDS);
                    }
                    w1 = dlm.openAsyncLogWriter().get(30, TimeUnit.SECONDS);
                }
                window.add(w1.write(new LogRecord(txid, payload(txid))));
                // Up to 256 writes in flight; acknowledged in order (all before a session ends).
                boolean sessionEnd = txid % (N / 4) == 0 || txid == N;
                while (window.size() >= 256 || (sessionEnd && !window.isEmpty())) {
                    dlsns.add(window.poll().get(60, TimeUnit.SECONDS));
                    ackedAt.set(dlsns.size() - 1, System.nanoTime());
                }
            }
            double secs = (System.nanoTime() - t0) / 1e9;
            Cluster.log(what + ": " + N + " records written in " + String.format("%.1f", secs) + " s ("
                    + String.format("%.0f", N / secs) + "/s), last DLSN " + dlsns.get(N));
            follower.join(TimeUnit.SECONDS.toMillis(120));
            if (readerFailed.get() != null) {
                throw new AssertionError("tailing reader failed at " + readTo.get(), readerFailed.get());
            }
            assertEquals(N, readTo.get(), "the tailing reader read every record");
            long lagMs = maxLagNanos.get() / 1_000_000;
            Cluster.log(what + ": tailing reader caught up; largest time from a record's acknowledgement to its read "
                    + lagMs + " ms");
            // The reader never waits for a segment to close: it follows within a bounded lag.
            // Bounded: seconds, not the length of the run (the reader keeps up with a writer at
            // 10-20k records/s on this 2-core machine, with everything on it).
            assertTrue(lagMs <= 15_000, "tailing reader lag " + lagMs + " ms");
            tail.asyncClose().get(30, TimeUnit.SECONDS);

            // 2. Read back from a DLSN in the middle, to the end.
            long from = N / 2 + 7;
            AsyncLogReader mid = dlm.openAsyncLogReader(dlsns.get((int) from)).get(30, TimeUnit.SECONDS);
            for (long txid = from; txid <= N; txid++) {
                LogRecordWithDLSN r = mid.readNext().get(60, TimeUnit.SECONDS);
                assertEquals(txid, r.getTransactionId());
                assertEquals(dlsns.get((int) txid), r.getDlsn(), "record " + txid + " at its DLSN");
                assertArrayEquals(payload(txid), r.getPayload());
            }
            mid.asyncClose().get(30, TimeUnit.SECONDS);
            Cluster.log(what + ": read back from DLSN " + dlsns.get((int) from) + " to the end");

            // 3. A second writer takes over: the open segment is recovered (fenced).
            DistributedLogManager dlm2 = ns.openLog("log-a");
            AsyncLogWriter w2 = dlm2.openAsyncLogWriter().get(60, TimeUnit.SECONDS);
            long next = N + 1;
            DLSN taken = w2.write(new LogRecord(next, payload(next))).get(60, TimeUnit.SECONDS);
            Cluster.log(what + ": second writer wrote record " + next + " at " + taken);
            Throwable fenced = null;
            try {
                w1.write(new LogRecord(next + 1, payload(next + 1))).get(60, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                fenced = e.getCause();
            }
            assertNotNull(fenced, "the first writer's write after the takeover must fail");
            assertTrue(fenced instanceof BKTransmitException, "fenced write fails with " + fenced);
            assertEquals(BKException.Code.LedgerFencedException, ((BKTransmitException) fenced).getBKResultCode(),
                    "the first writer is fenced by our bookies: " + fenced);
            Cluster.log(what + ": the first writer is fenced: " + fenced);
            w1.asyncAbort().get(30, TimeUnit.SECONDS);
            for (long txid = next + 1; txid <= next + 100; txid++) {
                w2.write(new LogRecord(txid, payload(txid))).get(60, TimeUnit.SECONDS);
            }
            long last = next + 100;
            AsyncLogReader all = dlm2.openAsyncLogReader(DLSN.InitialDLSN).get(30, TimeUnit.SECONDS);
            for (long txid = 1; txid <= last; txid++) {
                LogRecordWithDLSN r = all.readNext().get(60, TimeUnit.SECONDS);
                assertEquals(txid, r.getTransactionId(), "after the takeover: every record once, in order");
                assertArrayEquals(payload(txid), r.getPayload());
            }
            all.asyncClose().get(30, TimeUnit.SECONDS);
            Cluster.log(what + ": all " + last + " records read back once, in order, after the takeover");

            // 4. Truncation: segments below a DLSN are truncated, purged, and their ledgers
            // deleted; after a forced GC no bookie serves them.
            List<LogSegmentMetadata> segments = dlm2.getLogSegments();
            assertTrue(segments.size() >= 4, "the log spans several segments: " + segments.size());
            long cut = N * 3L / 4 + 1;
            DLSN cutAt = dlsns.get((int) cut);
            assertTrue(w2.truncate(cutAt).get(60, TimeUnit.SECONDS), "truncate at " + cutAt);
            List<Long> purged = new ArrayList<>();
            for (LogSegmentMetadata s : segments) {
                if (!s.isInProgress() && s.getLastDLSN().compareTo(cutAt) < 0) {
                    purged.add(s.getLogSegmentId());
                }
            }
            // DL always keeps the last completed segment.
            assertFalse(purged.isEmpty(), "segments below the cut");
            dlm2.purgeLogsOlderThan(cut);
            List<Long> left = new ArrayList<>();
            for (LogSegmentMetadata s : dlm2.getLogSegments()) {
                left.add(s.getLogSegmentId());
            }
            List<Long> deleted = new ArrayList<>();
            for (long id : purged) {
                if (!left.contains(id)) {
                    deleted.add(id);
                }
            }
            assertFalse(deleted.isEmpty(), "purge deleted segments below the cut: purged " + purged + ", left " + left);
            Cluster.log(what + ": truncated at " + cutAt + "; ledgers deleted by DistributedLog: " + deleted);
            Raw raw = c.raw(false);
            for (Bookie b : c.bookies) {
                assertEquals(200, b.http("PUT", "/api/v1/bookie/gc", "{}").statusCode(), "forced GC on " + b);
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
            boolean gone = false;
            while (!gone && System.nanoTime() < deadline) {
                gone = true;
                for (Bookie b : c.bookies) {
                    if (b.isJava()) {
                        continue; // Java's GC runs on its own schedule; ours are checked
                    }
                    for (long id : deleted) {
                        int rc = raw.read(b.bookieId(), id, 0).rc();
                        if (rc != -7 && rc != -13) {
                            gone = false;
                        }
                    }
                }
                if (!gone) {
                    Thread.sleep(500);
                }
            }
            assertTrue(gone, what + ": our bookies dropped the ledgers DistributedLog deleted: " + deleted);
            AsyncLogReader rest = dlm2.openAsyncLogReader(cutAt).get(30, TimeUnit.SECONDS);
            for (long txid = cut; txid <= N; txid++) {
                LogRecordWithDLSN r = rest.readNext().get(60, TimeUnit.SECONDS);
                assertEquals(txid, r.getTransactionId());
                assertArrayEquals(payload(txid), r.getPayload());
            }
            rest.asyncClose().get(30, TimeUnit.SECONDS);
            Cluster.log(what + ": the log from the cut on still reads back after the GC");
            w2.asyncClose().get(30, TimeUnit.SECONDS);
            dlm2.close();
            dlm.close();
            c.assertHealthy();
        } finally {
            ns.close();
        }
    }
}
