package dev.rustbookie.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.http.HttpClient;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * T02: the HTTPS admin server (httpServerTlsEnable), our bookie beside a Java one on the same
 * keys: a key store rewritten by keytool, a trust store written by keytool, passwords in the
 * conf. Both answer an operator whose certificate the trust store's CA signed, and neither
 * answers a client without a certificate, one with another CA's, or plaintext HTTP (Java's
 * Vert.x server requires client certificates; ours must not be more open than the bookie it
 * replaces).
 */
@Tag("smoke")
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class T02HttpsAdminTest {

    @Test
    void httpsAdminServerAsJavas() throws Exception {
        try (Cluster c = new Cluster("t02https")) {
            TlsCerts certs = new TlsCerts(c.runDir.resolve("certs"));
            Path server = certs.viaKeytool(certs.pkcs12("admin-server", "/CN=bookie-admin"));
            Path operator = certs.pkcs12("operator", "/CN=operator");
            TlsCerts rogue = new TlsCerts(c.runDir.resolve("rogue-certs"));
            Path stranger = rogue.pkcs12("operator", "/CN=operator");
            Map<String, String> keys = certs.httpsAdminConf(server);
            // The Java bookie's HTTPS keys came with 4.15 (ServerConfiguration.isHttpServerTlsEnable);
            // on an older line (the client matrix) only ours is checked.
            List<Bookie> bookies = new java.util.ArrayList<>(List.of(c.addRust()));
            if (javaHasHttps()) {
                bookies.add(c.addJava());
            } else {
                Cluster.log("this Java bookie line has no httpServerTlsEnable: ours only");
            }
            for (Bookie b : bookies) {
                b.extraConf.putAll(keys);
                b.adminTls(certs.sslContext(operator));
            }
            c.startAll();
            HttpClient noCert = HttpClient.newBuilder().sslContext(certs.sslContext(null))
                    .connectTimeout(Duration.ofSeconds(5)).build();
            // trusts the servers' CA, presents a certificate the rogue CA signed
            HttpClient foreign = HttpClient.newBuilder().sslContext(certs.sslContext(stranger))
                    .connectTimeout(Duration.ofSeconds(5)).build();
            for (Bookie b : bookies) {
                assertEquals(200, b.http("GET", "/heartbeat", null).statusCode(), b + " heartbeat over HTTPS");
                String state = b.http("GET", "/api/v1/bookie/state", null).body();
                assertTrue(state.contains("\"running\""), b + " state: " + state);
                assertThrows(IOException.class, () -> b.http(noCert, "GET", "/heartbeat", null),
                        b + " answered a client without a certificate");
                assertThrows(IOException.class, () -> b.http(foreign, "GET", "/heartbeat", null),
                        b + " answered a client with another CA's certificate");
                String plain = plaintext(b.httpPort);
                assertFalse(plain.startsWith("HTTP/1.1 200"), b + " answered plaintext HTTP: " + plain);
                Cluster.log(b + ": HTTPS admin answered the operator, refused the others (plaintext got "
                        + (plain.isEmpty() ? "nothing" : plain.charAt(0) == 0x15 ? "a TLS alert"
                                : plain.lines().findFirst().orElse("")) + ")");
            }
            c.assertHealthy();
        }
    }

    private static boolean javaHasHttps() {
        try {
            org.apache.bookkeeper.conf.ServerConfiguration.class.getMethod("isHttpServerTlsEnable");
            return true;
        } catch (NoSuchMethodException e) {
            return false;
        }
    }

    /** A plaintext GET /heartbeat: what came back before the server closed (or 5 s passed). */
    private static String plaintext(int port) throws IOException {
        try (Socket s = new Socket("127.0.0.1", port)) {
            s.setSoTimeout(5000);
            OutputStream out = s.getOutputStream();
            out.write("GET /heartbeat HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = s.getInputStream();
            byte[] buf = in.readNBytes(256);
            return new String(buf, StandardCharsets.ISO_8859_1);
        } catch (java.net.SocketTimeoutException | java.net.SocketException e) {
            return "";
        }
    }
}
