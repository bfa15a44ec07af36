//! Debug-only fault injection in the real-disk drivers: writes and/or syncs of the files under
//! a chosen directory fail with EIO, from the moment a rule is set until it is cleared.
//!
//! Why: a disk that starts failing is a fault a bookie must survive without acknowledging
//! anything it did not sync (ARCHITECTURE.md §5, invariant 2), and the cluster fault campaign
//! (`scripts/chaos`, issue 15) must be able to cause it on a real bookie. The usual tool, a
//! device-mapper target (`dm-error`, `dm-flakey`), is missing from kernels without
//! device-mapper, so the storage port injects the error itself, below the journal and the entry
//! log, exactly where a real EIO would surface.
//!
//! Safety of production builds: everything here exists only with the cargo feature
//! `fault-injection` (off by default; `cargo build -p bookie --features fault-injection`).
//! Without it [`injected`] is a constant `None` the compiler removes, and [`start_from_env`]
//! refuses to start a bookie that names a control file, so a campaign can never run, unknowingly,
//! against a bookie that ignores its faults. With the feature, nothing fails until rules are
//! set; the check on each write and sync is one relaxed atomic load while none are.
//!
//! Control: the process names a control file in `BOOKIE_FAULT_INJECTION_FILE` at start; a
//! watcher thread reads it every 50 ms. Each line is `write DIR`, `fsync DIR` or `all DIR`
//! (blank lines and `#` comments ignored): writes, syncs (`fdatasync` of a file and `fsync` of
//! a directory), or both, of the files under `DIR` fail with EIO. A missing or empty file
//! clears every rule. In-process users (tests) call [`set`] and [`clear`].

use crate::IoError;
use std::path::{Path, PathBuf};

/// The environment variable naming the control file.
pub const CONTROL_ENV: &str = "BOOKIE_FAULT_INJECTION_FILE";

/// What kind of data operation is being issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultOp {
    Write,
    Sync,
}

/// One rule: which operations fail under which directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultRule {
    pub dir: PathBuf,
    pub writes: bool,
    pub syncs: bool,
}

impl FaultRule {
    /// Whether an operation `op` on a file in directory `path` fails under this rule.
    pub fn matches(&self, op: FaultOp, path: &Path) -> bool {
        let wanted = match op {
            FaultOp::Write => self.writes,
            FaultOp::Sync => self.syncs,
        };
        wanted && path.starts_with(&self.dir)
    }
}

/// Parses a control file's text (see the module docs).
pub fn parse_rules(text: &str) -> Result<Vec<FaultRule>, String> {
    let mut rules = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (kind, dir) = line
            .split_once(char::is_whitespace)
            .map(|(k, d)| (k, d.trim()))
            .ok_or_else(|| format!("line {}: expected `write|fsync|all DIR`: {line}", n + 1))?;
        let (writes, syncs) = match kind {
            "write" => (true, false),
            "fsync" => (false, true),
            "all" => (true, true),
            _ => {
                return Err(format!(
                    "line {}: unknown fault `{kind}` (write, fsync or all)",
                    n + 1
                ))
            }
        };
        if !dir.starts_with('/') {
            return Err(format!("line {}: {dir} is not an absolute path", n + 1));
        }
        rules.push(FaultRule {
            dir: PathBuf::from(dir),
            writes,
            syncs,
        });
    }
    Ok(rules)
}

#[cfg(feature = "fault-injection")]
mod armed {
    use super::{FaultOp, FaultRule, IoError};
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;

    /// Whether any rule is set: the only thing the data path reads while none is.
    pub(super) static ARMED: AtomicBool = AtomicBool::new(false);
    pub(super) static RULES: Mutex<Vec<FaultRule>> = Mutex::new(Vec::new());

    pub(super) fn set(rules: Vec<FaultRule>) {
        let mut held = RULES.lock().unwrap_or_else(|e| e.into_inner());
        if *held == rules {
            return;
        }
        if rules.is_empty() {
            log::warn!("fault injection: every rule cleared; the disks work again");
        } else {
            for r in &rules {
                let what = match (r.writes, r.syncs) {
                    (true, true) => "writes and syncs",
                    (true, false) => "writes",
                    _ => "syncs",
                };
                log::warn!(
                    "fault injection: {what} under {} fail with EIO from now",
                    r.dir.display()
                );
            }
        }
        ARMED.store(!rules.is_empty(), Ordering::Relaxed);
        *held = rules;
    }

    #[inline]
    pub(super) fn injected<'a>(
        op: FaultOp,
        paths: impl Iterator<Item = &'a Path>,
    ) -> Option<IoError> {
        if !ARMED.load(Ordering::Relaxed) {
            return None;
        }
        let rules = RULES.lock().unwrap_or_else(|e| e.into_inner());
        for path in paths {
            if rules.iter().any(|r| r.matches(op, path)) {
                return Some(IoError::EIO);
            }
        }
        None
    }
}

/// Sets the rules in force (replacing any), from now on. Logged as a warning when they change.
#[cfg(feature = "fault-injection")]
pub fn set(rules: Vec<FaultRule>) {
    armed::set(rules)
}

/// Clears every rule.
#[cfg(feature = "fault-injection")]
pub fn clear() {
    armed::set(Vec::new())
}

/// The error to inject into an operation of kind `op` on a file in one of `paths` (a file's
/// directory; for a directory sync, each member), or `None`. Always `None` without the
/// feature.
#[inline(always)]
pub(crate) fn injected<'a>(op: FaultOp, paths: impl Iterator<Item = &'a Path>) -> Option<IoError> {
    #[cfg(feature = "fault-injection")]
    {
        armed::injected(op, paths)
    }
    #[cfg(not(feature = "fault-injection"))]
    {
        let _ = (op, paths);
        None
    }
}

/// Starts watching the control file named by [`CONTROL_ENV`], if set: returns its path (`None`
/// when unset). Fails when it is set but this build has no `fault-injection` feature, or when
/// its directory does not exist, so that faults are never silently ignored.
pub fn start_from_env() -> Result<Option<PathBuf>, String> {
    let Some(file) = std::env::var_os(CONTROL_ENV) else {
        return Ok(None);
    };
    let file = PathBuf::from(file);
    if !cfg!(feature = "fault-injection") {
        return Err(format!(
            "{CONTROL_ENV} is set ({}), but this bookie was built without the \
             `fault-injection` feature: it cannot inject disk faults. Unset it, or build \
             with `cargo build -p bookie --features fault-injection`",
            file.display()
        ));
    }
    if !file.is_absolute() || !file.parent().is_some_and(Path::is_dir) {
        return Err(format!(
            "{CONTROL_ENV}={}: must be an absolute path in an existing directory",
            file.display()
        ));
    }
    #[cfg(feature = "fault-injection")]
    watch(file.clone())?;
    Ok(Some(file))
}

/// The watcher thread: reads the control file every 50 ms and applies its rules when they
/// change; a file that does not parse keeps the rules in force and is logged.
#[cfg(feature = "fault-injection")]
fn watch(file: PathBuf) -> Result<(), String> {
    log::warn!(
        "FAULT INJECTION BUILD: disk faults are read from {} (debug only, never in production)",
        file.display()
    );
    let apply = |file: &Path, last: &mut Option<String>| {
        let text = match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => {
                log::error!("fault injection: cannot read {}: {e}", file.display());
                return;
            }
        };
        if last.as_deref() == Some(text.as_str()) {
            return;
        }
        match parse_rules(&text) {
            Ok(rules) => set(rules),
            Err(e) => log::error!("fault injection: {}: {e}; rules unchanged", file.display()),
        }
        *last = Some(text);
    };
    let mut last = None;
    // The rules in force at start apply before the first file is opened.
    apply(&file, &mut last);
    std::thread::Builder::new()
        .name("fault-injection".into())
        .spawn(move || loop {
            std::thread::sleep(std::time::Duration::from_millis(50));
            apply(&file, &mut last);
        })
        .map(|_| ())
        .map_err(|e| format!("cannot start the fault-injection watcher: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_lines_parse_into_rules() {
        let rules = parse_rules("# comment\n\nfsync /d/journal\nwrite /d/ledgers\nall /x\n")
            .expect("parses");
        assert_eq!(
            rules,
            vec![
                FaultRule {
                    dir: "/d/journal".into(),
                    writes: false,
                    syncs: true
                },
                FaultRule {
                    dir: "/d/ledgers".into(),
                    writes: true,
                    syncs: false
                },
                FaultRule {
                    dir: "/x".into(),
                    writes: true,
                    syncs: true
                },
            ]
        );
        assert!(parse_rules("").expect("empty").is_empty());
    }

    #[test]
    fn bad_control_lines_are_refused_with_the_line() {
        let e = parse_rules("fsync /ok\nbreak /d").expect_err("unknown kind");
        assert!(e.contains("line 2") && e.contains("break"), "{e}");
        assert!(parse_rules("fsync relative/dir")
            .expect_err("relative")
            .contains("absolute"));
        assert!(parse_rules("fsync").expect_err("no dir").contains("line 1"));
    }

    #[test]
    fn a_rule_matches_its_directory_and_what_is_below_only() {
        let r = FaultRule {
            dir: "/d/journal".into(),
            writes: false,
            syncs: true,
        };
        assert!(r.matches(FaultOp::Sync, Path::new("/d/journal/current/shard-0")));
        assert!(r.matches(FaultOp::Sync, Path::new("/d/journal")));
        assert!(!r.matches(FaultOp::Write, Path::new("/d/journal")));
        assert!(!r.matches(FaultOp::Sync, Path::new("/d/journal2")));
        assert!(!r.matches(FaultOp::Sync, Path::new("/d/ledgers")));
    }
}
