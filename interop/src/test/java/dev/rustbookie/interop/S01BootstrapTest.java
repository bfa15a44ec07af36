package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeperAdmin;
import org.apache.bookkeeper.client.BookieInfoReader.BookieInfo;
import org.apache.bookkeeper.discover.BookieServiceInfo;
import org.apache.bookkeeper.net.BookieId;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * S01 bootstrap and discovery (docs/interop.md §1.7): initNewCluster on a fresh root, 3 Rust bookies,
 * then the Java admin's and client's views of them, and BookieShell listbookies -rw.
 */
@Tag("smoke")
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class S01BootstrapTest {

    @Test
    void bootstrapAndDiscovery() throws Exception {
        try (Cluster c = new Cluster("s01")) {
            for (int i = 0; i < 3; i++) {
                c.addRust();
            }
            long t0 = System.nanoTime();
            for (Bookie b : c.bookies) {
                b.launch();
            }
            Set<String> ids = c.bookies.stream().map(Bookie::id).collect(Collectors.toSet());
            BookKeeperAdmin admin = c.admin();
            // within 10 s all 3 ids are in available and in cookies
            long deadline = t0 + TimeUnit.SECONDS.toNanos(10);
            Set<String> avail = Set.of();
            Set<String> cookies = Set.of();
            while (System.nanoTime() < deadline) {
                avail = names(admin.getAvailableBookies());
                try {
                    cookies = names(admin.getAllBookies());
                } catch (org.apache.bookkeeper.client.BKException.ZKException e) {
                    // no cookies/ node before the first bookie writes its cookie
                    Thread.sleep(100);
                    continue;
                }
                if (avail.containsAll(ids) && cookies.containsAll(ids)) {
                    break;
                }
                Thread.sleep(100);
            }
            Cluster.log(String.format("registered after %.1f s", (System.nanoTime() - t0) / 1e9));
            assertEquals(ids, avail, "getAvailableBookies within 10 s");
            assertEquals(ids, cookies, "getAllBookies (cookies) within 10 s");
            assertTrue(admin.getReadOnlyBookies().isEmpty(), "no read-only bookies");

            // service info: a bookie-rpc endpoint at 127.0.0.1:<port> (BP-38 or legacy empty data)
            for (Bookie b : c.bookies) {
                BookieServiceInfo info = serviceInfo(admin, b.bookieId());
                BookieServiceInfo.Endpoint rpc = info.getEndpoints().stream()
                        .filter(e -> "bookie-rpc".equals(e.getProtocol())).findFirst()
                        .orElseThrow(() -> new AssertionError("no bookie-rpc endpoint for " + b + ": " + info));
                assertEquals("127.0.0.1", rpc.getHost(), "service info host of " + b);
                assertEquals(b.port, rpc.getPort(), "service info port of " + b);
                assertTrue(rpc.getExtensions() == null || rpc.getExtensions().isEmpty(),
                        "no tls extension without TLS: " + rpc.getExtensions());
                Cluster.log(b + " service info: " + info.getEndpoints() + " " + info.getProperties());
            }

            // GET_BOOKIE_INFO: 0 < free <= total for each bookie
            BookKeeper bk = c.client(false);
            Map<BookieId, BookieInfo> infos = bk.getBookieInfo();
            assertEquals(ids, names(infos.keySet()), "getBookieInfo answers for every bookie");
            for (Map.Entry<BookieId, BookieInfo> e : infos.entrySet()) {
                long free = e.getValue().getFreeDiskSpace();
                long total = e.getValue().getTotalDiskSpace();
                Cluster.log(e.getKey() + " free " + free + " total " + total);
                assertTrue(free > 0 && free <= total, e.getKey() + ": 0 < free (" + free + ") <= total (" + total + ")");
            }

            // BookieShell listbookies -rw prints the same 3 ids
            String out = Tools.bookieShell(c, "listbookies", "-rw");
            Set<String> listed = new HashSet<>();
            java.util.regex.Matcher m = java.util.regex.Pattern.compile("BookieID:([0-9.]+:[0-9]+)").matcher(out);
            while (m.find()) {
                listed.add(m.group(1));
            }
            assertEquals(ids, listed, "BookieShell listbookies -rw output:\n" + out);

            // and our own CLI agrees
            String ours = Tools.run(c, "listbookies-rust", List.of(Settings.bookieBin().toString(), "listbookies",
                    "--conf", c.bookies.get(0).confFile().toString()));
            for (String id : ids) {
                assertTrue(ours.contains(id), "bookie listbookies lists " + id + ":\n" + ours);
            }
            c.assertHealthy();
        }
    }

    /**
     * The harness itself: a bookie (ours and a Java one) whose drawn port some other process binds
     * before the bookie does starts again on new ports, and the cluster works on them (a ledger
     * on both). CI once lost a run to this (a Java bookie's "bind(..) failed: Address already in
     * use" in X08's first start).
     */
    @Test
    void portTakenAtFirstStart() throws Exception {
        try (Cluster c = new Cluster("s01-port-taken")) {
            Bookie ours = c.addRust();
            Bookie java = c.addJava();
            int[] drawn = {ours.port, java.port};
            try (java.net.ServerSocket a = new java.net.ServerSocket(drawn[0]);
                    java.net.ServerSocket b = new java.net.ServerSocket(drawn[1])) {
                c.startAll();
            }
            assertTrue(ours.port != drawn[0] && java.port != drawn[1],
                    "new ports: " + ours + " (drew " + drawn[0] + "), " + java + " (drew " + drawn[1] + ")");
            assertTrue(ours.logText().contains("Address already in use"), "ours failed on the taken port first");
            assertTrue(java.logText().contains("Address already in use"), "java failed on the taken port first");
            assertEquals(Set.of(ours.id(), java.id()), names(c.admin().getAvailableBookies()), "available bookies");
            org.apache.bookkeeper.client.LedgerHandle lh = c.client(false).createLedger(2, 2, 2,
                    BookKeeper.DigestType.CRC32C, Ops.PASSWORD);
            lh.addEntry(new byte[] {1, 2, 3});
            lh.close();
            assertEquals(3, c.client(true).openLedger(lh.getId(), BookKeeper.DigestType.CRC32C, Ops.PASSWORD)
                    .readEntries(0, 0).nextElement().getEntry().length, "entry read back");
            c.assertHealthy();
        }
    }

    /**
     * BookKeeperAdmin.getBookieServiceInfo takes a BookieId from 4.15 on and the id as a String
     * on the 4.14 line: the same registration lookup either way.
     */
    static BookieServiceInfo serviceInfo(BookKeeperAdmin admin, BookieId id) throws Exception {
        java.lang.reflect.Method m;
        Object arg = id;
        try {
            m = BookKeeperAdmin.class.getMethod("getBookieServiceInfo", BookieId.class);
        } catch (NoSuchMethodException e) {
            m = BookKeeperAdmin.class.getMethod("getBookieServiceInfo", String.class);
            arg = id.toString();
        }
        try {
            return (BookieServiceInfo) m.invoke(admin, arg);
        } catch (java.lang.reflect.InvocationTargetException e) {
            throw e.getCause() instanceof Exception ex ? ex : e;
        }
    }

    static Set<String> names(java.util.Collection<BookieId> c) {
        return c.stream().map(BookieId::toString).collect(Collectors.toSet());
    }

}
