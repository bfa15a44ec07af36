package dev.rustbookie.interop;

import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.zip.CRC32C;

/**
 * Deterministic entry payloads: a function of (seed, ledger, entry, size). From 8 bytes on, the
 * first 4 bytes are the CRC32C of the rest; from 24 bytes on, bytes 4..20 hold ledger and entry
 * ids; the rest is a splitmix64 stream.
 */
public final class Payloads {
    private Payloads() {}

    static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
        z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
        return z ^ (z >>> 31);
    }

    public static byte[] payload(long seed, long ledger, long entry, int size) {
        byte[] b = new byte[size];
        long state = mix(seed * 0x9e3779b97f4a7c15L + mix(ledger + 1) + mix(entry + 0x51ed27L));
        ByteBuffer bb = ByteBuffer.wrap(b);
        int i = 0;
        while (i + 8 <= size) {
            state += 0x9e3779b97f4a7c15L;
            bb.putLong(i, mix(state));
            i += 8;
        }
        state += 0x9e3779b97f4a7c15L;
        long last = mix(state);
        for (; i < size; i++) {
            b[i] = (byte) last;
            last >>>= 8;
        }
        if (size >= 24) {
            bb.putLong(4, ledger);
            bb.putLong(12, entry);
        }
        if (size >= 8) {
            CRC32C crc = new CRC32C();
            crc.update(b, 4, size - 4);
            bb.putInt(0, (int) crc.getValue());
        }
        return b;
    }

    /** A size in [min, max], deterministic from (seed, ledger, entry). */
    public static int size(long seed, long ledger, long entry, int min, int max) {
        long r = mix(seed ^ mix(ledger * 31 + entry * 7 + 12345));
        return min + (int) Math.floorMod(r, (long) (max - min + 1));
    }

    public static String sha256(byte[] b) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }
}
