package dev.rustbookie.interop;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** Our bookie: `bookie serve --conf FILE` (BOOKIE_BIN, BOOKIE_ARGS). */
public class RustBookie extends Bookie {
    public RustBookie(Cluster cluster, String name) {
        super(cluster, name);
    }

    @Override
    public boolean isJava() {
        return false;
    }

    @Override
    protected Map<String, String> conf() {
        Map<String, String> c = super.conf();
        // No dbStorage_writeCacheMaxSizeMb: our default (1 GiB per shard, allocated as used).
        // A small cache turns a burst into immediate ETOOMANYREQUESTS where Java throttles the
        // add (see WriteCacheBurstTest, tag "full").
        return c;
    }

    @Override
    protected List<String> command() {
        Path bin = Settings.bookieBin();
        if (!Files.isExecutable(bin)) {
            throw new IllegalStateException("the Rust bookie binary " + bin
                    + " is missing: cargo build --release -p bookie, or set BOOKIE_BIN");
        }
        List<String> cmd = new ArrayList<>();
        cmd.add(bin.toString());
        cmd.add("serve");
        cmd.add("--conf");
        cmd.add(confFile().toString());
        cmd.addAll(Settings.bookieArgs());
        return cmd;
    }
}
