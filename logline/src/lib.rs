//! The stderr logger shared by the `bookie` and `bkperf` binaries: each record is one line
//! `[+seconds LEVEL target] message`, seconds counted from `init` with millisecond precision
//! and the level padded to five characters. Tests and operators grep these lines (e.g. the
//! bookie's "listening on", "torn tail", "bad frame"), so the format is fixed here, once. A
//! leaf crate (it depends on `log` only) so that bkperf need not depend on the bookie.

#![forbid(unsafe_code)]

use std::sync::OnceLock;
use std::time::Instant;

/// Writes `[+seconds LEVEL target] message` lines to stderr.
struct StderrLogger;

static START: OnceLock<Instant> = OnceLock::new();
static LOGGER: StderrLogger = StderrLogger;

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            eprintln!("{}", line(elapsed_secs(), record));
        }
    }

    fn flush(&self) {}
}

/// Seconds since `init` (or since the first record, before `init`).
fn elapsed_secs() -> f64 {
    START.get_or_init(Instant::now).elapsed().as_secs_f64()
}

/// One record as a log line, `t` seconds after the start.
fn line(t: f64, record: &log::Record<'_>) -> String {
    format!(
        "[+{t:.3}s {:5} {}] {}",
        record.level(),
        record.target(),
        record.args()
    )
}

/// The level for a count of `-v` flags: none takes `env_var` (a `log` level name such as
/// `info` or `debug`) or else info; `-v` is debug, `-vv` and more trace.
fn level(verbose: u8, env_var: &str) -> log::LevelFilter {
    let from_env = std::env::var(env_var)
        .ok()
        .and_then(|v| v.parse::<log::LevelFilter>().ok());
    match verbose {
        0 => from_env.unwrap_or(log::LevelFilter::Info),
        1 => log::LevelFilter::Debug,
        _ => log::LevelFilter::Trace,
    }
}

/// Installs the stderr logger (once per process; later calls change nothing) at the level of
/// `verbose` `-v` flags or, without any, of the environment variable `env_var`; starts the
/// clock of the `+seconds` column.
pub fn init(env_var: &str, verbose: u8) {
    START.get_or_init(Instant::now);
    let level = level(verbose, env_var);
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(level);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_seconds_padded_level_target_and_message() {
        let args = format_args!("listening on {}", "127.0.0.1:3181");
        let record = log::Record::builder()
            .level(log::Level::Info)
            .target("bookie::server")
            .args(args)
            .build();
        assert_eq!(
            line(1.23456, &record),
            "[+1.235s INFO  bookie::server] listening on 127.0.0.1:3181"
        );
    }

    #[test]
    fn verbose_flags_win_over_the_environment() {
        assert_eq!(level(0, "LOGLINE_TEST_UNSET"), log::LevelFilter::Info);
        std::env::set_var("LOGLINE_TEST_LEVEL", "warn");
        assert_eq!(level(0, "LOGLINE_TEST_LEVEL"), log::LevelFilter::Warn);
        assert_eq!(level(1, "LOGLINE_TEST_LEVEL"), log::LevelFilter::Debug);
        assert_eq!(level(3, "LOGLINE_TEST_LEVEL"), log::LevelFilter::Trace);
    }
}
