package dev.rustbookie.interop;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.HashSet;
import java.util.Set;

/** Free loopback ports: bind to port 0, read it back, close; never hands out a port twice. */
public final class Ports {
    private static final Set<Integer> GIVEN = new HashSet<>();

    private Ports() {}

    public static synchronized int free() {
        for (int i = 0; i < 100; i++) {
            try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getByName("127.0.0.1"))) {
                s.setReuseAddress(true);
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
}
