package dev.rustbookie.interop;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.bookkeeper.conf.ClientConfiguration;

/**
 * Certificates for the TLS scenarios, made at run time in the scenario's run directory (nothing
 * secret is committed): a CA and leaf certificates signed by it with openssl (EC P-256 keys, or
 * RSA 2048 where asked), each leaf
 * as a PKCS12 store; one store is rewritten by keytool, so that our bookie reads a store as the
 * JDK writes it. The trust store is the CA's PEM (Java's TLSContextFactory takes PEM trust
 * stores on both sides). Roles go in the OU as Java's BookieAuthZFactory reads them ("0:role").
 */
public final class TlsCerts {
    public static final String PASSWORD = "changeit";
    public static final String FACTORY = "org.apache.bookkeeper.tls.TLSContextFactory";
    public static final String AUTHZ = "org.apache.bookkeeper.tls.BookieAuthZFactory";

    public final Path dir;
    public final Path caPem;
    public final Path passwordFile;

    public TlsCerts(Path dir) throws Exception {
        this.dir = dir;
        Files.createDirectories(dir);
        passwordFile = dir.resolve("store.pass");
        Files.writeString(passwordFile, PASSWORD, StandardCharsets.UTF_8);
        caPem = dir.resolve("ca.pem");
        run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", dir.resolve("ca.key").toString(),
                "-out", caPem.toString(), "-days", "2", "-subj", "/CN=interop-ca",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign");
    }

    /** A PKCS12 store (leaf + CA) for `name` with subject `subj` (openssl form, e.g. /CN=x/OU=0:admin), EC P-256. */
    public Path pkcs12(String name, String subj) throws Exception {
        return pkcs12(name, subj, false);
    }

    /** The same with an RSA 2048 key when `rsa` (slow to generate on a busy machine: full tier only). */
    public Path pkcs12(String name, String subj, boolean rsa) throws Exception {
        Path key = dir.resolve(name + ".key");
        Path csr = dir.resolve(name + ".csr");
        Path crt = dir.resolve(name + ".crt");
        Path ext = dir.resolve(name + ".ext");
        Files.writeString(ext, "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                + (rsa ? "keyUsage=critical,digitalSignature,keyEncipherment\n" : "keyUsage=critical,digitalSignature\n")
                + "extendedKeyUsage=serverAuth,clientAuth\n");
        List<String> req = new ArrayList<>(List.of("openssl", "req", "-newkey"));
        req.addAll(rsa ? List.of("rsa:2048") : List.of("ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"));
        req.addAll(List.of("-nodes", "-keyout", key.toString(), "-out", csr.toString(), "-subj", subj));
        run(req.toArray(new String[0]));
        run("openssl", "x509", "-req", "-in", csr.toString(), "-CA", caPem.toString(),
                "-CAkey", dir.resolve("ca.key").toString(), "-CAcreateserial", "-out", crt.toString(),
                "-days", "2", "-extfile", ext.toString());
        Path p12 = dir.resolve(name + ".p12");
        run("openssl", "pkcs12", "-export", "-in", crt.toString(), "-inkey", key.toString(),
                "-certfile", caPem.toString(), "-name", name, "-out", p12.toString(),
                "-passout", "file:" + passwordFile);
        return p12;
    }

    /** The same store rewritten by the JDK's keytool (its own PKCS12 encryption and MAC). */
    public Path viaKeytool(Path p12) throws Exception {
        Path out = dir.resolve(p12.getFileName().toString().replace(".p12", "-keytool.p12"));
        run("keytool", "-importkeystore", "-noprompt", "-srckeystore", p12.toString(), "-srcstoretype", "PKCS12",
                "-srcstorepass", PASSWORD, "-destkeystore", out.toString(), "-deststoretype", "PKCS12",
                "-deststorepass", PASSWORD);
        return out;
    }

    /** The CA's certificate in a PKCS12 trust store written by keytool (-importcert). */
    public Path trustStore() throws Exception {
        Path out = dir.resolve("trust.p12");
        if (!Files.exists(out)) {
            run("keytool", "-importcert", "-noprompt", "-alias", "interop-ca", "-file", caPem.toString(),
                    "-keystore", out.toString(), "-storetype", "PKCS12", "-storepass", PASSWORD);
        }
        return out;
    }

    /**
     * A client's SSLContext: trusting the CA, presenting the key of `keyStore` (a PKCS12 store of
     * this class) when it is not null.
     */
    public javax.net.ssl.SSLContext sslContext(Path keyStore) throws Exception {
        java.security.KeyStore trust = java.security.KeyStore.getInstance("PKCS12");
        trust.load(null, null);
        try (java.io.InputStream in = Files.newInputStream(caPem)) {
            trust.setCertificateEntry("ca", java.security.cert.CertificateFactory.getInstance("X.509")
                    .generateCertificate(in));
        }
        javax.net.ssl.TrustManagerFactory tmf = javax.net.ssl.TrustManagerFactory.getInstance(
                javax.net.ssl.TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(trust);
        javax.net.ssl.KeyManager[] keys = null;
        if (keyStore != null) {
            java.security.KeyStore ks = java.security.KeyStore.getInstance("PKCS12");
            try (java.io.InputStream in = Files.newInputStream(keyStore)) {
                ks.load(in, PASSWORD.toCharArray());
            }
            javax.net.ssl.KeyManagerFactory kmf = javax.net.ssl.KeyManagerFactory.getInstance(
                    javax.net.ssl.KeyManagerFactory.getDefaultAlgorithm());
            kmf.init(ks, PASSWORD.toCharArray());
            keys = kmf.getKeyManagers();
        }
        javax.net.ssl.SSLContext ctx = javax.net.ssl.SSLContext.getInstance("TLS");
        ctx.init(keys, tmf.getTrustManagers(), null);
        return ctx;
    }

    /**
     * bk_server.conf keys of an HTTPS admin server (either kind of bookie; Java's Vert.x server
     * requires client certificates) with this key store and the CA's trust store.
     */
    public Map<String, String> httpsAdminConf(Path keyStore) throws Exception {
        Map<String, String> c = new LinkedHashMap<>();
        c.put("httpServerTlsEnable", "true");
        c.put("httpServerKeyStorePath", keyStore.toString());
        c.put("httpServerKeyStorePassword", PASSWORD);
        c.put("httpServerTrustStorePath", trustStore().toString());
        c.put("httpServerTrustStorePassword", PASSWORD);
        return c;
    }

    /** bk_server.conf keys of a TLS bookie (either kind) with this key store. */
    public Map<String, String> bookieConf(Path keyStore, boolean clientAuth) {
        Map<String, String> c = new LinkedHashMap<>();
        c.put("tlsProviderFactoryClass", FACTORY);
        c.put("tlsProvider", "JDK");
        c.put("tlsKeyStoreType", "PKCS12");
        c.put("tlsKeyStore", keyStore.toString());
        c.put("tlsKeyStorePasswordPath", passwordFile.toString());
        c.put("tlsTrustStoreType", "PEM");
        c.put("tlsTrustStore", caPem.toString());
        c.put("tlsClientAuthentication", Boolean.toString(clientAuth));
        return c;
    }

    /** A client configuration with TLS (JDK provider) and, when keyStore is set, a client certificate. */
    public ClientConfiguration client(ClientConfiguration cc, Path keyStore) {
        cc.setTLSProviderFactoryClass(FACTORY);
        cc.setTLSProvider("JDK");
        cc.setTLSTrustStoreType("PEM");
        cc.setTLSTrustStore(caPem.toString());
        if (keyStore != null) {
            cc.setTLSClientAuthentication(true);
            cc.setTLSKeyStoreType("PKCS12");
            cc.setTLSKeyStore(keyStore.toString());
            cc.setTLSKeyStorePasswordPath(passwordFile.toString());
        }
        return cc;
    }

    private void run(String... cmd) throws Exception {
        List<String> args = new ArrayList<>(List.of(cmd));
        ProcessBuilder pb = new ProcessBuilder(args).directory(dir.toFile()).redirectErrorStream(true);
        Path log = dir.resolve("certs.log");
        pb.redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()));
        Process p = pb.start();
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
            p.destroyForcibly();
            throw new IOException(String.join(" ", args) + " failed; see " + log);
        }
    }
}
