package dev.rustbookie.interop;

import java.io.File;
import org.apache.bookkeeper.conf.ServerConfiguration;
import org.apache.bookkeeper.replication.AuditorElector;
import org.apache.bookkeeper.replication.ReplicationWorker;

/**
 * One half of Java's autorecovery in a JVM of its own: `auditor CONF ID` runs Apache
 * BookKeeper's AuditorElector (election, bookie-loss detection, audits) under the vote id ID;
 * `worker CONF` runs its ReplicationWorker. AutoRecoveryMain always runs both; the mixed
 * clusters of issue 45 need a Java auditor beside our workers and Java workers beside our
 * auditor. The constructors used exist unchanged from 4.14 to 4.18.
 */
public final class JavaAutorecoveryRole {
    private JavaAutorecoveryRole() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: JavaAutorecoveryRole auditor|worker CONF [ID]");
            System.exit(2);
        }
        ServerConfiguration conf = new ServerConfiguration();
        conf.loadConf(new File(args[1]).toURI().toURL());
        switch (args[0]) {
            case "auditor": {
                AuditorElector elector = new AuditorElector(args[2], conf);
                elector.start();
                System.out.println("java auditor elector started as " + args[2]);
                break;
            }
            case "worker": {
                ReplicationWorker worker = new ReplicationWorker(conf);
                worker.start();
                System.out.println("java replication worker started");
                break;
            }
            default:
                System.err.println("unknown role " + args[0]);
                System.exit(2);
        }
        Thread.currentThread().join();
    }
}
