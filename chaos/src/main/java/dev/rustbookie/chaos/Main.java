package dev.rustbookie.chaos;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.BookKeeper.DigestType;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.conf.ClientConfiguration;

/**
 * The fault campaign's Java side, with the real BookKeeper client; scripts/chaos runs each
 * command inside a client network namespace:
 * <pre>
 *   clients --uri U --dir D --seed S --seconds N [--writer NAME:E:W:A[:lac][:v2]]... [--tail NAME:WRITER]...
 *   recover --uri U --dir D --name NAME --target WRITER     fence (open with recovery) WRITER's ledger
 *   check   --uri U --dir D --seed S                        verify every history under D
 *           [--lost ID --lost-at MS --within S --snapshot FILE]   ... and that a lost bookie's copies came back
 *   snapshot --uri U --dir D [--lost ID --lost-at MS --within S]   every ledger's metadata to D/lost-snapshot.tsv,
 *                                                          then watch the healing (D/lost-heal.tsv)
 * </pre>
 * Histories go to D/hist-NAME.tsv (see {@link History}); check prints one line per ledger and a
 * last line "check: PASS ..." or "check: FAIL ...", and exits 1 on any violation. The lost-bookie
 * fault ({@link Lost}): ID is the bookie id (host:port), MS the epoch milliseconds of its kill,
 * S the bound in seconds within which no ledger may name it any more.
 */
public final class Main {
    private Main() {}

    static final class Opts {
        String uri;
        Path dir;
        long seed = 1;
        long deadlineMs;
        int rate = 50;
        int window = 16;
        int maxSize = 2048;
        int entriesPerLedger = 600;
        long drainMs = 20_000;
        String name = "fencer";
        String target;
        /** The bookie lost for good (its id), when the round lost one. */
        String lost;
        long lostAt = -1;
        long withinSeconds = 120;
        Path snapshot;
        final List<String> writers = new ArrayList<>();
        final List<String> tails = new ArrayList<>();
    }

    static ClientConfiguration clientConf(String uri, boolean v2) {
        ClientConfiguration cc = new ClientConfiguration();
        cc.setMetadataServiceUri(uri);
        cc.setUseV2WireProtocol(v2);
        cc.setAddEntryTimeout(5);
        cc.setReadEntryTimeout(5);
        cc.setZkTimeout(6000);
        return cc;
    }

    /** A client, retried until the deadline (ZooKeeper may be cut off from this namespace). */
    static BookKeeper connect(ClientConfiguration cc, long deadlineMs) throws InterruptedException {
        while (System.currentTimeMillis() < deadlineMs) {
            try {
                return new BookKeeper(cc);
            } catch (Exception e) {
                System.err.println("client: " + e);
                Thread.sleep(1000);
            }
        }
        return null;
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            usage("no command");
        }
        Opts o = new Opts();
        long seconds = 30;
        for (int i = 1; i < args.length; i++) {
            String k = args[i];
            if (i + 1 >= args.length) {
                usage(k + " needs a value");
            }
            String v = args[++i];
            switch (k) {
                case "--uri" -> o.uri = v;
                case "--dir" -> o.dir = Path.of(v);
                case "--seed" -> o.seed = Long.parseLong(v);
                case "--seconds" -> seconds = Long.parseLong(v);
                case "--rate" -> o.rate = Integer.parseInt(v);
                case "--window" -> o.window = Integer.parseInt(v);
                case "--max-size" -> o.maxSize = Integer.parseInt(v);
                case "--entries-per-ledger" -> o.entriesPerLedger = Integer.parseInt(v);
                case "--drain-ms" -> o.drainMs = Long.parseLong(v);
                case "--writer" -> o.writers.add(v);
                case "--tail" -> o.tails.add(v);
                case "--name" -> o.name = v;
                case "--target" -> o.target = v;
                case "--lost" -> o.lost = v;
                case "--lost-at" -> o.lostAt = Long.parseLong(v);
                case "--within" -> o.withinSeconds = Long.parseLong(v);
                case "--snapshot" -> o.snapshot = Path.of(v);
                default -> usage("unknown option " + k);
            }
        }
        if (o.uri == null || o.dir == null) {
            usage("--uri and --dir are required");
        }
        Files.createDirectories(o.dir);
        o.deadlineMs = System.currentTimeMillis() + seconds * 1000;
        switch (args[0]) {
            case "clients" -> System.exit(clients(o));
            case "recover" -> System.exit(recover(o));
            case "check" -> System.exit(new Checker(o).run());
            case "snapshot" -> System.exit(Lost.snapshot(o));
            default -> usage("unknown command " + args[0]);
        }
    }

    private static int clients(Opts o) throws Exception {
        List<Thread> threads = new ArrayList<>();
        for (String w : o.writers) {
            Writer.Spec spec = Writer.Spec.parse(w);
            threads.add(new Thread(new Writer(spec, o), "writer-" + spec.name()));
        }
        for (String t : o.tails) {
            String[] f = t.split(":");
            if (f.length != 2) {
                usage("--tail NAME:WRITER, got " + t);
            }
            threads.add(new Thread(new Tailer(f[0], f[1], o), "tailer-" + f[0]));
        }
        for (Thread t : threads) {
            t.start();
        }
        for (Thread t : threads) {
            t.join();
        }
        return 0;
    }

    /** Opens WRITER's current ledger with recovery: the fence, logged with the recovered LAC. */
    private static int recover(Opts o) throws Exception {
        if (o.target == null) {
            usage("recover needs --target WRITER");
        }
        Path cur = o.dir.resolve("cur-" + o.target);
        if (!Files.exists(cur)) {
            System.err.println("recover: " + o.target + " has no ledger yet");
            return 2;
        }
        try (History h = new History(o.dir.resolve("hist-" + o.name + ".tsv"), o.name)) {
            BookKeeper bk = connect(clientConf(o.uri, false), System.currentTimeMillis() + 20_000);
            if (bk == null) {
                h.log("fencefail", -1, -1, "", "no client");
                return 1;
            }
            // the ledger being written now (read once the client is up: a JVM starts slowly)
            long ledger = Long.parseLong(Files.readString(cur).trim());
            h.log("fencing", ledger, -1, "", "");
            try {
                LedgerHandle lh = bk.openLedger(ledger, DigestType.CRC32C, Writer.PASSWORD);
                h.log("fence", ledger, lh.getLastAddConfirmed(), "", "recovered");
                lh.close();
            } catch (Exception e) {
                h.log("fencefail", ledger, -1, "", e.toString());
                return 1;
            } finally {
                bk.close();
            }
        }
        return 0;
    }

    private static void usage(String why) {
        System.err.println("chaos: " + why);
        System.err.println("usage: clients|recover|check|snapshot --uri U --dir D [options] (see Main.java)");
        System.exit(2);
    }
}
