package dev.rustbookie.interop;

/**
 * The BookKeeper client line the harness runs with (-Dbookkeeper.version, 4.14.x .. 4.18.x):
 * scenarios use it to call APIs that not every line has (by reflection) or to skip exactly the
 * part a line lacks, with a reason (an assumption, reported as SKIPPED).
 */
public final class ClientLine {
    private ClientLine() {}

    /** The version the tests were built with (surefire passes bookkeeper.version). */
    public static String version() {
        return System.getProperty("bookkeeper.version", "unknown");
    }

    /** {major, minor} of version(), e.g. {4, 16}; {99, 99} when unknown (the newest behaviour). */
    public static int[] line() {
        String[] p = version().split("[.-]");
        try {
            return new int[] {Integer.parseInt(p[0]), Integer.parseInt(p[1])};
        } catch (RuntimeException e) {
            return new int[] {99, 99};
        }
    }

    /** True when the client line is at least major.minor. */
    public static boolean atLeast(int major, int minor) {
        int[] l = line();
        return l[0] > major || (l[0] == major && l[1] >= minor);
    }

    /**
     * Records that part of a scenario is left out on this client line, with the reason; the
     * line "line-skip: ..." in the client output is what scripts/interop-matrix prints.
     */
    public static void skipPart(String why) {
        Cluster.log("line-skip: " + version() + ": " + why);
    }

    public static boolean hasMethod(Class<?> c, String name, Class<?>... params) {
        try {
            c.getMethod(name, params);
            return true;
        } catch (NoSuchMethodException e) {
            return false;
        }
    }
}
