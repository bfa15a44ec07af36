package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.LongToIntFunction;
import java.util.stream.Stream;
import org.apache.bookkeeper.client.BKException;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeper.DigestType;
import org.apache.bookkeeper.client.LedgerHandle;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * X06 (issues 29, 32): our bookie started on a stopped Java bookie's directories with a
 * configuration that names the other ledger storage class (DbLedgerStorage's directories with
 * SortedLedgerStorage, and the reverse) must refuse to start, before it registers, and leave
 * every Java file byte-identical: a takeover (X08) reads exactly the storage the Java bookie
 * ran, and guesses at nothing.
 *
 * One Java bookie (E1 W1 A1), stopped with SIGKILL in the middle of a writer's adds
 * (DbLedgerStorage) or with SIGTERM (SortedLedgerStorage). Its ledgers: closed, fenced by a
 * recovery open (the writer left open), deleted, and one open with a live writer. Then: ours
 * exits non-zero with the refusal naming the directories and the class, ZooKeeper's registration
 * and cookie are as Java left them, the files are unchanged (sha256 of each), and the Java bookie
 * restarted on them still serves every acknowledged entry and answers the fenced ledger's writer
 * with -101 (so the refusal protected real data).
 */
@Tag("takeover")
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class X06JavaDirectoriesRefusedTest {
    static final long SEED = 29;
    static final LongToIntFunction SIZE = e -> Payloads.size(SEED, 1, e, 16, 4096);
    static final int N = 200;

    @ParameterizedTest(name = "javaDirectoriesRefused[{0}/{1}]")
    @CsvSource({
        "DbLedgerStorage, SIGKILL",
        "SortedLedgerStorage, SIGTERM"
    })
    void javaDirectoriesRefused(String storage, String stop) throws Exception {
        try (Cluster c = new Cluster("x06-" + storage.toLowerCase() + "-" + stop.toLowerCase())) {
            JavaBookie j = c.addJava();
            if (storage.equals("SortedLedgerStorage")) {
                j.extraConf.put("ledgerStorageClass", "org.apache.bookkeeper.bookie.SortedLedgerStorage");
            }
            c.startAll();
            JavaLedgers w = new JavaLedgers(c, SEED, N, SIZE);
            w.stop(j, stop);
            w.acks.save(c);
            LedgerHandle closed = w.closed;
            LedgerHandle zombie = w.zombie;
            LedgerHandle live = w.live;
            long acked = w.acked;

            Path journal = j.dir.resolve("journal");
            Path ledgers = j.dir.resolve("ledgers");
            Map<String, String> before = snapshot(journal, ledgers);
            assertTrue(before.keySet().stream().anyMatch(f -> f.endsWith(".txn")), "Java journal files: " + before.keySet());
            String cookiePath = c.root + "/cookies/" + j.id();
            long cookieMtime = c.zk().exists(cookiePath, false).getMtime();
            long owner = c.registrationOwner(j.id());

            // ours, on the Java bookie's configuration file with the other storage class
            String other = storage.equals("SortedLedgerStorage")
                    ? "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage"
                    : "org.apache.bookkeeper.bookie.SortedLedgerStorage";
            Path conf = c.runDir.resolve("wrong-class.conf");
            Files.writeString(conf, Files.readString(j.confFile()).lines()
                    .filter(l -> !l.startsWith("ledgerStorageClass"))
                    .reduce("", (a, l) -> a + l + "\n") + "ledgerStorageClass=" + other + "\n");
            List<String> cmd = new ArrayList<>(List.of(Settings.bookieBin().toString(), "serve", "--conf",
                    conf.toString()));
            cmd.addAll(Settings.bookieArgs());
            Path log = c.runDir.resolve("logs").resolve("ours-on-" + j.name + ".log");
            Process p = Procs.start(new ProcessBuilder(cmd).directory(j.dir.toFile()), log,
                    c.runDir.resolve("pids").resolve("ours-on-" + j.name + ".pid"));
            assertTrue(p.waitFor(60, TimeUnit.SECONDS), "our bookie did not exit on the Java directories");
            Procs.forget(p);
            String out = Files.readString(log, StandardCharsets.UTF_8);
            Cluster.log("ours exited with " + p.exitValue() + ":\n" + out.strip());
            assertEquals(1, p.exitValue(), "exit code on a Java bookie's directories (1: bookie.service does not restart it)");
            assertTrue(out.contains("refusing to start"), out);
            assertTrue(out.contains("ledgerStorageClass is " + other), out);
            assertTrue(out.contains(ledgers.toString()), out);
            assertTrue(out.contains(storage.equals("DbLedgerStorage") ? "RocksDB" : "index files"), out);
            assertFalse(out.contains("panicked"), out);

            assertEquals(before, snapshot(journal, ledgers), "the Java files after our refused start");
            long ownerAfter = c.registrationOwner(j.id());
            assertTrue(ownerAfter == 0 || ownerAfter == owner, "registration left as Java left it");
            assertEquals(cookieMtime, c.zk().exists(cookiePath, false).getMtime(), "ZooKeeper cookie untouched");

            // The refusal protected real data: the Java bookie restarted on the same directories
            // serves every acknowledged entry and still refuses the fenced ledger's writer.
            j.launch();
            j.awaitReady(java.time.Duration.ofSeconds(120));
            BookKeeper reader = c.client(false);
            LedgerHandle rc = reader.openLedgerNoRecovery(closed.getId(), DigestType.CRC32C, Ops.PASSWORD);
            Ops.verify(rc, SEED, closed.getId(), 0, N - 1, SIZE, false);
            LedgerHandle rl = reader.openLedgerNoRecovery(live.getId(), DigestType.CRC32C, Ops.PASSWORD);
            Ops.verify(rl, SEED, live.getId(), 0, acked, SIZE, true);
            BKException fenced = assertThrows(BKException.class,
                    () -> zombie.addEntry(Payloads.payload(SEED, zombie.getId(), N, 100)));
            assertEquals(BKException.Code.LedgerFencedException, fenced.getCode(), "zombie writer after restart");
            c.assertHealthy();
        }
    }

    /** Relative path -> sha256 of every regular file below the roots. */
    static Map<String, String> snapshotOf(Path... roots) throws Exception {
        return snapshot(roots);
    }

    private static Map<String, String> snapshot(Path... roots) throws Exception {
        Map<String, String> out = new TreeMap<>();
        for (Path root : roots) {
            try (Stream<Path> files = Files.walk(root)) {
                for (Path f : (Iterable<Path>) files.filter(Files::isRegularFile)::iterator) {
                    MessageDigest md = MessageDigest.getInstance("SHA-256");
                    out.put(root.getFileName() + "/" + root.relativize(f),
                            HexFormat.of().formatHex(md.digest(Files.readAllBytes(f))));
                }
            }
        }
        return out;
    }
}
