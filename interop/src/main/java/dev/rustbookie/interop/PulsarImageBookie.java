package dev.rustbookie.interop;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * Our bookie started as the Pulsar Helm chart starts one, with our image (deploy/pulsar/) in
 * place of Pulsar's: a file tree laid out as the image's /pulsar (conf/bookkeeper.conf as the
 * Pulsar release ships it, bin/ from deploy/pulsar/bin, data/), the environment the chart's
 * default values render (bookie/tests/stock-conf/helm-pulsar-CHART-bookie.env) edited only in the
 * metadata service, the directories (the chart's /pulsar/... become this tree's) and the ports,
 * and the chart's own container script (`sh -c`, from /pulsar): apply-config-from-env.py, then
 * `exec bin/pulsar bookie`. Each launch starts from the image's pristine file, as a container does.
 */
public final class PulsarImageBookie extends Bookie {
    public final String pulsarVersion;
    public final String chart;
    /** The chart's component: "bookie", or "recovery" (its autorecovery StatefulSet, same image). */
    public final String component;
    public final Path tree;
    private final Path binDir;

    public PulsarImageBookie(Cluster cluster, String pulsarVersion, String chart) {
        this(cluster, pulsarVersion, chart, "bookie");
    }

    public PulsarImageBookie(Cluster cluster, String pulsarVersion, String chart, String component) {
        super(cluster, "pulsar-" + pulsarVersion + "-chart-" + chart + (component.equals("bookie") ? "" : "-" + component));
        this.pulsarVersion = pulsarVersion;
        this.chart = chart;
        this.component = component;
        this.tree = dir.resolve("pulsar");
        this.binDir = dir.resolve("path");
    }

    @Override
    public boolean isJava() {
        return false;
    }

    /** The chart's rendered environment, edited: metadata service, directories, ports. */
    public Map<String, String> chartEnv() throws IOException {
        Map<String, String> env = new LinkedHashMap<>(
                StockConfs.envFile(StockConfs.fixture("helm-pulsar-" + chart + "-" + component + ".env")));
        String zk = cluster.zk.servers();
        env.replaceAll((k, v) -> {
            if (k.equals("metadataServiceUri")) {
                return v.replace("pulsar-zookeeper:2181", zk);
            }
            if (k.equals("zkServers") && !v.isEmpty()) {
                return zk;
            }
            if (v.startsWith("/pulsar/")) {
                return tree.resolve(v.substring("/pulsar/".length())).toString();
            }
            return v;
        });
        env.put("httpServerPort", Integer.toString(httpPort));
        env.put("bookiePort", Integer.toString(port));
        if (StockConfs.javaDefaultHostIsLoopback()) {
            env.put("allowLoopback", "true");
        }
        return env;
    }

    /** The chart's container script of this component (4.4.0's is 4.7.0's). */
    public String containerScript() throws IOException {
        String c = chart.equals("4.4.0") ? "4.7.0" : chart;
        return Files.readString(StockConfs.fixture("helm-pulsar-" + c + "-" + component + "-args.sh"));
    }

    /** The chart's bookie init container script (the same in every chart version checked). */
    public static String initScript() throws IOException {
        return Files.readString(StockConfs.fixture("helm-pulsar-4.7.0-bookie-init-args.sh"));
    }

    /** The chart's recovery init container script. */
    public static String recoveryInitScript() throws IOException {
        return Files.readString(StockConfs.fixture("helm-pulsar-4.7.0-recovery-init-args.sh"));
    }

    /**
     * Starts a shell script from the tree with this component's environment, in the background
     * (pid file under the run, so the harness stops it); output to logs/NAME.log.
     */
    public Process startScript(String script) throws IOException {
        ProcessBuilder pb = new ProcessBuilder("sh", "-c", script);
        pb.directory(tree.toFile());
        environment(pb.environment());
        return Procs.start(pb, log(), cluster.runDir.resolve("pids").resolve(name + ".pid"));
    }

    /** Lays out the image's tree: a pristine conf/bookkeeper.conf, bin/, data/. */
    @Override
    public void prepare() throws IOException {
        try {
            Files.createDirectories(tree.resolve("conf"));
            Files.copy(StockConfs.pulsarConf(pulsarVersion), tree.resolve("conf/bookkeeper.conf"),
                    StandardCopyOption.REPLACE_EXISTING);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException(e);
        }
        Path bin = tree.resolve("bin");
        Files.createDirectories(bin);
        Path src = Settings.interopDir().resolve("../deploy/pulsar/bin").normalize();
        try (Stream<Path> s = Files.list(src)) {
            for (Path p : (Iterable<Path>) s::iterator) {
                Path to = bin.resolve(p.getFileName());
                Files.copy(p, to, StandardCopyOption.REPLACE_EXISTING);
                to.toFile().setExecutable(true);
            }
        }
        Files.createDirectories(tree.resolve("data"));
        Files.createDirectories(tree.resolve("logs"));
        // the image has the bookie on PATH
        Files.createDirectories(binDir);
        Path link = binDir.resolve("bookie");
        Files.deleteIfExists(link);
        Files.createSymbolicLink(link, Settings.bookieBin());
    }

    @Override
    protected String confText() {
        return null;
    }

    @Override
    protected Path workDir() {
        return tree;
    }

    @Override
    protected void environment(Map<String, String> env) throws IOException {
        env.putAll(chartEnv());
        env.put("PATH", binDir + ":" + env.getOrDefault("PATH", "/usr/bin:/bin"));
    }

    @Override
    protected List<String> command() throws IOException {
        return List.of("sh", "-c", containerScript());
    }

    /** Runs a shell script from the tree with this bookie's environment; returns its exit code. */
    public int runScript(String script, long timeoutSeconds, Path output) throws IOException, InterruptedException {
        ProcessBuilder pb = new ProcessBuilder("timeout", Long.toString(timeoutSeconds), "sh", "-c", script);
        pb.directory(tree.toFile());
        environment(pb.environment());
        pb.redirectErrorStream(true);
        pb.redirectOutput(output.toFile());
        return pb.start().waitFor();
    }

    /**
     * The same chart script run in a second tree whose bin/apply-config-from-env.py is Pulsar's
     * own (Python, from the release) and whose bin/pulsar does nothing: the file Pulsar's image
     * would hand to a Java bookie, for comparison with ours.
     */
    public Path pulsarsOwnRewrite(Path script) throws IOException, InterruptedException {
        Path other = dir.resolve("pulsar-image");
        Files.createDirectories(other.resolve("conf"));
        Files.createDirectories(other.resolve("bin"));
        Files.copy(StockConfs.pulsarConf(pulsarVersion), other.resolve("conf/bookkeeper.conf"),
                StandardCopyOption.REPLACE_EXISTING);
        Path py = other.resolve("bin/apply-config-from-env.py");
        Files.copy(script, py, StandardCopyOption.REPLACE_EXISTING);
        py.toFile().setExecutable(true);
        Path pulsar = other.resolve("bin/pulsar");
        Files.writeString(pulsar, "#!/bin/sh\nexit 0\n");
        pulsar.toFile().setExecutable(true);
        ProcessBuilder pb = new ProcessBuilder("sh", "-c", containerScript());
        pb.directory(other.toFile());
        environment(pb.environment());
        pb.redirectErrorStream(true);
        Path out = dir.resolve("pulsar-image.out");
        pb.redirectOutput(out.toFile());
        int rc = pb.start().waitFor();
        if (rc != 0) {
            throw new IOException("Pulsar's script exited " + rc + ": " + Files.readString(out));
        }
        return other.resolve("conf/bookkeeper.conf");
    }

    /** The lines apply-config-from-env printed (ours: in the bookie's log). */
    public static List<String> applyLines(String text) {
        return text.lines().filter(l -> l.startsWith("[conf/bookkeeper.conf] ")).toList();
    }

    @Override
    public String id() {
        try {
            return StockConfs.javaDefaultHost(true) + ":" + port;
        } catch (IOException e) {
            throw new IllegalStateException("cannot resolve this host's name", e);
        }
    }

    public String confNow() throws IOException {
        return Files.readString(tree.resolve("conf/bookkeeper.conf"), StandardCharsets.ISO_8859_1);
    }
}
