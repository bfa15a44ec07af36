package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.bookkeeper.conf.ServerConfiguration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * S16 (issue 44): our reading of a bk_server.conf against Java's own, file by file. Each file of
 * a corpus (every rule of docs/config-keys.md §1: separators, trimming, comments, continuations,
 * escapes, lists, keys given twice, interpolation, ISO-8859-1 bytes, a byte-order mark, includes,
 * line endings, a malformed escape) and every stock file is loaded by the real
 * ServerConfiguration.loadConf of the harness's client line (4.18.2: commons-configuration2) and
 * by `bookie conf-view`; for every key, getStringArray's elements (or the getter's exception) must
 * be ours, and a file Java cannot load must be one we refuse.
 */
@Tag("smoke")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class S16ConfReadingTest {

    private static final ObjectMapper JSON = new ObjectMapper();

    static Map<String, byte[]> corpus() throws Exception {
        Map<String, byte[]> c = new LinkedHashMap<>();
        put(c, "basics", "sep1=v1\nsep2:v2\nsep3 v3\nsep4    v4 more\n  sp = value with spaces   \n"
                + "tabs\t=\ttabbed\t\nff\fformfeed\nemptyeq=\nemptycolon:\nkeyonly\n=novalue\n"
                + "# comment\n! bang comment\n   # indented\n\ninline=v # not a comment\neqcolon=a:b=c\neqeq==x\n"
                + "CaseKey=upper\ncasekey=lower\n");
        put(c, "continuations", "cont=abc\\\n    def\\\n  ghi\ncont_even=abc\\\\\nnext=1\n"
                + "c1=x\\\n# comment inside\n\nafterc1=1\nesc=trail\\ \nswallowed=2\nlast=ok\n");
        put(c, "escapes", "t=a\\tb\nn=a\\nb\nu=\\u0041\\u00e9\nq=a\\qb\nlead=\\ lead\nbs=a\\\\b\nbs4=a\\\\\\\\b\n"
                + "hash=\\#x\neq=a\\=b\ncolon=a\\:b\nquotes=\\\"q\\'\nk\\=ey=v1\nkey\\ with\\ space=v2\n"
                + "key\\u0041uni=v3\nkeytrail\\ =v4\nshortu=\\u00\n");
        put(c, "lists", "l1=a,b,c\nl2= a , b ,c \nl3=a,,b\nl4=a,\nl5=,a\nl6=,\nl7=a;b c\nl8=a\\,b\n"
                + "l9=a\\\\\\\\\\,b\nl10=a\\\\\\\\\\\\,b\nl11=a\\ ,b\ndirs=/d1, /d2,,/d3\n");
        put(c, "duplicates", "dup=first\ndup=second\ndup=third\nd1=\nd1=5\nd2=5\nd2=\nport=3181\nport=4181\n");
        put(c, "interpolation", "base=/srv/bk\ndirs=${base}/l1,${base}/l2\nnested=${dirs}\nlist1=a,b,c\n"
                + "whole=${list1}\npart=p/${list1}\nunknown=${nope}\nhome=${env:HOME}/x\nsys=${sys:user.home}\n"
                + "escaped=$${base}\nforward=${later}\nlater=defined-after\nloop=${loop}\nmissingenv=${env:NO_SUCH_VAR_S16}\n");
        ByteArrayOutputStream latin = new ByteArrayOutputStream();
        latin.write("utf8=caf".getBytes(StandardCharsets.ISO_8859_1));
        latin.write(new byte[] {(byte) 0xc3, (byte) 0xa9, '\n'});
        latin.write("latin1=caf".getBytes(StandardCharsets.ISO_8859_1));
        latin.write(new byte[] {(byte) 0xe9, '\n'});
        c.put("latin1", latin.toByteArray());
        ByteArrayOutputStream bom = new ByteArrayOutputStream();
        bom.write(new byte[] {(byte) 0xef, (byte) 0xbb, (byte) 0xbf});
        bom.write("bookiePort=1234\nzkTimeout=5000\n".getBytes(StandardCharsets.ISO_8859_1));
        c.put("bom", bom.toByteArray());
        put(c, "line-endings", "crlf=1\r\ncr=2\rlf=3\nnofinal=4");
        put(c, "open-continuation-at-end", "a=1\nb=x\\");
        put(c, "bad-unicode", "a=\\u00G1\n");
        put(c, "include", "top=1\ninclude=included.conf\nincludeoptional=missing-optional.conf\nafter=3\n");
        put(c, "include-missing", "include=no-such-file.conf\n");
        for (String v : StockConfs.BOOKKEEPER) {
            c.put("bk_server-" + v, Files.readAllBytes(StockConfs.fixture("bk_server-" + v + ".keys")));
        }
        for (String v : StockConfs.PULSAR) {
            c.put("pulsar-bookkeeper-" + v, Files.readAllBytes(StockConfs.pulsarConf(v)));
        }
        return c;
    }

    private static void put(Map<String, byte[]> c, String name, String text) {
        c.put(name, text.getBytes(StandardCharsets.ISO_8859_1));
    }

    /** Java's reading: key to getStringArray's elements (or "error"); null if the load fails. */
    static Map<String, List<String>> javaView(Path file) {
        ServerConfiguration conf = new ServerConfiguration();
        try {
            conf.loadConf(file.toUri().toURL());
        } catch (Exception e) {
            return null;
        }
        Map<String, List<String>> out = new TreeMap<>();
        for (Iterator<String> it = conf.getKeys(); it.hasNext(); ) {
            String k = it.next();
            try {
                out.put(k, List.of(conf.getStringArray(k)));
            } catch (Exception e) {
                out.put(k, List.of("<error>"));
            }
        }
        return out;
    }

    /** Ours: `bookie conf-view`; null if it refuses the file. */
    static Map<String, List<String>> ourView(Path file) throws Exception {
        ProcessBuilder pb = new ProcessBuilder(Settings.bookieBin().toString(), "conf-view", "--conf", file.toString());
        pb.redirectError(ProcessBuilder.Redirect.DISCARD);
        Process p = pb.start();
        byte[] out = p.getInputStream().readAllBytes();
        if (p.waitFor() != 0) {
            return null;
        }
        Map<String, List<String>> view = new TreeMap<>();
        JsonNode root = JSON.readTree(out);
        for (Iterator<Map.Entry<String, JsonNode>> it = root.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            List<String> elements = new ArrayList<>();
            if (e.getValue().isObject()) {
                elements.add("<error>");
            } else {
                e.getValue().forEach(n -> elements.add(n.asText()));
            }
            view.put(e.getKey(), elements);
        }
        return view;
    }

    @Test
    void ourReadingIsJavas() throws Exception {
        Path dir = Settings.targetDir().resolve("runs").resolve("s16-" + System.nanoTime());
        Files.createDirectories(dir);
        Files.writeString(dir.resolve("included.conf"), "inc=2\ntop=from-include\n");
        List<String> differences = new ArrayList<>();
        int keys = 0;
        for (Map.Entry<String, byte[]> f : corpus().entrySet()) {
            Path file = dir.resolve(f.getKey() + ".conf");
            Files.write(file, f.getValue());
            Map<String, List<String>> java = javaView(file);
            Map<String, List<String>> ours = ourView(file);
            if (java == null || ours == null) {
                if ((java == null) != (ours == null)) {
                    differences.add(f.getKey() + ": Java " + (java == null ? "refuses" : "loads")
                            + " the file, ours " + (ours == null ? "refuses" : "loads") + " it");
                }
                continue;
            }
            keys += java.size();
            if (!java.equals(ours)) {
                for (String k : java.keySet()) {
                    if (!java.get(k).equals(ours.get(k))) {
                        differences.add(f.getKey() + ": " + k + ": Java " + java.get(k) + ", ours " + ours.get(k));
                    }
                }
                for (String k : ours.keySet()) {
                    if (!java.containsKey(k)) {
                        differences.add(f.getKey() + ": " + k + ": only ours, " + ours.get(k));
                    }
                }
            }
        }
        Cluster.log("S16: " + corpus().size() + " files, " + keys + " keys read alike by Java and by ours");
        assertTrue(differences.isEmpty(), "readings differ:\n  " + String.join("\n  ", differences));
        assertTrue(keys > 300, "the corpus was read: " + keys + " keys");
        assertEquals(null, javaView(dir.resolve("include-missing.conf")), "Java refuses a missing include");
    }
}
