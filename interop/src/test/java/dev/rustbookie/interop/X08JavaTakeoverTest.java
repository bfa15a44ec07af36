package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.LongToIntFunction;
import org.apache.bookkeeper.client.BKException;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeper.DigestType;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.net.BookieId;
import org.apache.bookkeeper.proto.checksum.MacDigestManager;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * X08 (issue 32): a binary swap. A Java bookie (the 4.18.2 server in the harness,
 * SortedLedgerStorage or DbLedgerStorage) holds ledgers written by the Java client: closed, fenced by a recovery
 * open while its writer still has it, deleted in the metadata, one with an explicit LAC, and one
 * open with a live writer; entries of 1 B to 1 MiB. It is stopped cleanly (SIGTERM) or SIGKILLed
 * in the middle of the writer's adds, a second after a checkpoint (so that its entries are
 * partly in index files and entry logs and partly in its journal only), and our bookie is started on its own bk_server.conf, same
 * port, same bookie id, same directories. Then, from our bookie alone (raw reads addressed to it,
 * not through a ledger handle): every acknowledged entry byte for byte; the recovered ledger still
 * refuses its old writer; a wrong master key is refused; the explicit LAC is the writer's; the
 * writer goes on (SIGTERM) or recovery closes the ledger with every acknowledged entry (SIGKILL);
 * the deleted ledger is dropped by our garbage collection and stays gone after a restart of ours,
 * which serves everything else again; and not one of Java's files was changed.
 */
@Tag("takeover")
@Timeout(value = 400, unit = TimeUnit.SECONDS)
class X08JavaTakeoverTest {
    static final long SEED = 33;
    static final LongToIntFunction SIZE = e -> e % 40 == 7 ? (1 << 20) : Payloads.size(SEED, 1, e, 1, 9000);
    static final int N = 120;

    @ParameterizedTest(name = "javaTakeover[{0}/{1}/{2}dirs]")
    @CsvSource({
        "SortedLedgerStorage, SIGTERM, 1",
        "SortedLedgerStorage, SIGKILL, 1",
        "DbLedgerStorage, SIGTERM, 1",
        "DbLedgerStorage, SIGKILL, 1",
        "SortedLedgerStorage, SIGKILL, 2",
        "DbLedgerStorage, SIGKILL, 2"
    })
    void javaTakeover(String storage, String stop, int dirs) throws Exception {
        String tag = storage.toLowerCase() + "-" + stop.toLowerCase() + (dirs > 1 ? "-" + dirs + "dirs" : "");
        try (Cluster c = new Cluster("x08-" + tag)) {
            JavaBookie j = c.addJava();
            if (dirs > 1) {
                // Two journals (each ledger in journal L mod 2, lastMark.0 and lastMark.1) and two
                // ledger directories (DbLedgerStorage: one RocksDB pair and entry log set each).
                j.extraConf.put("journalDirectories", j.dir.resolve("journal-a") + "," + j.dir.resolve("journal-b"));
                j.extraConf.put("ledgerDirectories", j.dir.resolve("ledgers-a") + "," + j.dir.resolve("ledgers-b"));
            }
            if (storage.equals("SortedLedgerStorage")) {
                j.extraConf.put("ledgerStorageClass", "org.apache.bookkeeper.bookie.SortedLedgerStorage");
                j.extraConf.put("skipListSizeLimit", "1048576");
            }
            // Checkpoints every second: killed, the bookie leaves its older entries in entry logs
            // and its index (files, or RocksDB) and the newest only in its journal.
            j.extraConf.put("flushInterval", "1000");
            c.startAll();
            JavaLedgers w = new JavaLedgers(c, SEED, N, SIZE);
            w.stop(j, stop);
            LedgerHandle closed = w.closed;
            LedgerHandle zombie = w.zombie;
            LedgerHandle deleted = w.deleted;
            LedgerHandle lac = w.lac;
            LedgerHandle live = w.live;
            long acked = w.acked;
            Map<String, String> javaFiles = javaFiles(j.dir);

            Process ours = OursOnJava.start(c, j, "ours-on-java-1");
            try {
                BookieId id = j.bookieId();
                Raw raw = c.raw(false);
                long[][] expect = {
                    {closed.getId(), N - 1}, {zombie.getId(), N - 1}, {lac.getId(), 19}, {live.getId(), acked}};
                for (long[] x : expect) {
                    verifyRaw(raw, id, x[0], 0, x[1]);
                }
                // Fencing and master keys hold.
                BKException fenced = assertThrows(BKException.class,
                        () -> zombie.addEntry(Payloads.payload(SEED, zombie.getId(), N, 100)));
                assertEquals(BKException.Code.LedgerFencedException, fenced.getCode(), "zombie writer on ours");
                byte[] wrongKey = "not-the-key".getBytes();
                int rc = raw.add(id, closed.getId(), wrongKey, N, N - 1, new byte[] {1, 2, 3}, 0);
                assertEquals(BKException.Code.UnauthorizedAccessException, rc, "an add with a wrong master key");
                // The explicit LAC the writer sent to Java.
                BookKeeper reader = c.client(false);
                LedgerHandle lacReader = reader.openLedgerNoRecovery(lac.getId(), DigestType.CRC32C, Ops.PASSWORD);
                assertEquals(19, lacReader.readExplicitLastConfirmed(), "explicit LAC of ledger " + lac.getId());
                // The deleted ledger: our garbage collection drops it (recording it in its own
                // java-deleted file: Java's files are not written).
                assertEquals(200, j.http("PUT", "/api/v1/bookie/gc", "{}").statusCode(), "PUT gc on ours");
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                int rcDeleted = 0;
                while (System.nanoTime() < deadline) {
                    rcDeleted = raw.read(id, deleted.getId(), 0).rc();
                    if (rcDeleted == -7 || rcDeleted == -13) {
                        break;
                    }
                    Thread.sleep(500);
                }
                assertTrue(rcDeleted == -7 || rcDeleted == -13, "read of the deleted ledger: " + rcDeleted);
                // The writer goes on (clean stop: its handle saw no failure), or recovery closes
                // the ledger with every acknowledged entry (kill: its adds in flight failed).
                long end;
                if (stop.equals("SIGTERM")) {
                    Ops.addSync(live, SEED, N, N + 30, SIZE, null);
                    live.close();
                    end = N + 29;
                } else {
                    LedgerHandle rec = reader.openLedger(live.getId(), DigestType.CRC32C, Ops.PASSWORD);
                    end = rec.getLastAddConfirmed();
                    assertTrue(end >= acked, "recovered LAC " + end + " >= acknowledged " + acked);
                    rec.close();
                }
                verifyRaw(raw, id, live.getId(), 0, end);
                LedgerHandle rl = reader.openLedgerNoRecovery(live.getId(), DigestType.CRC32C, Ops.PASSWORD);
                Ops.verify(rl, SEED, live.getId(), 0, end, SIZE, false);
                // A new ledger on our bookie.
                LedgerHandle fresh = JavaLedgers.create(c.client(false));
                Ops.addSync(fresh, SEED, 0, 10, SIZE, null);
                fresh.close();

                // A restart of ours: the Java journal is not replayed again, the deleted ledger
                // stays gone, everything else is served as before.
                Procs.stop(ours, 30_000);
                Procs.forget(ours);
                ours = OursOnJava.start(c, j, "ours-on-java-2");
                for (long[] x : expect) {
                    verifyRaw(raw, id, x[0], 0, x[0] == live.getId() ? end : x[1]);
                }
                verifyRaw(raw, id, fresh.getId(), 0, 9);
                rcDeleted = raw.read(id, deleted.getId(), 0).rc();
                assertTrue(rcDeleted == -7 || rcDeleted == -13, "deleted ledger after a restart: " + rcDeleted);
                // (the zombie's handle is closed by its first refusal: a raw add with the right key)
                byte[] key = MacDigestManager.genDigest("ledger", Ops.PASSWORD);
                assertEquals(BKException.Code.LedgerFencedException,
                        raw.add(id, zombie.getId(), key, N, N - 1, new byte[] {1, 2, 3}, 0),
                        "an add to the fenced ledger after a restart");

                // Java's files: as Java left them (RocksDB's info logs aside, which a read-only
                // open of 7.x may still write).
                Map<String, String> after = javaFiles(j.dir);
                assertEquals(javaFiles, after, "Java's files after the takeover");
                String log = Files.readString(c.runDir.resolve("logs").resolve("ours-on-java-1.log"));
                assertTrue(log.contains("takeover:"), log);
                assertFalse(log.contains("panicked"), log);

                if (stop.equals("SIGTERM")) {
                    // Rollback: the Java bookie started on its directories again still serves
                    // what it held (what ours took since is not in its files: README) ...
                    Procs.stop(ours, 30_000);
                    Procs.forget(ours);
                    j.launch();
                    j.awaitReady(java.time.Duration.ofSeconds(120));
                    LedgerHandle back = c.client(false).openLedgerNoRecovery(closed.getId(), DigestType.CRC32C,
                            Ops.PASSWORD);
                    Ops.verify(back, SEED, closed.getId(), 0, N - 1, SIZE, false);
                    j.stop();
                    // ... and ours, started on them once more, sees that Java ran and refuses.
                    List<String> cmd = new ArrayList<>(List.of(Settings.bookieBin().toString(), "serve",
                            "--conf", j.confFile().toString()));
                    cmd.addAll(Settings.bookieArgs());
                    Path refusedLog = c.runDir.resolve("logs").resolve("ours-after-java.log");
                    ours = Procs.start(new ProcessBuilder(cmd).directory(j.dir.toFile()), refusedLog,
                            c.runDir.resolve("pids").resolve("ours-after-java.pid"));
                    assertTrue(ours.waitFor(60, TimeUnit.SECONDS), "ours after Java ran again");
                    String out = Files.readString(refusedLog);
                    assertEquals(1, ours.exitValue(), out);
                    assertTrue(out.contains("a Java bookie ran on these directories after this bookie took them over"),
                            out);
                }
            } finally {
                Procs.stop(ours, 30_000);
                Procs.forget(ours);
            }
        }
    }

    private static void verifyRaw(Raw raw, BookieId bookie, long ledger, long from, long to) throws Exception {
        OursOnJava.verifyRaw(raw, bookie, SEED, SIZE, ledger, from, to);
    }

    private static Map<String, String> javaFiles(Path base) throws Exception {
        Map<String, String> out = OursOnJava.javaFiles(base);
        assertTrue(out.keySet().stream().anyMatch(k -> k.endsWith(".txn")), "Java journal files: " + out.keySet());
        return out;
    }
}
