//! The autorecovery daemon's series in `/metrics` (the bookie's admin server, or the
//! standalone daemon's own, `autorecovery/http.rs`).
//!
//! Java's names where Java counts the same thing the same way, under Java's scopes: in a bookie
//! the daemon's stats logger is scoped `replication` (`EmbeddedServer`), standalone it is the
//! root; below it `auditor` and `replication_worker`. So a bookie exports
//! `replication_replication_worker_NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED` as Java's does.
//! Beside them ours, `autorecovery_*`, for what Java counts in OpStats or not at all (which
//! role this process holds, ledgers recovered, bytes copied, failures).

use std::fmt::Write;

use autorecovery::live::daemon::Status;

/// Appends the daemon's series; `java_scope` is `"replication_"` in a bookie, `""` standalone.
pub fn render(o: &mut String, s: &Status, java_scope: &str) {
    let worker = format!("{java_scope}replication_worker_");
    counter(
        o,
        &format!("{worker}NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED"),
        s.ledgers_replicated,
    );
    counter(o, &format!("{worker}NUM_ENTRIES_WRITTEN"), s.entries_copied);
    gauge(o, "autorecovery_running", s.running as u64);
    gauge(o, "autorecovery_is_auditor", s.is_auditor as u64);
    gauge(o, "autorecovery_lost_bookies", s.lost_bookies.len() as u64);
    counter(o, "autorecovery_audits_total", s.audits);
    counter(o, "autorecovery_ledgers_marked_total", s.ledgers_marked);
    counter(
        o,
        "autorecovery_ledgers_replicated_total",
        s.ledgers_replicated,
    );
    counter(
        o,
        "autorecovery_ledgers_recovered_total",
        s.ledgers_recovered,
    );
    counter(o, "autorecovery_entries_copied_total", s.entries_copied);
    counter(o, "autorecovery_bytes_copied_total", s.bytes_copied);
    counter(o, "autorecovery_failures_total", s.failures);
}

fn gauge(o: &mut String, name: &str, v: u64) {
    let _ = writeln!(o, "# TYPE {name} gauge\n{name} {v}");
}

fn counter(o: &mut String, name: &str, v: u64) {
    let _ = writeln!(o, "# TYPE {name} counter\n{name} {v}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_names_carry_the_scope() {
        let s = Status {
            running: true,
            is_auditor: true,
            ledgers_replicated: 3,
            entries_copied: 700,
            ..Status::default()
        };
        let mut bookie = String::new();
        render(&mut bookie, &s, "replication_");
        assert!(bookie
            .contains("replication_replication_worker_NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED 3\n"));
        assert!(bookie.contains("replication_replication_worker_NUM_ENTRIES_WRITTEN 700\n"));
        assert!(bookie.contains("autorecovery_is_auditor 1\n"));
        let mut standalone = String::new();
        render(&mut standalone, &s, "");
        assert!(standalone.contains("\nreplication_worker_NUM_ENTRIES_WRITTEN 700\n"));
        // one TYPE line per series, Prometheus' text format
        for text in [&bookie, &standalone] {
            let types = text.lines().filter(|l| l.starts_with("# TYPE")).count();
            assert_eq!(types, text.lines().count() / 2);
        }
    }
}
