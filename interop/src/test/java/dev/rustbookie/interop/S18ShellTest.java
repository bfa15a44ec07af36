package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.LedgerHandle;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * S18 (issue 46): `bookkeeper shell` against a cluster of ours. Every BookieShell command that
 * talks to ZooKeeper or to a live bookie runs against two of our bookies and one Java bookie,
 * and what it prints about ours is what it prints about the Java one: listbookies,
 * whatisinstanceid, listledgers (-m, -bookieid), ledgermetadata, readledger (from every
 * bookie, over the wire), simpletest, bookiesanity (with each bookie as "the local" one),
 * bookieinfo, clusterinfo, endpointinfo, cookie_get, listunderreplicated,
 * queryautorecoverystatus, deleteledger. (The autorecovery commands, whoisauditor,
 * lostbookierecoverydelay, triggeraudit, decommissionbookie and recover, run in A02; the
 * commands that read a stopped bookie's files map to `bookie inspect`, README.)
 */
@Tag("smoke")
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class S18ShellTest {

    @Test
    void shellCommandsWorkOnOurBookiesAsOnJavas() throws Exception {
        try (Cluster c = new Cluster("s18")) {
            Bookie ours = c.addRust();
            Bookie ours2 = c.addRust();
            Bookie java = c.addJava();
            c.startAll();
            List<Bookie> all = List.of(ours, ours2, java);

            BookKeeper bk = c.client(false);
            LedgerHandle lh = bk.createLedger(3, 3, 2, BookKeeper.DigestType.CRC32C, Ops.PASSWORD);
            for (int e = 0; e < 5; e++) {
                lh.addEntry(("shell-entry-" + e).getBytes(StandardCharsets.US_ASCII));
            }
            lh.close();
            long id = lh.getId();
            LedgerHandle doomed = bk.createLedger(3, 2, 2, BookKeeper.DigestType.CRC32, Ops.PASSWORD);
            doomed.addEntry("x".getBytes(StandardCharsets.US_ASCII));
            doomed.close();
            bk.close();

            String out = Tools.bookieShell(c, "listbookies", "-a");
            for (Bookie b : all) {
                assertTrue(out.contains(b.id()), "listbookies -a names " + b + ":\n" + out);
            }
            out = Tools.bookieShell(c, "listbookies", "-ro");
            for (Bookie b : all) {
                assertFalse(out.contains(b.id()), "no bookie is read-only:\n" + out);
            }

            String instanceId = new String(c.zk().getData(c.root + "/INSTANCEID", false, null),
                    StandardCharsets.UTF_8);
            out = Tools.bookieShell(c, "whatisinstanceid");
            assertTrue(out.contains(instanceId), "whatisinstanceid says " + instanceId + ":\n" + out);

            out = Tools.bookieShell(c, "listledgers");
            assertTrue(out.contains("{ledgerId=" + id + "}"), "listledgers lists " + id + ":\n" + out);
            out = Tools.bookieShell(c, "listledgers", "-m");
            assertTrue(out.contains(ours.id()) && out.contains(java.id()), "listledgers -m shows the ensembles:\n" + out);
            // The ledgers on one bookie, ours and Java's alike (the ledger is on all three).
            for (Bookie b : all) {
                out = Tools.bookieShell(c, "listledgers", "-bookieid", b.id());
                assertTrue(out.contains("{ledgerId=" + id + "}"), "listledgers -bookieid " + b + ":\n" + out);
            }

            out = Tools.bookieShell(c, "ledgermetadata", "-ledgerid", Long.toString(id));
            assertTrue(out.contains("CLOSED") && out.contains(ours.id()) && out.contains(java.id()),
                    "ledgermetadata:\n" + out);

            // readledger from each bookie alone: the same five entries, from ours as from Java's.
            List<String> read = new ArrayList<>();
            for (Bookie b : all) {
                out = Tools.bookieShell(c, "readledger", "-ledgerid", Long.toString(id), "-firstentryid", "0",
                        "-lastentryid", "4", "-msg", "-bookie", b.id());
                read.add(entries(out));
            }
            assertTrue(read.get(2).contains("shell-entry-") && read.get(2).contains("entryId=0, ledgerId=" + id)
                    && read.get(2).contains("entryId=3, ledgerId=" + id), "readledger from Java's bookie: " + read.get(2));
            assertEquals(read.get(2), read.get(0), "readledger from ours as from Java's");
            assertEquals(read.get(2), read.get(1), "readledger from ours as from Java's");

            out = Tools.bookieShell(c, "simpletest", "-ensemble", "3", "-writeQuorum", "3", "-ackQuorum", "3",
                    "-numEntries", "50");
            assertTrue(out.matches("(?s).*50 entries written to ledger \\d+ \\(lastEntryId 49\\).*"), "simpletest:\n" + out);

            // bookiesanity: each bookie as the local one (LocalBookieEnsemblePlacementPolicy).
            for (Bookie b : all) {
                out = Tools.bookieShellWith(c, Map.of("bookiePort", Integer.toString(b.port),
                        "advertisedAddress", "127.0.0.1", "useHostNameAsBookieID", "false",
                        "allowLoopback", "true"), "bookiesanity");
                assertTrue(out.contains("Bookie sanity test succeeded"), "bookiesanity on " + b + ":\n" + out);
            }

            // bookieinfo: GET_BOOKIE_INFO answered by each, ours as Java's.
            out = Tools.bookieShell(c, "bookieinfo");
            for (Bookie b : all) {
                assertTrue(out.matches("(?s).*Free disk space info \\{bookie=BookieID:" + Pattern.quote(b.id())
                        + ", IP:127\\.0\\.0\\.1, Port:" + b.port + ", Hostname:[^,]+, free=[1-9]\\d*\\([0-9.]+[KMGT]B\\), total=[1-9].*"),
                        "bookieinfo reports " + b + ":\n" + out);
            }
            assertTrue(out.contains("Total free disk space in the cluster"), "bookieinfo:\n" + out);

            out = Tools.bookieShell(c, "clusterinfo");
            assertTrue(out.contains("\"totalBookiesCount\" : 3,\n  \"writableBookiesCount\" : 3"), "clusterinfo:\n" + out);

            // endpointinfo: ours publish their service info as Java does.
            String javaInfo = endpoints(Tools.bookieShell(c, "endpointinfo", "-b", java.id()), java);
            for (Bookie b : List.of(ours, ours2)) {
                String info = endpoints(Tools.bookieShell(c, "endpointinfo", "-b", b.id()), b);
                assertEquals(javaInfo, info, "endpointinfo of " + b + " as of Java's");
            }

            for (Bookie b : all) {
                out = Tools.bookieShell(c, "cookie_get", b.id());
                assertTrue(out.contains("bookieHost: \"" + b.id() + "\"") && out.contains("instanceId: \"" + instanceId + "\""),
                        "cookie_get " + b + ":\n" + out);
            }

            out = Tools.bookieShell(c, "listunderreplicated");
            assertTrue(out.contains("Under replicated ledger count {count=0}"), "nothing under-replicated:\n" + out);
            out = Tools.bookieShell(c, "queryautorecoverystatus");
            assertTrue(out.contains("No Ledger is being recovered"), "queryautorecoverystatus:\n" + out);

            Tools.bookieShell(c, "deleteledger", "-ledgerid", Long.toString(doomed.getId()), "-force");
            out = Tools.bookieShell(c, "listledgers");
            assertTrue(out.contains("{ledgerId=" + id + "}") && !out.contains("{ledgerId=" + doomed.getId() + "}"),
                    "deleteledger removed it:\n" + out);
            c.assertHealthy();
        }
    }

    /** What readledger prints of each entry (its hex dump and ids), log prefixes dropped. */
    static String entries(String out) {
        StringBuilder b = new StringBuilder();
        for (String line : out.split("\n")) {
            if (line.startsWith("|") || line.contains("entryId=")) {
                b.append(line.replaceAll("^.*(\\|[0-9a-f]{8}\\|)", "$1").replaceAll("^.*(entryId=)", "$1")).append('\n');
            }
        }
        return b.toString();
    }

    /** What endpointinfo prints (its own lines only), the bookie's id and ports masked. */
    static String endpoints(String out, Bookie b) {
        StringBuilder s = new StringBuilder();
        for (String line : out.split("\n")) {
            if (line.contains("EndpointInfoCommand")) {
                s.append(line.replaceAll("^.*?\\] - ", "").replace(b.id(), "ID")
                        .replace("port=" + b.port + "}", "port=PORT}").replace("port=" + b.httpPort + "}", "port=HTTPPORT}"))
                        .append('\n');
            }
        }
        assertTrue(s.length() > 0, "endpointinfo printed nothing:\n" + out);
        return s.toString();
    }
}
