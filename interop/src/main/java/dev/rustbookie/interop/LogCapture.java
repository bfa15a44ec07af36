package dev.rustbookie.interop;

import java.util.ArrayList;
import java.util.List;
import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.core.LogEvent;
import org.apache.logging.log4j.core.LoggerContext;
import org.apache.logging.log4j.core.appender.AbstractAppender;
import org.apache.logging.log4j.core.config.Configuration;
import org.apache.logging.log4j.core.config.Property;

/** Collects the WARN/ERROR lines the BookKeeper client logs in this JVM (to check for resets). */
public final class LogCapture extends AbstractAppender implements AutoCloseable {
    private final List<String> lines = new ArrayList<>();

    private LogCapture() {
        super("interop-capture", null, null, true, Property.EMPTY_ARRAY);
    }

    public static LogCapture install() {
        LogCapture c = new LogCapture();
        c.start();
        LoggerContext ctx = (LoggerContext) LogManager.getContext(false);
        Configuration config = ctx.getConfiguration();
        config.getRootLogger().addAppender(c, Level.WARN, null);
        ctx.updateLoggers();
        return c;
    }

    @Override
    public void append(LogEvent e) {
        StringBuilder sb = new StringBuilder();
        sb.append(e.getLevel()).append(' ').append(e.getLoggerName()).append(" - ")
                .append(e.getMessage().getFormattedMessage());
        Throwable t = e.getThrown();
        while (t != null) {
            sb.append(" | ").append(t);
            t = t.getCause();
        }
        synchronized (lines) {
            lines.add(sb.toString());
        }
    }

    public List<String> matching(String... needles) {
        List<String> out = new ArrayList<>();
        synchronized (lines) {
            for (String l : lines) {
                for (String n : needles) {
                    if (l.toLowerCase().contains(n.toLowerCase())) {
                        out.add(l);
                        break;
                    }
                }
            }
        }
        return out;
    }

    @Override
    public void close() {
        LoggerContext ctx = (LoggerContext) LogManager.getContext(false);
        ctx.getConfiguration().getRootLogger().removeAppender(getName());
        ctx.updateLoggers();
        stop();
    }
}
