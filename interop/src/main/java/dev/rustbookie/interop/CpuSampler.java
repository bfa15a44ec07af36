package dev.rustbookie.interop;

import java.io.BufferedReader;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Who uses the machine's CPU during a measurement: every SAMPLE_MS, the CPU time (utime +
 * stime, /proc/PID/stat) of each named process and the machine's busy and total time
 * (/proc/stat), so a benchmark can say which process owns its pace over the exact window it
 * measured (e.g. a broker's catch-up read, from its consumer's first receive to its last).
 * Linux only; a process that has exited keeps its last sample.
 */
public final class CpuSampler implements AutoCloseable {
    static final long SAMPLE_MS = 50;
    /** The samples kept, the newest (an hour at SAMPLE_MS): a sampler left running stays bounded. */
    static final int MAX_SAMPLES = 72_000;

    private record Sample(long atMs, long[] procTicks, long busyTicks, long totalTicks) {}

    private final List<String> names;
    private final long[] pids;
    private final List<Sample> samples = new ArrayList<>();
    private final Thread thread;
    /** The machine's CPUs (the cpuN lines of /proc/stat), whatever this JVM may use. */
    private final int cpus = machineCpus();
    private volatile boolean stop;

    /** Starts sampling the processes, by name (a pid of -1 is never sampled). */
    public CpuSampler(Map<String, Long> processes) {
        this.names = new ArrayList<>(processes.keySet());
        this.pids = processes.values().stream().mapToLong(Long::longValue).toArray();
        this.thread = new Thread(this::run, "cpu-sampler");
        this.thread.setDaemon(true);
        this.thread.start();
    }

    private void run() {
        long[] last = new long[pids.length];
        while (!stop) {
            long[] ticks = new long[pids.length];
            for (int i = 0; i < pids.length; i++) {
                long t = procTicks(pids[i]);
                ticks[i] = t >= 0 ? t : last[i];
            }
            last = ticks;
            long[] m = machineTicks();
            synchronized (samples) {
                if (samples.size() >= MAX_SAMPLES) {
                    samples.remove(0);
                }
                samples.add(new Sample(System.currentTimeMillis(), ticks, m[0], m[1]));
            }
            try {
                Thread.sleep(SAMPLE_MS);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    /**
     * The CPU each process used from fromMs to toMs (wall clock, ms since the epoch), in % of
     * one core, and the machine's busy share ("machine 195 of 200" on two cores), from the
     * samples nearest outside the window.
     */
    public String window(long fromMs, long toMs) {
        Sample a = null;
        Sample b = null;
        synchronized (samples) {
            for (Sample s : samples) {
                if (s.atMs <= fromMs) {
                    a = s;
                }
                if (s.atMs >= toMs && b == null) {
                    b = s;
                }
            }
            if (b == null && !samples.isEmpty()) {
                b = samples.get(samples.size() - 1);
            }
        }
        if (a == null || b == null || b.atMs <= a.atMs) {
            return "(no CPU samples around the window)";
        }
        double wallTicks = (b.atMs - a.atMs) / 10.0; // USER_HZ = 100 on Linux
        Map<String, Long> pct = new LinkedHashMap<>();
        for (int i = 0; i < names.size(); i++) {
            pct.put(names.get(i), Math.round((b.procTicks[i] - a.procTicks[i]) * 100 / wallTicks));
        }
        long busy = Math.round((double) (b.busyTicks - a.busyTicks) / (b.totalTicks - a.totalTicks) * 100 * cpus);
        StringBuilder sb = new StringBuilder();
        pct.forEach((n, p) -> sb.append(n).append(' ').append(p).append(", "));
        sb.append("machine busy ").append(busy).append(" of ").append(100 * cpus)
                .append(" (% of one core, over ").append(b.atMs - a.atMs).append(" ms)");
        return sb.toString();
    }

    /** utime + stime of pid in clock ticks, or -1 when it is gone. */
    static long procTicks(long pid) {
        if (pid < 0) {
            return -1;
        }
        try {
            String st = firstLine(Path.of("/proc/" + pid + "/stat"));
            String[] f = st.substring(st.lastIndexOf(')') + 2).split(" ");
            // After "pid (comm) ": state is field 3, utime 14, stime 15.
            return Long.parseLong(f[11]) + Long.parseLong(f[12]);
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }

    /** The machine's {busy, total} clock ticks (idle and iowait are not busy). */
    static long[] machineTicks() {
        try {
            String[] f = firstLine(Path.of("/proc/stat")).trim().split("\\s+");
            long total = 0;
            for (int i = 1; i < f.length; i++) {
                total += Long.parseLong(f[i]);
            }
            long idle = Long.parseLong(f[4]) + Long.parseLong(f[5]);
            return new long[] {total - idle, total};
        } catch (IOException | RuntimeException e) {
            return new long[] {0, 0};
        }
    }

    /** The number of cpuN lines in /proc/stat (1 if it cannot be read). */
    static int machineCpus() {
        try (BufferedReader r = Files.newBufferedReader(Path.of("/proc/stat"), StandardCharsets.US_ASCII)) {
            return (int) Math.max(1, r.lines().filter(l -> l.matches("cpu\\d+ .*")).count());
        } catch (IOException | RuntimeException e) {
            return 1;
        }
    }

    /** A /proc file's first line (they report size 0: read as a stream, not with readString). */
    static String firstLine(Path p) throws IOException {
        try (BufferedReader r = Files.newBufferedReader(p, StandardCharsets.US_ASCII)) {
            String l = r.readLine();
            if (l == null) {
                throw new IOException(p + " is empty");
            }
            return l;
        }
    }

    @Override
    public void close() {
        stop = true;
        thread.interrupt();
    }
}
