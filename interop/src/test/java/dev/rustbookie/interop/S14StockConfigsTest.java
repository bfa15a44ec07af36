package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.LedgerEntry;
import org.apache.bookkeeper.client.LedgerHandle;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * S14 (issue 44): our bookie on the configuration files operators run, unchanged but for the
 * metadata service, directories and ports — the stock bk_server.conf of BookKeeper 4.14.7,
 * 4.15.5, 4.16.7, 4.17.4 and 4.18.0 (key lines, bookie/tests/stock-conf/: BookKeeper publishes no
 * distribution on Maven Central) and Pulsar 3.0.7, 3.3.6 and 4.0.8's conf/bookkeeper.conf, taken
 * from the release artifacts at test time (and checked against the key-line fixtures). Each of the
 * eight registers in ZooKeeper under the id a Java bookie on the same file and host takes, all
 * eight serve one Java client ledger (E8 W8 A8), each exports metrics where its file configures an
 * exporter (Prometheus provider: 4.17+, Pulsar) and none where it does not (as Java), the
 * Pulsar files' bookies run autorecovery (their autoRecoveryDaemonEnabled=true) and no file has
 * a key we do not know or do not honour.
 */
@Tag("smoke")
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class S14StockConfigsTest {

    @Test
    void stockFilesStartOurBookie() throws Exception {
        try (Cluster c = new Cluster("s14", "/ledgers")) {
            List<StockBookie> bookies = new ArrayList<>();
            for (String v : StockConfs.BOOKKEEPER) {
                String text = Files.readString(StockConfs.fixture("bk_server-" + v + ".keys"),
                        StandardCharsets.ISO_8859_1);
                bookies.add(new StockBookie(c, "bk_server-" + v, text, false));
            }
            for (String v : StockConfs.PULSAR) {
                String text = Files.readString(StockConfs.pulsarConf(v), StandardCharsets.ISO_8859_1);
                String fixture = Files.readString(StockConfs.fixture("pulsar-bookkeeper-" + v + ".keys"),
                        StandardCharsets.ISO_8859_1);
                assertEquals(fixture, StockConfs.keyLines(text),
                        "the key lines of Pulsar " + v + "'s released file are the fixture's");
                bookies.add(new StockBookie(c, "pulsar-bookkeeper-" + v, text, true));
            }
            c.bookies.addAll(bookies);
            for (StockBookie b : bookies) {
                Cluster.log(b.stock + ": edits " + b.edits());
            }
            c.startAll();
            for (StockBookie b : bookies) {
                assertTrue(c.isRegistered(b.id()), b + " registered as " + b.id());
            }

            // One ledger on all eight, written and read back by the Java client.
            BookKeeper bk = c.client(false);
            LedgerHandle lh = bk.createLedger(bookies.size(), bookies.size(), bookies.size(),
                    BookKeeper.DigestType.CRC32C, "s14".getBytes());
            List<byte[]> sent = new ArrayList<>();
            for (int i = 0; i < 50; i++) {
                byte[] e = Payloads.payload(14, lh.getId(), i, 100 + i * 37);
                sent.add(e);
                lh.addEntry(e);
            }
            lh.close();
            try (LedgerHandle rh = bk.openLedger(lh.getId(), BookKeeper.DigestType.CRC32C, "s14".getBytes())) {
                Enumeration<LedgerEntry> got = rh.readEntries(0, sent.size() - 1);
                for (int i = 0; got.hasMoreElements(); i++) {
                    assertArrayEquals(sent.get(i), got.nextElement().getEntry(), "entry " + i);
                }
            }

            for (StockBookie b : bookies) {
                String log = b.logText();
                boolean exporter = b.stock.startsWith("pulsar") || b.stock.contains("4.17")
                        || b.stock.contains("4.18");
                if (exporter) {
                    var r = b.http("GET", "/metrics", null);
                    assertEquals(200, r.statusCode(), b + " /metrics");
                    assertTrue(r.body().contains("bookie_SERVER_STATUS 1"), b + " exports its status");
                } else {
                    // NullStatsProvider (the file names no provider) and the admin server off:
                    // Java exports nothing, and neither do we.
                    assertThrows(java.io.IOException.class, () -> b.http("GET", "/metrics", null),
                            b + " has no metrics endpoint");
                }
                assertFalse(log.contains("no bookie of BookKeeper 4.14"), b + " knows every key of its file");
                // Pulsar's file turns autorecovery on: ours runs it (issue 45), no warning.
                assertEquals(b.stock.startsWith("pulsar"), log.contains("autorecovery: starting"),
                        b + ": autorecovery runs exactly where the file turns it on");
                assertEquals(0, count(log, "is not honoured"), b + ": no unhonoured key");
            }
            c.assertHealthy();
        }
    }

    private static int count(String text, String needle) {
        int n = 0;
        for (int at = text.indexOf(needle); at >= 0; at = text.indexOf(needle, at + 1)) {
            n++;
        }
        return n;
    }
}
