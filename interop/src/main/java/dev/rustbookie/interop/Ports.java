package dev.rustbookie.interop;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Free ports for the processes a scenario starts; never hands out a port twice in one JVM.
 *
 * <p>A port is handed out seconds before its process binds it (a bookie replays its journal
 * first), so it is taken below the kernel's ephemeral range (ip_local_port_range): there no
 * outgoing connection, and no other JVM's bind to port 0, can take it in between. The surefire
 * forks (interop.fork, 1..forkCount) get disjoint slices of that space, so two scenario classes
 * running at once never draw the same port either. A candidate is checked free by a wildcard bind
 * without SO_REUSEADDR, which fails for any socket holding the port (even in TIME_WAIT). Where
 * the ephemeral range leaves no room below it, the kernel picks (bind to port 0), as before.
 */
public final class Ports {
    private static final Set<Integer> GIVEN = new HashSet<>();
    /** The lowest port drawn: above the usual fixed service ports. */
    private static final int FLOOR = 10_000;
    /** Ports per fork slice. */
    private static final int SLICE = 2_500;

    private Ports() {}

    public static synchronized int free() {
        int[] slice = slice();
        if (slice != null) {
            int span = slice[1] - slice[0];
            int start = ThreadLocalRandom.current().nextInt(span);
            for (int i = 0; i < span; i++) {
                int p = slice[0] + (start + i) % span;
                if (!GIVEN.contains(p) && bindable(p)) {
                    GIVEN.add(p);
                    return p;
                }
            }
        }
        for (int i = 0; i < 100; i++) {
            try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getByName("127.0.0.1"))) {
                int p = s.getLocalPort();
                if (GIVEN.add(p)) {
                    return p;
                }
            } catch (IOException e) {
                throw new IllegalStateException("no free port", e);
            }
        }
        throw new IllegalStateException("no free port");
    }

    /** This fork's [from, to) below the ephemeral range, or null when there is no room. */
    static int[] slice() {
        int low;
        // (Files.readString reads a /proc file short: it trusts the size, 0 there)
        try (java.io.BufferedReader in = Files.newBufferedReader(Path.of("/proc/sys/net/ipv4/ip_local_port_range"))) {
            low = Integer.parseInt(in.readLine().trim().split("\\s+")[0]);
        } catch (IOException | RuntimeException e) {
            return null;
        }
        int fork = Math.max(1, Integer.getInteger("interop.fork", 1));
        int slices = (low - FLOOR) / SLICE;
        if (slices < 1) {
            return null;
        }
        int from = FLOOR + ((fork - 1) % slices) * SLICE;
        return new int[] {from, from + SLICE};
    }

    static boolean bindable(int port) {
        try (ServerSocket s = new ServerSocket()) {
            s.setReuseAddress(false);
            s.bind(new InetSocketAddress(port), 1);
            return true;
        } catch (IOException e) {
            return false;
        }
    }
}
