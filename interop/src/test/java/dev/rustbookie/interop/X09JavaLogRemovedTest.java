package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.function.LongToIntFunction;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeper.DigestType;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.net.BookieId;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * X09: after a takeover, a Java entry log whose ledgers are all deleted is removed, as Java's own
 * collector would remove it, and nothing else of Java's is touched. A Java bookie with small entry
 * logs (logSizeLimit 1 MiB) holds three ledgers written one after another by the Java client, 3 MiB
 * each, so that each fills logs of its own; it is stopped cleanly and ours is started on its
 * bk_server.conf. The first ledger is deleted in the metadata and ours collects: some of Java's
 * entry logs go, and only entry logs (every other Java file as Java left it); ours names each one
 * it removed and counts them in its metrics; the other two ledgers are served in full, again after
 * a restart of ours, and by the Java bookie started once more on its directories (rollback: the
 * logs it finds gone held only the deleted ledger).
 */
@Tag("takeover")
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class X09JavaLogRemovedTest {
    static final long SEED = 34;
    static final LongToIntFunction SIZE = e -> 64 << 10;
    static final int N = 48;

    @ParameterizedTest(name = "javaLogRemoved[{0}]")
    @CsvSource({"SortedLedgerStorage", "DbLedgerStorage"})
    void javaLogRemoved(String storage) throws Exception {
        try (Cluster c = new Cluster("x09-" + storage.toLowerCase())) {
            JavaBookie j = c.addJava();
            if (storage.equals("SortedLedgerStorage")) {
                j.extraConf.put("ledgerStorageClass", "org.apache.bookkeeper.bookie.SortedLedgerStorage");
                j.extraConf.put("skipListSizeLimit", "1048576");
            }
            j.extraConf.put("logSizeLimit", Integer.toString(1 << 20));
            c.startAll();
            BookKeeper writer = c.client(false);
            LedgerHandle[] lh = new LedgerHandle[3];
            for (int i = 0; i < lh.length; i++) {
                lh[i] = JavaLedgers.create(writer);
                Ops.addSync(lh[i], SEED, 0, N, SIZE, null);
                lh[i].close();
            }
            j.stop();
            Map<String, String> before = javaFiles(j.dir);
            BookieId id = j.bookieId();
            Raw raw = c.raw(false);

            Process ours = OursOnJava.start(c, j, "ours-x09-1");
            try {
                writer.deleteLedger(lh[0].getId());
                assertEquals(200, j.http("PUT", "/api/v1/bookie/gc", "{}").statusCode(), "PUT gc on ours");
                Set<String> removed = new TreeSet<>();
                Map<String, String> after = before;
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                while (System.nanoTime() < deadline) {
                    after = javaFiles(j.dir);
                    removed = new TreeSet<>(before.keySet());
                    removed.removeAll(after.keySet());
                    if (!removed.isEmpty()) {
                        break;
                    }
                    Thread.sleep(500);
                }
                assertFalse(removed.isEmpty(), "no Java entry log was removed after ledger "
                        + lh[0].getId() + " was deleted; Java's files: " + before.keySet());
                for (String r : removed) {
                    assertTrue(r.matches(".*/current/[0-9a-f]+\\.log"), "removed a Java file that is no entry log: " + r);
                }
                for (Map.Entry<String, String> f : after.entrySet()) {
                    assertEquals(before.get(f.getKey()), f.getValue(), "Java's " + f.getKey() + " after the collection");
                }
                String log = Files.readString(c.runDir.resolve("logs").resolve("ours-x09-1.log"));
                for (String r : removed) {
                    String name = Path.of(r).getFileName().toString();
                    assertTrue(log.lines().anyMatch(l -> l.contains("removed Java entry log") && l.contains(name)),
                            "ours names the removal of " + name);
                }
                String metrics = j.http("GET", "/metrics", null).body();
                assertTrue(metrics.contains("bookie_rs_takeover_java_entry_logs_removed " + removed.size()),
                        "removals counted: " + metrics.lines()
                                .filter(l -> l.contains("takeover_java")).toList());
                assertTrue(removed.size() < before.keySet().stream().filter(k -> k.endsWith(".log")).count(),
                        "logs of the live ledgers kept");

                for (int i = 1; i < lh.length; i++) {
                    verifyRaw(raw, id, lh[i].getId(), N - 1);
                }
                int rc = raw.read(id, lh[0].getId(), 0).rc();
                assertTrue(rc == -7 || rc == -13, "read of the deleted ledger: " + rc);

                // A restart of ours on the directories with those logs gone.
                OursOnJava.stop(ours);
                ours = OursOnJava.start(c, j, "ours-x09-2");
                for (int i = 1; i < lh.length; i++) {
                    verifyRaw(raw, id, lh[i].getId(), N - 1);
                }
                OursOnJava.stop(ours);
                ours = null;

                // Rollback: the Java bookie on its directories again serves the live ledgers.
                j.launch();
                j.awaitReady(java.time.Duration.ofSeconds(120));
                BookKeeper reader = c.client(false);
                for (int i = 1; i < lh.length; i++) {
                    LedgerHandle back = reader.openLedgerNoRecovery(lh[i].getId(), DigestType.CRC32C, Ops.PASSWORD);
                    Ops.verify(back, SEED, lh[i].getId(), 0, N - 1, SIZE, false);
                    back.close();
                }
                j.stop();
            } finally {
                OursOnJava.stop(ours);
            }
        }
    }

    private static void verifyRaw(Raw raw, BookieId bookie, long ledger, long to) throws Exception {
        OursOnJava.verifyRaw(raw, bookie, SEED, SIZE, ledger, 0, to);
    }

    private static Map<String, String> javaFiles(Path base) throws Exception {
        return OursOnJava.javaFiles(base);
    }
}
