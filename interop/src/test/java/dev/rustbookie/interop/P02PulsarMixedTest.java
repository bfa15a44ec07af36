package dev.rustbookie.interop;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * P02 Pulsar on a mixed cluster (issue #13, tier "pulsar-full"): P01's scenario (a real Pulsar
 * 4.0.8 broker, E3 W3 A2, deduplication on, two producers with and without batching, a broker
 * SIGKILL + restart in the middle of producing) over 2 Java + 2 of our bookies, on a
 * partitioned topic (4 partitions, messages routed by key) read through a Shared subscription
 * by two consumers: every acknowledged message received exactly once, byte for byte, on every
 * partition; each partition's ledgers before the current one closed.
 */
@Tag("pulsar-full")
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class P02PulsarMixedTest {
    @Test
    void pulsarPartitionedSharedOnAMixedCluster() throws Exception {
        try (Cluster c = new Cluster("p02")) {
            c.addJava();
            c.addJava();
            c.addRust();
            c.addRust();
            c.startAll();
            P01PulsarTest.scenario(c, "mixed", "p02-mixed", 4, "Shared", 2);
        }
    }
}
