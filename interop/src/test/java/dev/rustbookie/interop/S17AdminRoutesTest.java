package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.LedgerHandle;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * S17 (issue 46): Java 4.18's 30 admin routes, called side by side on a Java bookie and on ours
 * in one cluster (two of ours, one Java DbLedgerStorage bookie, ledgers written by the Java
 * client): every route with the methods it serves and those it refuses, bodies it takes and
 * bodies it refuses; the status and the body must be the same, byte for byte, except where a
 * bookie names itself (its id, Java's object identity) and where the answer describes the
 * bookie's own disks or configuration (space, file names, journal marks, RocksDB paths,
 * configuration keys), which are compared by their shape. Requests go over a plain socket so
 * that "no body" (no Content-Length) and "an empty body" are what the call says.
 */
@Tag("smoke")
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class S17AdminRoutesTest {

    /** How two answers are compared, after each bookie's own name is replaced by SELF. */
    interface Compare {
        /** null when alike, else why not. */
        String check(Answer java, Answer ours);
    }

    record Answer(int status, String contentType, String body) {
        @Override
        public String toString() {
            return status + " " + body;
        }
    }

    record Call(String method, String path, String body, Compare how) {
        @Override
        public String toString() {
            return method + " " + path + (body == null ? "" : " " + body);
        }
    }

    static final Compare EXACT = (j, o) -> j.toString().equals(o.toString()) ? null : "differ";

    /** Equal once numbers (disk space and sizes) are masked. */
    static Compare masked(UnaryOperator<String> mask) {
        return (j, o) -> {
            String a = j.status + " " + mask.apply(j.body);
            String b = o.status + " " + mask.apply(o.body);
            return a.equals(b) ? null : "differ once masked:\n    java: " + a + "\n    ours: " + b;
        };
    }

    static final UnaryOperator<String> NUMBERS = s -> s.replaceAll("\\(\\d+(\\.\\d+)?[KMGT]B\\)", "")
            .replaceAll("-?\\d+", "N");

    /** Both answer with this status and their bodies match the pattern. */
    static Compare both(int status, String pattern) {
        return (j, o) -> {
            for (Answer a : List.of(j, o)) {
                if (a.status != status || !a.body.matches(pattern)) {
                    return (a == j ? "java" : "ours") + " does not answer " + status + " /" + pattern + "/";
                }
            }
            return null;
        };
    }

    @Test
    void everyJavaRouteAnswersAsJavas() throws Exception {
        try (Cluster c = new Cluster("s17")) {
            Bookie ours = c.addRust();
            c.addRust();
            Bookie java = c.addJava();
            c.startAll();

            // Ledgers of the Java client: closed ones (one with custom metadata, one empty),
            // and an open one whose writer stays.
            BookKeeper bk = c.client(false);
            List<Long> ids = new ArrayList<>();
            LedgerHandle closed = bk.createLedger(3, 3, 2, BookKeeper.DigestType.CRC32C, Ops.PASSWORD);
            for (int e = 0; e < 5; e++) {
                closed.addEntry(("entry-" + e).getBytes(StandardCharsets.US_ASCII));
            }
            closed.addEntry(new byte[] {'x', (byte) 0xe9, 'y'}); // a byte above 0x7f
            closed.close();
            ids.add(closed.getId());
            Map<String, byte[]> custom = new HashMap<>();
            custom.put("application", "s17".getBytes(StandardCharsets.UTF_8));
            LedgerHandle tagged = bk.createLedger(3, 2, 2, BookKeeper.DigestType.CRC32, Ops.PASSWORD, custom);
            tagged.addEntry("tagged".getBytes(StandardCharsets.US_ASCII));
            tagged.close();
            ids.add(tagged.getId());
            LedgerHandle empty = bk.createLedger(2, 2, 2, BookKeeper.DigestType.MAC, Ops.PASSWORD);
            empty.close();
            ids.add(empty.getId());
            LedgerHandle open = bk.createLedger(3, 3, 3, BookKeeper.DigestType.CRC32C, Ops.PASSWORD);
            for (int e = 0; e < 4; e++) {
                open.addEntry(("open-" + e).getBytes(StandardCharsets.US_ASCII));
            }
            ids.add(open.getId());
            long first = closed.getId();
            long doomed = tagged.getId();

            List<Call> calls = new ArrayList<>();
            // Any path that is no route, any method on a route but the four.
            calls.add(new Call("GET", "/api/v1/bookie/nope", null, EXACT));
            calls.add(new Call("GET", "/", null, EXACT));
            calls.add(new Call("HEAD", "/api/v1/bookie/state", null, EXACT));
            calls.add(new Call("PATCH", "/heartbeat", null, EXACT));
            // General.
            calls.add(new Call("GET", "/heartbeat", null, EXACT));
            calls.add(new Call("DELETE", "/heartbeat/", null, EXACT));
            calls.add(new Call("GET", "/api/v1/config/server_config", null,
                    both(200, "(?s)\\{\\n  \"[^\"]+\" : \".*\"\\n\\}")));
            calls.add(new Call("PUT", "/api/v1/config/server_config", null, EXACT));
            calls.add(new Call("POST", "/api/v1/config/server_config", "{}", EXACT));
            calls.add(new Call("PUT", "/api/v1/config/server_config", "{\"s17Key\":\"s17\"}", EXACT));
            // Java's answer needs a stats provider (the harness's Java bookie runs without one):
            // ours gives the Prometheus text, Java's the 500 it gives without one.
            calls.add(new Call("GET", "/metrics", null, (j, o) ->
                    o.status == 200 && o.body.contains("# TYPE bookie_SERVER_STATUS gauge")
                            && (j.status == 500 || j.status == 200) ? null : "not Prometheus text"));
            calls.add(new Call("PUT", "/metrics", null, EXACT));
            calls.add(new Call("POST", "/metrics", "x", EXACT));
            // Ledgers.
            calls.add(new Call("GET", "/api/v1/ledger/list", null, EXACT));
            calls.add(new Call("GET", "/api/v1/ledger/list?print_metadata=true", null, EXACT));
            calls.add(new Call("GET", "/api/v1/ledger/list?print_metadata=true&decode_meta=true", null, EXACT));
            calls.add(new Call("GET", "/api/v1/ledger/list?print_metadata=true&page=1", null, EXACT));
            calls.add(new Call("GET", "/api/v1/ledger/list?print_metadata=true&page=2", null, EXACT));
            calls.add(new Call("GET", "/api/v1/ledger/list?page=nope", null, EXACT));
            calls.add(new Call("PUT", "/api/v1/ledger/list", null, EXACT));
            for (long id : ids) {
                calls.add(new Call("GET", "/api/v1/ledger/metadata?ledger_id=" + id, null, EXACT));
                calls.add(new Call("GET", "/api/v1/ledger/read?ledger_id=" + id, null, EXACT));
            }
            calls.add(new Call("GET", "/api/v1/ledger/metadata?ledger_id=999999", null, EXACT));
            calls.add(new Call("GET", "/api/v1/ledger/metadata?ledger_id=x", null, EXACT));
            calls.add(new Call("GET", "/api/v1/ledger/metadata", null, EXACT));
            calls.add(new Call("DELETE", "/api/v1/ledger/metadata?ledger_id=" + first, null, EXACT));
            calls.add(new Call("GET", "/api/v1/ledger/read?ledger_id=" + first + "&start_entry_id=2&end_entry_id=4", null, EXACT));
            calls.add(new Call("GET", "/api/v1/ledger/read?ledger_id=" + first + "&start_entry_id=3", null, EXACT));
            calls.add(new Call("GET", "/api/v1/ledger/read?ledger_id=" + first + "&page=1", null, EXACT));
            calls.add(new Call("GET", "/api/v1/ledger/read?ledger_id=" + first + "&start_entry_id=5&end_entry_id=2", null, EXACT));
            calls.add(new Call("GET", "/api/v1/ledger/read?ledger_id=" + first + "&page=2&end_entry_id=3", null, EXACT));
            calls.add(new Call("GET", "/api/v1/ledger/read?ledger_id=999999", null, EXACT));
            calls.add(new Call("GET", "/api/v1/ledger/read", null, EXACT));
            calls.add(new Call("POST", "/api/v1/ledger/read?ledger_id=" + first, null, EXACT));
            calls.add(new Call("GET", "/api/v1/ledger/delete?ledger_id=" + doomed, null, EXACT));
            calls.add(new Call("DELETE", "/api/v1/ledger/delete", null, EXACT));
            calls.add(new Call("DELETE", "/api/v1/ledger/delete?ledger_id=x", null, EXACT));
            // Deleted on Java's first, then on ours (no longer there: success, as in Java).
            calls.add(new Call("DELETE", "/api/v1/ledger/delete?ledger_id=" + doomed, null, EXACT));
            calls.add(new Call("GET", "/api/v1/ledger/metadata?ledger_id=" + doomed, null, EXACT));
            calls.add(new Call("GET", "/api/v1/ledger/list", null, EXACT));
            // The cluster.
            calls.add(new Call("GET", "/api/v1/bookie/list_bookies", null, EXACT));
            calls.add(new Call("GET", "/api/v1/bookie/list_bookies?type=ro", null, EXACT));
            calls.add(new Call("GET", "/api/v1/bookie/list_bookies?print_hostnames=true", null, EXACT));
            calls.add(new Call("POST", "/api/v1/bookie/list_bookies", null, EXACT));
            calls.add(new Call("GET", "/api/v1/bookie/list_bookie_info", null, masked(NUMBERS)));
            calls.add(new Call("PUT", "/api/v1/bookie/list_bookie_info", null, EXACT));
            calls.add(new Call("GET", "/api/v1/bookie/cluster_info", null, EXACT));
            calls.add(new Call("PUT", "/api/v1/bookie/cluster_info", null, EXACT));
            // This bookie's disks.
            calls.add(new Call("GET", "/api/v1/bookie/last_log_mark", null,
                    both(200, "\\{\\n(  \"LastLogMark: Journal Id - \\d+\\([0-9a-f]+\\.(txn|jrnl)\\)\" : \"Pos - \\d+\"(,\\n)?)+\\n\\}")));
            calls.add(new Call("PUT", "/api/v1/bookie/last_log_mark", null, EXACT));
            // File names, each followed by a tab (escaped in the JSON string: backslash t).
            String names = "([^\"\\\\]+\\\\t)";
            calls.add(new Call("GET", "/api/v1/bookie/list_disk_file", null, both(200,
                    "\\{\\n  \"index files\" : \"" + names + "*\",\\n  \"journal files\" : \"" + names + "+\",\\n"
                            + "  \"entrylog files\" : \"" + names + "*\"\\n\\}")));
            calls.add(new Call("GET", "/api/v1/bookie/list_disk_file?file_type=journal", null,
                    both(200, "\\{\\n  \"journal files\" : \"" + names + "+\"\\n\\}")));
            calls.add(new Call("DELETE", "/api/v1/bookie/list_disk_file", null, EXACT));
            calls.add(new Call("PUT", "/api/v1/bookie/expand_storage", null, EXACT));
            calls.add(new Call("GET", "/api/v1/bookie/expand_storage", null, EXACT));
            calls.add(new Call("GET", "/api/v1/bookie/entry_location_compact", null,
                    both(200, "\\{ \\}|\\{\\n(  \"[^\"]+\" : (true|false)(,\\n)?)+\\n\\}")));
            calls.add(new Call("PUT", "/api/v1/bookie/entry_location_compact", null, EXACT));
            calls.add(new Call("PUT", "/api/v1/bookie/entry_location_compact", "nope", EXACT));
            calls.add(new Call("PUT", "/api/v1/bookie/entry_location_compact", "{}", EXACT));
            calls.add(new Call("PUT", "/api/v1/bookie/entry_location_compact", "{\"entryLocationRocksDBCompact\":true}", EXACT));
            calls.add(new Call("PUT", "/api/v1/bookie/entry_location_compact",
                    "{\"entryLocationRocksDBCompact\":true,\"entryLocations\":\"/nowhere\"}",
                    both(400, "\"Specified trigger compact entryLocations: /nowhere is invalid\\. "
                            + "Bookie entry location RocksDB path: \\[.*\\]\\.\"")));
            calls.add(new Call("PUT", "/api/v1/bookie/entry_location_compact", "{\"entryLocationRocksDBCompact\":\"true\"}", EXACT));
            calls.add(new Call("POST", "/api/v1/bookie/entry_location_compact", null, EXACT));
            // Garbage collection.
            calls.add(new Call("GET", "/api/v1/bookie/gc", null, EXACT));
            calls.add(new Call("PUT", "/api/v1/bookie/gc", null, EXACT));
            calls.add(new Call("PUT", "/api/v1/bookie/gc", "{\"forceMajor\":\"true\",\"forceMinor\":false}", EXACT));
            calls.add(new Call("PUT", "/api/v1/bookie/gc", "not json", EXACT));
            calls.add(new Call("POST", "/api/v1/bookie/gc", null, EXACT));
            calls.add(new Call("GET", "/api/v1/bookie/gc_details", null, masked(s -> NUMBERS.apply(s)
                    .replaceAll("(?s)\\} \\]$", "}").replaceAll("(?s)^\\[ (\\{.*?\\})(, \\{.*)?$", "$1")
                    .replaceAll("(true|false)", "B"))));
            calls.add(new Call("PUT", "/api/v1/bookie/gc_details", null, EXACT));
            calls.add(new Call("GET", "/api/v1/bookie/gc/suspend_compaction", null, EXACT));
            calls.add(new Call("PUT", "/api/v1/bookie/gc/suspend_compaction", null, EXACT));
            calls.add(new Call("PUT", "/api/v1/bookie/gc/suspend_compaction", "{}", EXACT));
            calls.add(new Call("PUT", "/api/v1/bookie/gc/suspend_compaction", "{\"suspendMajor\":\"true\"}", EXACT));
            calls.add(new Call("PUT", "/api/v1/bookie/gc/suspend_compaction", "{\"suspendMinor\":true}", EXACT));
            calls.add(new Call("GET", "/api/v1/bookie/gc/suspend_compaction", null, EXACT));
            calls.add(new Call("PUT", "/api/v1/bookie/gc/suspend_compaction", "{\"suspendMajor\":true,\"suspendMinor\":false}", EXACT));
            calls.add(new Call("GET", "/api/v1/bookie/gc/suspend_compaction", null, EXACT));
            calls.add(new Call("POST", "/api/v1/bookie/gc/suspend_compaction", null, EXACT));
            calls.add(new Call("PUT", "/api/v1/bookie/gc/resume_compaction", "{\"resumeMajor\":true,\"resumeMinor\":true}", EXACT));
            calls.add(new Call("PUT", "/api/v1/bookie/gc/resume_compaction", "{\"other\":1}", EXACT));
            calls.add(new Call("GET", "/api/v1/bookie/gc/resume_compaction", null, EXACT));
            calls.add(new Call("GET", "/api/v1/bookie/gc/suspend_compaction", null, EXACT));
            // State.
            calls.add(new Call("GET", "/api/v1/bookie/state", null, EXACT));
            calls.add(new Call("PUT", "/api/v1/bookie/state", null, EXACT));
            calls.add(new Call("GET", "/api/v1/bookie/is_ready", null, EXACT));
            calls.add(new Call("POST", "/api/v1/bookie/is_ready", null, EXACT));
            calls.add(new Call("GET", "/api/v1/bookie/info", null, masked(NUMBERS)));
            calls.add(new Call("DELETE", "/api/v1/bookie/info", null, EXACT));
            calls.add(new Call("GET", "/api/v1/bookie/sanity", null, EXACT));
            calls.add(new Call("PUT", "/api/v1/bookie/sanity", null, EXACT));
            calls.add(new Call("GET", "/api/v1/bookie/state/readonly", null, EXACT));
            calls.add(new Call("PUT", "/api/v1/bookie/state/readonly", "{\"readOnly\":false}", EXACT));
            calls.add(new Call("PUT", "/api/v1/bookie/state/readonly", "{\"readOnly\":true,\"x\":1}", EXACT));
            calls.add(new Call("PUT", "/api/v1/bookie/state/readonly", "", EXACT));
            calls.add(new Call("DELETE", "/api/v1/bookie/state/readonly", null, EXACT));
            calls.add(new Call("PUT", "/api/v1/bookie/state/readonly", "{\"readOnly\":true}", EXACT));
            calls.add(new Call("GET", "/api/v1/bookie/state", null, EXACT));
            calls.add(new Call("GET", "/api/v1/bookie/sanity", null, EXACT));
            calls.add(new Call("PUT", "/api/v1/bookie/state/readonly", "{\"readOnly\":false}", EXACT));
            // Autorecovery (no auditor runs in this cluster).
            calls.add(new Call("GET", "/api/v1/autorecovery/status", null, EXACT));
            calls.add(new Call("PUT", "/api/v1/autorecovery/status", null, EXACT));
            calls.add(new Call("POST", "/api/v1/autorecovery/status", null, EXACT));
            calls.add(new Call("GET", "/api/v1/autorecovery/who_is_auditor", null, EXACT));
            calls.add(new Call("GET", "/api/v1/autorecovery/list_under_replicated_ledger", null, EXACT));
            calls.add(new Call("PUT", "/api/v1/autorecovery/trigger_audit", null, EXACT));
            calls.add(new Call("GET", "/api/v1/autorecovery/lost_bookie_recovery_delay", null, EXACT));
            calls.add(new Call("PUT", "/api/v1/autorecovery/lost_bookie_recovery_delay", null, EXACT));
            calls.add(new Call("PUT", "/api/v1/autorecovery/lost_bookie_recovery_delay", "{\"x\":1}", EXACT));
            calls.add(new Call("GET", "/api/v1/autorecovery/bookie", null, EXACT));
            calls.add(new Call("PUT", "/api/v1/autorecovery/bookie", "{\"bookie_src\":[]}", EXACT));
            calls.add(new Call("PUT", "/api/v1/autorecovery/bookie", "{\"bookie_dest\":[]}", EXACT));
            calls.add(new Call("PUT", "/api/v1/autorecovery/decommission", null, EXACT));
            calls.add(new Call("PUT", "/api/v1/autorecovery/decommission", "{\"x\":\"y\"}", EXACT));
            calls.add(new Call("GET", "/api/v1/autorecovery/decommission", null, EXACT));

            List<String> differences = new ArrayList<>();
            int alike = 0;
            for (Call call : calls) {
                Answer j = send(java, call);
                Answer o = send(ours, call);
                String why = call.how.check(j, o);
                if (why == null) {
                    alike++;
                } else {
                    differences.add(call + ": " + why + "\n    java: " + j + "\n    ours: " + o);
                }
            }
            Cluster.log("S17: " + alike + " of " + calls.size() + " calls answered alike");
            assertEquals("", String.join("\n", differences), differences.size() + " calls answered differently");
            assertTrue(c.admin().getLedgerMetadata(c.admin().openLedgerNoRecovery(first)) != null);
            open.close();
            bk.close();
        }
    }

    /** One request over a new connection, as curl would send it; the bookie's own id masked. */
    static Answer send(Bookie b, Call call) throws IOException {
        StringBuilder head = new StringBuilder();
        head.append(call.method).append(' ').append(call.path).append(" HTTP/1.1\r\n")
                .append("Host: 127.0.0.1:").append(b.httpPort).append("\r\n")
                .append("Connection: close\r\n");
        byte[] body = call.body == null ? null : call.body.getBytes(StandardCharsets.UTF_8);
        if (body != null) {
            head.append("Content-Type: application/json\r\n").append("Content-Length: ").append(body.length).append("\r\n");
        }
        head.append("\r\n");
        try (Socket s = new Socket("127.0.0.1", b.httpPort)) {
            s.setSoTimeout(90_000);
            OutputStream out = s.getOutputStream();
            out.write(head.toString().getBytes(StandardCharsets.US_ASCII));
            if (body != null) {
                out.write(body);
            }
            out.flush();
            Answer a = read(s.getInputStream(), call.method.equals("HEAD"));
            // Where an answer names the bookie that gives it (not where it lists the cluster).
            String self = b.id();
            String masked = a.body.replace("BookieServer: Bookie Server listening on " + self + " with id " + self,
                            "BookieServer: SELF")
                    .replace("BookieServer: " + self, "BookieServer: SELF")
                    .replace("on bookie:" + self, "on bookie:SELF");
            return new Answer(a.status, a.contentType, masked);
        }
    }

    /** An HTTP/1.1 response: status, content type, and the body (Content-Length, chunked or to EOF). */
    static Answer read(InputStream in, boolean head) throws IOException {
        String statusLine = line(in);
        int status = Integer.parseInt(statusLine.split(" ")[1]);
        Map<String, String> headers = new HashMap<>();
        for (String l = line(in); !l.isEmpty(); l = line(in)) {
            int i = l.indexOf(':');
            headers.put(l.substring(0, i).trim().toLowerCase(Locale.ROOT), l.substring(i + 1).trim());
        }
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        if (head) {
            // no body
        } else if (headers.containsKey("content-length")) {
            body.write(in.readNBytes(Integer.parseInt(headers.get("content-length"))));
        } else if ("chunked".equalsIgnoreCase(headers.get("transfer-encoding"))) {
            for (int n = Integer.parseInt(line(in).split(";")[0].trim(), 16); n > 0;
                    n = Integer.parseInt(line(in).split(";")[0].trim(), 16)) {
                body.write(in.readNBytes(n));
                line(in);
            }
        } else {
            body.write(in.readAllBytes());
        }
        return new Answer(status, headers.get("content-type"), body.toString(StandardCharsets.UTF_8));
    }

    static String line(InputStream in) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        for (int c = in.read(); c != -1 && c != '\n'; c = in.read()) {
            if (c != '\r') {
                b.write(c);
            }
        }
        return b.toString(StandardCharsets.US_ASCII);
    }

    /** The comparisons themselves compare. */
    @Test
    void comparisonsSeeDifferences() {
        Answer a = new Answer(200, null, "{\n  \"freeSpace\" : 12,\n  \"totalSpace\" : 34\n}");
        Answer b = new Answer(200, null, "{\n  \"freeSpace\" : 56,\n  \"totalSpace\" : 78\n}");
        assertNull(masked(NUMBERS).check(a, b));
        assertTrue(EXACT.check(a, b) != null);
        assertTrue(masked(NUMBERS).check(a, new Answer(404, null, a.body)) != null);
        assertNull(both(200, "\\{.*").check(new Answer(200, null, "{x"), new Answer(200, null, "{y")));
        assertTrue(both(200, "\\{.*").check(new Answer(200, null, "{x"), new Answer(500, null, "{y")) != null);
    }
}
