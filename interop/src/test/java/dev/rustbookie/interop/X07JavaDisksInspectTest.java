package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.LongToIntFunction;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeper.DigestType;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.proto.checksum.MacDigestManager;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * X07 (issue 32): `bookie inspect java --conf` reads what a stopped Java bookie
 * (SortedLedgerStorage or DbLedgerStorage) left on its disks, with our own readers of Java's
 * formats (crate javastore): index files or RocksDB (read-only), entry logs, the journal after
 * the last mark. Stopped cleanly (SIGTERM: a final checkpoint puts the entries in the index and entry
 * logs) and SIGKILLed in the middle of adds (the newest entries only in the journal). Every
 * acknowledged entry of every ledger is found, byte for byte (ledger id, entry id, payload);
 * the recovered ledger is fenced, master keys are the ones the client derives from the password,
 * the explicit LAC the writer sent is there; and the Java files are left unchanged.
 */
@Tag("takeover")
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class X07JavaDisksInspectTest {
    static final long SEED = 32;
    static final LongToIntFunction SIZE = e -> Payloads.size(SEED, 1, e, 1, 9000);
    static final int N = 150;
    static final ObjectMapper JSON = new ObjectMapper();

    @ParameterizedTest(name = "javaDisksInspect[{0}/{1}]")
    @CsvSource({
        "SortedLedgerStorage, SIGTERM",
        "SortedLedgerStorage, SIGKILL",
        "DbLedgerStorage, SIGTERM",
        "DbLedgerStorage, SIGKILL"
    })
    void javaDisksInspect(String storage, String stop) throws Exception {
        try (Cluster c = new Cluster("x07-" + storage.toLowerCase() + "-" + stop.toLowerCase())) {
            JavaBookie j = c.addJava();
            if (storage.equals("SortedLedgerStorage")) {
                j.extraConf.put("ledgerStorageClass", "org.apache.bookkeeper.bookie.SortedLedgerStorage");
            }
            // Checkpoints every second (SIGKILL: older entries on disk, the newest in the journal)
            j.extraConf.put("flushInterval", "1000");
            c.startAll();
            JavaLedgers w = new JavaLedgers(c, SEED, N, SIZE);
            w.stop(j, stop);
            LedgerHandle closed = w.closed;
            LedgerHandle zombie = w.zombie;
            LedgerHandle lac = w.lac;
            LedgerHandle live = w.live;
            long acked = w.acked;
            Path journal = j.dir.resolve("journal");
            Path ledgers = j.dir.resolve("ledgers");
            Map<String, String> before = X06JavaDirectoriesRefusedTest.snapshotOf(journal, ledgers);

            JsonNode all = inspect(c, j, "all", List.of("--json"));
            // A bookie killed before its first checkpoint has written no index file yet: then
            // everything is in the journal.
            String kind = all.get("storage").asText();
            String wantKind = storage.equals("SortedLedgerStorage") ? "Sorted" : "Db";
            assertTrue(kind.equals(wantKind) || (stop.equals("SIGKILL") && kind.equals("NoIndex")), kind);
            Map<Long, JsonNode> byLedger = new HashMap<>();
            for (JsonNode l : all.get("ledgers")) {
                byLedger.put(l.get("ledger").asLong(), l);
            }
            byte[] key = MacDigestManager.genDigest("ledger", Ops.PASSWORD);
            long[][] expect = {
                {closed.getId(), N - 1}, {zombie.getId(), N - 1}, {lac.getId(), 19}, {live.getId(), acked}};
            for (long[] x : expect) {
                JsonNode l = byLedger.get(x[0]);
                assertNotNull(l, "ledger " + x[0] + " in " + byLedger.keySet());
                assertEquals(HexFormat.of().formatHex(key), l.get("master_key_hex").asText(), "master key of " + x[0]);
                assertTrue(l.get("last_entry").asLong() >= x[1], "last entry of " + x[0] + ": " + l);
                assertEquals(x[0] == zombie.getId(), l.get("fenced").asBoolean(), "fenced, ledger " + x[0]);
                // Every acknowledged entry, byte for byte.
                JsonNode one = inspect(c, j, "ledger-" + x[0],
                        List.of("--json", "--ledger", Long.toString(x[0]), "--bodies"));
                JsonNode entries = one.get("ledgers").get(0).get("entry_list");
                Map<Long, byte[]> bodies = new HashMap<>();
                for (JsonNode e : entries) {
                    bodies.put(e.get("entry").asLong(), HexFormat.of().parseHex(e.get("body_hex").asText()));
                }
                for (long e = 0; e <= x[1]; e++) {
                    byte[] body = bodies.get(e);
                    assertNotNull(body, "entry " + e + " of ledger " + x[0]);
                    ByteBuffer b = ByteBuffer.wrap(body);
                    assertEquals(x[0], b.getLong(0), "ledger id in the body");
                    assertEquals(e, b.getLong(8), "entry id in the body");
                    byte[] want = Payloads.payload(SEED, x[0], e, SIZE.applyAsInt(e));
                    // 32 bytes of header, a 4-byte CRC32C digest, then the payload.
                    assertArrayEquals(want, Arrays.copyOfRange(body, 36, body.length),
                            "payload of entry " + e + " of ledger " + x[0]);
                }
            }
            JsonNode explicit = byLedger.get(lac.getId()).get("explicit_lac_hex");
            assertFalse(explicit.isNull(), "explicit LAC of ledger " + lac.getId());
            ByteBuffer lacBody = ByteBuffer.wrap(HexFormat.of().parseHex(explicit.asText()));
            assertEquals(lac.getId(), lacBody.getLong(0));
            assertEquals(19, lacBody.getLong(8), "the explicit LAC value");
            if (stop.equals("SIGKILL")) {
                assertTrue(all.get("replay").get("entries").asLong() > 0, "entries replayed from the journal: " + all);
            }
            assertEquals(before, X06JavaDirectoriesRefusedTest.snapshotOf(journal, ledgers), "Java files after inspect");
            c.assertHealthy();
        }
    }

    private static JsonNode inspect(Cluster c, JavaBookie j, String tag, List<String> args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(Settings.bookieBin().toString(), "inspect", "java", "--conf",
                j.confFile().toString()));
        cmd.addAll(args);
        Path out = c.runDir.resolve("logs").resolve("inspect-" + tag + ".json");
        Path err = c.runDir.resolve("logs").resolve("inspect-" + tag + ".err");
        Process p = new ProcessBuilder(cmd).redirectOutput(out.toFile()).redirectError(err.toFile()).start();
        assertTrue(p.waitFor(120, TimeUnit.SECONDS), "bookie inspect java did not finish");
        String stderr = Files.readString(err, StandardCharsets.UTF_8);
        assertEquals(0, p.exitValue(), "bookie inspect java " + args + ": " + stderr);
        return JSON.readTree(out.toFile());
    }
}
