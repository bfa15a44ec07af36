package dev.rustbookie.interop;

import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.GZIPInputStream;
import java.util.zip.ZipEntry;
import java.util.zip.ZipInputStream;

/**
 * The configuration files operators run, taken from the release artifacts on Maven Central at
 * test time (cached under ~/.cache/bookie-interop/stock, or INTEROP_STOCK_CACHE): Pulsar's
 * conf/bookkeeper.conf from the 3.3.6 and 4.0.8 binary distributions (streamed: the file is near
 * the start of the tarball) and from the 3.0.7 source release (no 3.0.x tarball is published
 * there), and the Pulsar image's apply-config-from-env.py from the 4.0.8 source release. Also the
 * key-line fixtures of bookie/tests/stock-conf/ (BookKeeper publishes no distribution there) and
 * the Helm chart's rendered bookie environment and scripts kept beside them.
 */
public final class StockConfs {
    private StockConfs() {}

    public static final String[] BOOKKEEPER = {"4.14.7", "4.15.5", "4.16.7", "4.17.4", "4.18.0"};
    public static final String[] PULSAR = {"3.0.7", "3.3.6", "4.0.8"};

    private static final String CENTRAL = System.getenv().getOrDefault("MAVEN_CENTRAL_URL",
            "https://repo.maven.apache.org/maven2");
    private static final HttpClient HTTP = HttpClient.newBuilder()
            .connectTimeout(Duration.ofSeconds(20)).followRedirects(HttpClient.Redirect.NORMAL).build();

    public static Path cacheDir() throws IOException {
        String env = System.getenv("INTEROP_STOCK_CACHE");
        Path d = env != null && !env.isBlank() ? Paths.get(env)
                : Paths.get(System.getProperty("user.home"), ".cache", "bookie-interop", "stock");
        Files.createDirectories(d);
        return d;
    }

    /** bookie/tests/stock-conf/NAME. */
    public static Path fixture(String name) {
        return Settings.interopDir().resolve("../bookie/tests/stock-conf").resolve(name).normalize();
    }

    /** Pulsar VERSION's conf/bookkeeper.conf as its release ships it. */
    public static Path pulsarConf(String version) throws IOException, InterruptedException {
        Path cached = cacheDir().resolve("pulsar-" + version + "-bookkeeper.conf");
        if (Files.exists(cached)) {
            return cached;
        }
        if (version.startsWith("3.0.")) {
            return fromSourceRelease(version, "pulsar/conf/bookkeeper.conf", cached);
        }
        String url = CENTRAL + "/org/apache/pulsar/pulsar-server-distribution/" + version
                + "/pulsar-server-distribution-" + version + "-bin.tar.gz";
        byte[] data = tarMember(url, "apache-pulsar-" + version + "/conf/bookkeeper.conf");
        return store(cached, data, url);
    }

    /** The Pulsar image's docker/pulsar/scripts/apply-config-from-env.py of release VERSION. */
    public static Path pulsarApplyConfigScript(String version) throws IOException, InterruptedException {
        Path cached = cacheDir().resolve("pulsar-" + version + "-apply-config-from-env.py");
        if (Files.exists(cached)) {
            return cached;
        }
        return fromSourceRelease(version, "pulsar/docker/pulsar/scripts/apply-config-from-env.py", cached);
    }

    private static Path fromSourceRelease(String version, String member, Path cached)
            throws IOException, InterruptedException {
        String url = CENTRAL + "/org/apache/pulsar/pulsar/" + version + "/pulsar-" + version
                + "-source-release.zip";
        try (InputStream in = open(url); ZipInputStream zip = new ZipInputStream(in)) {
            for (ZipEntry e; (e = zip.getNextEntry()) != null; ) {
                if (e.getName().equals(member)) {
                    return store(cached, zip.readAllBytes(), url);
                }
            }
        }
        throw new IOException(member + " not found in " + url);
    }

    private static Path store(Path cached, byte[] data, String url) throws IOException {
        Path tmp = cached.resolveSibling(cached.getFileName() + ".part");
        Files.write(tmp, data);
        Files.move(tmp, cached, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        Cluster.log("stock file " + cached.getFileName() + " (" + data.length + " bytes) from " + url);
        return cached;
    }

    private static InputStream open(String url) throws IOException, InterruptedException {
        HttpResponse<InputStream> r = HTTP.send(HttpRequest.newBuilder(URI.create(url))
                .timeout(Duration.ofMinutes(5)).build(), HttpResponse.BodyHandlers.ofInputStream());
        if (r.statusCode() != 200) {
            r.body().close();
            throw new IOException("GET " + url + ": HTTP " + r.statusCode()
                    + " (the stock files are taken from the release artifacts at test time)");
        }
        return r.body();
    }

    /** One member of a .tar.gz, read until found (the rest is not downloaded). */
    private static byte[] tarMember(String url, String member) throws IOException, InterruptedException {
        try (InputStream raw = open(url); InputStream in = new GZIPInputStream(raw, 1 << 16)) {
            byte[] header = new byte[512];
            while (true) {
                if (in.readNBytes(header, 0, 512) < 512 || header[0] == 0) {
                    break;
                }
                String name = cstr(header, 0, 100);
                String prefix = cstr(header, 345, 155);
                if (!prefix.isEmpty()) {
                    name = prefix + "/" + name;
                }
                long size = Long.parseLong(cstr(header, 124, 12).trim(), 8);
                long padded = (size + 511) / 512 * 512;
                if (name.equals(member)) {
                    byte[] data = in.readNBytes((int) size);
                    if (data.length != size) {
                        throw new IOException(member + ": short read");
                    }
                    return data;
                }
                in.skipNBytes(padded);
            }
        }
        throw new IOException(member + " not found in " + url);
    }

    private static String cstr(byte[] b, int off, int len) {
        int end = off;
        while (end < off + len && b[end] != 0) {
            end++;
        }
        return new String(b, off, end - off, StandardCharsets.ISO_8859_1);
    }

    /**
     * A file's key lines, as the fixtures hold them: every line that is not blank and does not
     * start (after blanks) with # or !, as written, each ending in a newline.
     */
    public static String keyLines(String text) {
        StringBuilder sb = new StringBuilder();
        for (String line : text.split("\r\n|\r|\n", -1)) {
            String t = line.strip();
            if (t.isEmpty() || t.startsWith("#") || t.startsWith("!")) {
                continue;
            }
            sb.append(line).append('\n');
        }
        return sb.toString();
    }

    /**
     * What an operator edits in a stock file: each key's first active line gets the new value;
     * a key the file does not set is added at the end. Comments and every other line stay.
     */
    public static String edit(String text, Map<String, String> edits) {
        List<String> lines = new ArrayList<>(List.of(text.split("\n", -1)));
        if (!lines.isEmpty() && lines.get(lines.size() - 1).isEmpty()) {
            lines.remove(lines.size() - 1);
        }
        Map<String, String> left = new LinkedHashMap<>(edits);
        for (int i = 0; i < lines.size(); i++) {
            String l = lines.get(i);
            int eq = l.indexOf('=');
            if (eq <= 0 || l.startsWith("#") || l.startsWith("!")) {
                continue;
            }
            String k = l.substring(0, eq).strip();
            if (left.containsKey(k)) {
                lines.set(i, k + "=" + left.remove(k));
            }
        }
        left.forEach((k, v) -> lines.add(k + "=" + v));
        return String.join("\n", lines) + "\n";
    }

    /**
     * The host of a Java bookie's id with no advertisedAddress or listeningInterface, as
     * BookieImpl.getBookieAddress computes it: DNS.getDefaultHost("default") (the local host's
     * canonical name), resolved; with useHostNameAsBookieID, that address's canonical name.
     */
    public static String javaDefaultHost(boolean useHostName) throws IOException {
        String canonical = java.net.InetAddress.getLocalHost().getCanonicalHostName();
        java.net.InetAddress a = java.net.InetAddress.getByName(canonical);
        return useHostName ? a.getCanonicalHostName() : a.getHostAddress();
    }

    /** Whether that address is a loopback one (Java then needs allowLoopback=true). */
    public static boolean javaDefaultHostIsLoopback() throws IOException {
        return java.net.InetAddress.getByName(javaDefaultHost(false)).isLoopbackAddress();
    }

    /** KEY=VALUE lines (the chart's rendered ConfigMap). */
    public static Map<String, String> envFile(Path p) throws IOException {
        Map<String, String> out = new LinkedHashMap<>();
        for (String line : Files.readAllLines(p, StandardCharsets.UTF_8)) {
            int eq = line.indexOf('=');
            if (eq > 0) {
                out.put(line.substring(0, eq), line.substring(eq + 1));
            }
        }
        return out;
    }
}
