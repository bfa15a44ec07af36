package dev.rustbookie.interop;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.nio.NioEventLoopGroup;
import java.util.EnumSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.bookkeeper.client.api.WriteFlag;
import org.apache.bookkeeper.common.util.OrderedExecutor;
import org.apache.bookkeeper.conf.ClientConfiguration;
import org.apache.bookkeeper.net.BookieId;
import org.apache.bookkeeper.net.BookieSocketAddress;
import org.apache.bookkeeper.proto.BookieClientImpl;

/**
 * Raw per-bookie requests through the client's internal BookieClientImpl (the one adapter for
 * this unstable API, docs/interop.md §6): read what one bookie stores, add straight to one bookie.
 */
public final class Raw implements AutoCloseable {
    private final EventLoopGroup elg;
    private final OrderedExecutor executor;
    private final ScheduledExecutorService scheduler;
    private final BookieClientImpl client;
    private final boolean v2;

    public record Result(int rc, byte[] data) {}

    public Raw(ClientConfiguration cc) throws Exception {
        this.v2 = cc.getUseV2WireProtocol();
        elg = new NioEventLoopGroup(1);
        executor = OrderedExecutor.newBuilder().name("raw-client").numThreads(1).build();
        scheduler = Executors.newSingleThreadScheduledExecutor();
        client = new BookieClientImpl(cc, elg, UnpooledByteBufAllocator.DEFAULT, executor, scheduler,
                org.apache.bookkeeper.stats.NullStatsLogger.INSTANCE, BookieSocketAddress.LEGACY_BOOKIEID_RESOLVER);
    }

    /** Reads one entry as the bookie stores it (digest header + payload); rc and bytes. */
    public Result read(BookieId bookie, long ledgerId, long entryId) throws Exception {
        CompletableFuture<Result> f = new CompletableFuture<>();
        client.readEntry(bookie, ledgerId, entryId, (rc, lid, eid, buf, ctx) -> {
            byte[] data = null;
            if (rc == 0 && buf != null) {
                data = new byte[buf.readableBytes()];
                buf.getBytes(buf.readerIndex(), data);
            }
            if (buf != null) {
                buf.release();
            }
            f.complete(new Result(rc, data));
        }, null, 0);
        return f.get(30, TimeUnit.SECONDS);
    }

    /** A fence read (ledger recovery's first step) of one entry with the master key: its rc. */
    public int fenceRead(BookieId bookie, long ledgerId, long entryId, byte[] masterKey) throws Exception {
        CompletableFuture<Integer> f = new CompletableFuture<>();
        client.readEntry(bookie, ledgerId, entryId, (rc, lid, eid, buf, ctx) -> {
            if (buf != null) {
                buf.release();
            }
            f.complete(rc);
        }, null, org.apache.bookkeeper.proto.BookieProtocol.FLAG_DO_FENCING, masterKey);
        return f.get(30, TimeUnit.SECONDS);
    }

    /**
     * Adds one entry straight to a bookie; returns the rc. The entry is laid out as a client
     * packages it (ledger, entry, LAC, length, a 4-byte CRC32C, payload); bookies do not verify
     * digests, so the client's internal (version-specific) DigestManager is not needed. As with
     * the client's own packaging, a v2 add is handed over as one buffer that already holds the
     * v2 framing (frame length, packet header, master key) from 4.16 on, and as a ByteBufList
     * that the client frames (as v3 adds on every line) up to 4.15.
     */
    public int add(BookieId bookie, long ledgerId, byte[] masterKey, long entryId, long lac, byte[] payload,
            int flags) throws Exception {
        ByteBuf head = Unpooled.buffer(36);
        head.writeLong(ledgerId).writeLong(entryId).writeLong(lac).writeLong(payload.length);
        java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
        byte[] h = new byte[32];
        head.getBytes(0, h);
        crc.update(h);
        crc.update(payload);
        head.writeInt((int) crc.getValue());
        // which signature this client line has: 4.18 added an Executor argument; up to 4.15 the
        // entry is a ByteBufList, which the client's v2 encoder frames itself
        java.lang.reflect.Method add = null;
        for (java.lang.reflect.Method m : BookieClientImpl.class.getMethods()) {
            if (m.getName().equals("addEntry") && (m.getParameterCount() == 10 || m.getParameterCount() == 11)) {
                add = m;
            }
        }
        if (add == null) {
            throw new IllegalStateException("no BookieClientImpl.addEntry of a known shape");
        }
        boolean framesV2Itself = add.getParameterTypes()[4] == org.apache.bookkeeper.util.ByteBufList.class;
        io.netty.util.ReferenceCounted toSend;
        if (v2 && !framesV2Itself) {
            ByteBuf frame = Unpooled.buffer(4 + 4 + 20 + 36 + payload.length);
            frame.writeInt(4 + 20 + 36 + payload.length);
            frame.writeInt((2 << 24) | (1 << 16) | (flags & 0xffff)); // version 2, ADDENTRY, flags
            byte[] key = java.util.Arrays.copyOf(masterKey, 20);
            frame.writeBytes(key);
            frame.writeBytes(head);
            frame.writeBytes(payload);
            toSend = frame;
        } else {
            toSend = org.apache.bookkeeper.util.ByteBufList.get(head, Unpooled.wrappedBuffer(payload));
        }
        CompletableFuture<Integer> f = new CompletableFuture<>();
        org.apache.bookkeeper.proto.BookkeeperInternalCallbacks.WriteCallback cb =
                (rc, lid, eid, addr, ctx) -> f.complete(rc);
        if (add.getParameterCount() == 11) {
            add.invoke(client, bookie, ledgerId, masterKey, entryId, toSend, cb, null, flags, false,
                    EnumSet.noneOf(WriteFlag.class), executor);
        } else {
            add.invoke(client, bookie, ledgerId, masterKey, entryId, toSend, cb, null, flags, false,
                    EnumSet.noneOf(WriteFlag.class));
        }
        return f.get(30, TimeUnit.SECONDS);
    }

    @Override
    public void close() {
        client.close();
        executor.shutdown();
        scheduler.shutdownNow();
        elg.shutdownGracefully(0, 1, TimeUnit.SECONDS);
    }
}
