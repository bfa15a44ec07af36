//! The bookie's process-wide state (docs/semantics.md §3.2, §3.3): running, shutting down,
//! read-only and why, and the disk checker that turns the bookie read-only when a directory
//! fills up.
//!
//! Why one shared state: read-only is a property of the bookie, not of a shard — clients and
//! the ZooKeeper registration see one bookie. The shards consult it on every add with one
//! relaxed atomic load (no lock on the hot path). The reasons are bits, so that each source
//! sets and clears only its own:
//!
//! - `FORCED`: `forceReadOnlyBookie`, for good (manual writable refused);
//! - `MANUAL`: HTTP `PUT /api/v1/bookie/state/readonly`; sticky, the disk checker never
//!   clears it;
//! - `DISK_FULL`: set by the disk checker when any ledger or index directory reaches
//!   `diskUsageThreshold` (Java's `readOnlyModeOnAnyDiskFullEnabled`, default true), or with
//!   that key false when every ledger directory (or every index directory) does; and when any
//!   journal directory does. Cleared when none is full; after every one was, only once the
//!   total usage is also below `diskUsageLwmThreshold`. A full ledger directory is marked not
//!   writable either way: the shards' new entry logs go to the others (`store/ledger_dirs.rs`);
//! - `IO_FAILURE`: a journal or ledger-storage failure in a shard; never cleared (a restart
//!   is the way back, as Java shuts down on these).
//!
//! What read-only means for requests follows Java's `WriteEntryProcessor(V3)`: adds get
//! EREADONLY unless the request is high priority (the Java client sets it on recovery adds)
//! and high-priority writes are available — they are, unless the disks are full with less
//! than `minUsableSizeForHighPriorityWrites` free anywhere, or storage failed. WRITE_LAC is
//! refused whenever read-only (`WriteLacProcessorV3`). Reads, fence reads, READ_LAC and long
//! polls go on.
//!
//! The hook for the registration: [`BookieState::subscribe`] is a watch channel of the
//! read-only flag; the metadata part moves the znode between `available/` and
//! `available/readonly/` when it changes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::time::Duration;

use tokio::sync::{watch, Notify};

use crate::config::DiskConfig;

pub const FORCED: u8 = 1;
pub const MANUAL: u8 = 2;
pub const DISK_FULL: u8 = 4;
pub const IO_FAILURE: u8 = 8;

pub use super::disk_space::{disk_usage, ledger_space, DiskUsage};

/// What a checked directory holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirKind {
    Ledger,
    Index,
    Journal,
}

/// One checked directory, as the metrics and the HTTP info show it.
pub struct DirStatus {
    pub path: PathBuf,
    pub kind: DirKind,
    /// Last usage, as f64 bits.
    usage_bits: AtomicU64,
    /// Below `diskUsageThreshold`; shared with the placement of new entry-log files.
    writable: Arc<AtomicBool>,
}

impl DirStatus {
    pub fn usage(&self) -> f64 {
        f64::from_bits(self.usage_bits.load(Ordering::Relaxed))
    }
    pub fn writable(&self) -> bool {
        self.writable.load(Ordering::Relaxed)
    }
    /// The flag the disk checker clears when the directory fills.
    pub fn writable_flag(&self) -> Arc<AtomicBool> {
        self.writable.clone()
    }
}

/// The process-wide state, shared (in an `Arc`) by the shards, the disk checker, the HTTP
/// server and the registration.
pub struct BookieState {
    reasons: AtomicU8,
    high_priority: AtomicBool,
    running: AtomicBool,
    shutting_down: AtomicBool,
    read_only_mode_enabled: bool,
    changes: watch::Sender<bool>,
    /// Asks the main thread to stop the bookie (a full disk with read-only mode disabled).
    fatal: Notify,
    fatal_reason: Mutex<Option<String>>,
    /// The ledger and journal directories the disk checker watches.
    pub dirs: Vec<DirStatus>,
    /// The fullest directory's level at the last check ([`DISK_OK`], [`DISK_ALMOST_FULL`],
    /// [`DISK_FULL_LEVEL`]): garbage collection suspends or forces compaction by it.
    disk_pressure: AtomicU8,
    /// Whether every ledger (or index) directory, or a journal directory, was full at the last
    /// check that found one full: then writable again needs the total usage below
    /// `diskUsageLwmThreshold` (Java: no writable directory left); read-only by the
    /// any-directory rule alone ends as soon as none is full.
    full_was_every: AtomicBool,
    /// `persistBookieStatusEnabled`: the `BOOKIE_STATUS` files a change of mode is written to.
    persist: std::sync::OnceLock<Vec<PathBuf>>,
}

/// No directory above `diskUsageWarnThreshold`.
pub const DISK_OK: u8 = 0;
/// A directory above `diskUsageWarnThreshold` (Java's `diskAlmostFull`, `diskJustWritable`).
pub const DISK_ALMOST_FULL: u8 = 1;
/// A directory at `diskUsageThreshold` or above (Java's `diskFull`, `allDisksFull`).
pub const DISK_FULL_LEVEL: u8 = 2;

impl BookieState {
    pub fn new(disk: &DiskConfig, dirs: &[(&Path, DirKind)]) -> BookieState {
        let forced = disk.force_read_only && disk.read_only_mode_enabled;
        let (changes, _) = watch::channel(forced);
        BookieState {
            reasons: AtomicU8::new(if forced { FORCED } else { 0 }),
            high_priority: AtomicBool::new(true),
            running: AtomicBool::new(false),
            shutting_down: AtomicBool::new(false),
            read_only_mode_enabled: disk.read_only_mode_enabled,
            changes,
            fatal: Notify::new(),
            fatal_reason: Mutex::new(None),
            dirs: dirs
                .iter()
                .map(|&(p, kind)| DirStatus {
                    path: p.to_path_buf(),
                    kind,
                    usage_bits: AtomicU64::new(0f64.to_bits()),
                    writable: Arc::new(AtomicBool::new(true)),
                })
                .collect(),
            disk_pressure: AtomicU8::new(DISK_OK),
            full_was_every: AtomicBool::new(false),
            persist: std::sync::OnceLock::new(),
        }
    }

    /// Why the bookie is read-only (bits), 0 when writable.
    pub fn reasons(&self) -> u8 {
        self.reasons.load(Ordering::Relaxed)
    }

    /// The level of the fullest directory at the last disk check.
    pub fn disk_pressure(&self) -> u8 {
        self.disk_pressure.load(Ordering::Relaxed)
    }

    pub fn is_read_only(&self) -> bool {
        self.reasons() != 0
    }

    /// `availableForHighPriorityWrites`.
    pub fn high_priority_available(&self) -> bool {
        self.reasons() & IO_FAILURE == 0 && self.high_priority.load(Ordering::Relaxed)
    }

    /// Whether an add may go in (the hot path: one or two relaxed loads).
    #[inline]
    pub fn accepts_add(&self, high_priority: bool) -> bool {
        let reasons = self.reasons();
        reasons == 0
            || (high_priority
                && reasons & IO_FAILURE == 0
                && self.high_priority.load(Ordering::Relaxed))
    }

    /// Whether WRITE_LAC may go in.
    #[inline]
    pub fn accepts_write_lac(&self) -> bool {
        self.reasons() == 0
    }

    /// The read-only flag as a watch channel (the registration's hook).
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.changes.subscribe()
    }

    fn update(&self, set: u8, clear: u8, why: &str) {
        let before = self
            .reasons
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| {
                Some((r | set) & !clear)
            })
            .unwrap_or_else(|r| r);
        let after = (before | set) & !clear;
        if (before != 0) != (after != 0) {
            if after != 0 {
                log::warn!("bookie is read-only now: {why}");
            } else {
                log::info!("bookie is writable again: {why}");
            }
        }
        let ro = after != 0;
        // Java writes BOOKIE_STATUS on a change of mode by an operator or by the disks; a
        // storage failure is read-only until the restart (Java stops), so it is not kept.
        if (before != 0) != ro && (set | clear) & (MANUAL | DISK_FULL) != 0 {
            if let Some(files) = self.persist.get() {
                // Java's isManuallyModifiedToReadOnly: false once writable
                let status =
                    crate::admin::bookie_status::BookieStatus::now(ro, after & MANUAL != 0);
                let _ = crate::admin::bookie_status::write_all(files, &status);
            }
        }
        self.changes.send_if_modified(|v| {
            let changed = *v != ro;
            *v = ro;
            changed
        });
    }

    /// `persistBookieStatusEnabled`: from now on a change of mode is written to `files`; and
    /// the newest of them, read now, gives the mode to start in (before the registration). A
    /// read-only kept by an operator's hand comes back as theirs (sticky); one the disks set
    /// comes back as the disks' (the next disk check clears it when none is full).
    pub fn persist_status(&self, files: Vec<PathBuf>) {
        let saved = crate::admin::bookie_status::read_newest(&files);
        let _ = self.persist.set(files);
        match saved {
            Some(s)
                if s.read_only && self.read_only_mode_enabled && self.reasons() & FORCED == 0 =>
            {
                let (bit, why) = if s.manual {
                    (MANUAL, "read-only as an operator left it (BOOKIE_STATUS)")
                } else {
                    (DISK_FULL, "read-only as the disks left it (BOOKIE_STATUS)")
                };
                self.update(bit, 0, why);
            }
            _ => {}
        }
    }

    /// A journal or ledger-storage failure: read-only until restart.
    pub fn set_io_failure(&self, why: &str) {
        if self.reasons() & IO_FAILURE == 0 {
            self.update(IO_FAILURE, 0, why);
        }
    }

    /// HTTP `PUT /api/v1/bookie/state/readonly`. Refused (with the reason) when read-only is
    /// forced by configuration, or when read-only mode is disabled and read-only is asked.
    pub fn set_manual(&self, read_only: bool) -> Result<(), String> {
        if read_only {
            if !self.read_only_mode_enabled {
                return Err("read-only mode is disabled (readOnlyModeEnabled=false)".into());
            }
            self.update(MANUAL, 0, "set read-only by an operator");
        } else {
            if self.reasons() & FORCED != 0 {
                return Err("read-only is forced by configuration (forceReadOnlyBookie)".into());
            }
            self.update(0, MANUAL, "set writable by an operator");
        }
        Ok(())
    }

    /// `forceReadOnlyBookie`: read-only for good.
    pub fn is_forced_read_only(&self) -> bool {
        self.reasons() & FORCED != 0
    }

    /// `readOnlyModeEnabled`.
    pub fn read_only_mode_enabled(&self) -> bool {
        self.read_only_mode_enabled
    }

    pub fn set_running(&self, running: bool) {
        self.running.store(running, Ordering::Relaxed);
    }

    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::Relaxed)
    }

    pub fn set_shutting_down(&self) {
        self.shutting_down.store(true, Ordering::Relaxed);
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Relaxed)
    }

    /// Asks the main thread to stop the bookie.
    pub fn request_stop(&self, why: String) {
        log::error!("stopping the bookie: {why}");
        if let Ok(mut r) = self.fatal_reason.lock() {
            r.get_or_insert(why);
        }
        self.fatal.notify_one();
    }

    /// Resolves when something asked the bookie to stop; returns why.
    pub async fn stop_requested(&self) -> String {
        self.fatal.notified().await;
        self.fatal_reason
            .lock()
            .ok()
            .and_then(|r| r.clone())
            .unwrap_or_default()
    }

    /// One pass of the disk checker (Java's `LedgerDirsMonitor`), with `usage_of` measuring a
    /// directory (statvfs in the bookie, a table in tests).
    pub fn check_disks(
        &self,
        disk: &DiskConfig,
        warned: &mut bool,
        usage_of: &mut dyn FnMut(&Path) -> std::io::Result<DiskUsage>,
    ) {
        // Per kind: (directories, full ones).
        let mut counts = [(0usize, 0usize); 3];
        let mut any_warn = false;
        let mut high_priority = false;
        let (mut usable, mut total) = (0u64, 0u64);
        for dir in &self.dirs {
            let u = match usage_of(&dir.path) {
                Ok(u) => u,
                Err(e) => {
                    self.set_io_failure(&format!("cannot check {}: {e}", dir.path.display()));
                    return;
                }
            };
            let usage = u.usage();
            dir.usage_bits.store(usage.to_bits(), Ordering::Relaxed);
            let full = usage >= disk.usage_threshold;
            dir.writable.store(!full, Ordering::Relaxed);
            let c = &mut counts[dir.kind as usize];
            c.0 += 1;
            c.1 += full as usize;
            any_warn |= usage >= disk.warn_threshold;
            high_priority |= u.usable_bytes >= disk.min_usable_for_high_priority;
            usable += u.usable_bytes;
            total += u.total_bytes;
        }
        let total_usage = DiskUsage {
            total_bytes: total,
            usable_bytes: usable,
        }
        .usage();
        let all =
            |k: DirKind| counts[k as usize].0 > 0 && counts[k as usize].1 == counts[k as usize].0;
        let every_full =
            all(DirKind::Ledger) || all(DirKind::Index) || counts[DirKind::Journal as usize].1 > 0;
        // Java's readOnlyModeOnAnyDiskFullEnabled (`LedgerDirsMonitor`: anyDiskFull), for the
        // ledger and the index directories alike.
        let one_full =
            counts[DirKind::Ledger as usize].1 > 0 || counts[DirKind::Index as usize].1 > 0;
        let any_full = every_full || (disk.read_only_on_any_full && one_full);
        if any_warn && !*warned {
            log::warn!(
                "disk usage above diskUsageWarnThreshold ({}): {}",
                disk.warn_threshold,
                self.describe_dirs()
            );
        }
        *warned = any_warn;
        let level = if any_full {
            DISK_FULL_LEVEL
        } else if any_warn {
            DISK_ALMOST_FULL
        } else {
            DISK_OK
        };
        self.disk_pressure.store(level, Ordering::Relaxed);
        let full_now = self.reasons() & DISK_FULL != 0;
        if any_full {
            // Recovery adds go on while some directory is not full (Java computes the
            // high-priority space only when every ledger directory is).
            self.high_priority
                .store(high_priority || !every_full, Ordering::Relaxed);
            self.full_was_every.store(every_full, Ordering::Relaxed);
            if !full_now {
                let why = format!(
                    "{} reached diskUsageThreshold ({}): {}",
                    if every_full {
                        "every ledger (or index) directory, or a journal directory,"
                    } else {
                        "a ledger (or index) directory (readOnlyModeOnAnyDiskFullEnabled)"
                    },
                    disk.usage_threshold,
                    self.describe_dirs()
                );
                if self.read_only_mode_enabled {
                    self.update(DISK_FULL, 0, &why);
                } else {
                    self.request_stop(format!("{why}, and readOnlyModeEnabled=false"));
                }
            }
        } else {
            self.high_priority.store(true, Ordering::Relaxed);
            // As Java: with no directory left writable, back only below the low-water mark;
            // read-only by the any-directory rule ends once no directory is full.
            let every_was_full = self.full_was_every.load(Ordering::Relaxed);
            if full_now && (!every_was_full || total_usage < disk.lwm_threshold) {
                let why = if every_was_full {
                    format!(
                        "disk usage {total_usage:.4} is below diskUsageLwmThreshold ({})",
                        disk.lwm_threshold
                    )
                } else {
                    "no ledger (or index) directory is full any more".to_string()
                };
                self.full_was_every.store(false, Ordering::Relaxed);
                self.update(0, DISK_FULL, &why);
            }
        }
    }

    fn describe_dirs(&self) -> String {
        self.dirs
            .iter()
            .map(|d| format!("{} {:.4}", d.path.display(), d.usage()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Runs the disk checker every `diskCheckInterval` until `stop` fires (or is dropped).
pub fn spawn_disk_checker(
    state: std::sync::Arc<BookieState>,
    disk: DiskConfig,
    stop: std_mpsc::Receiver<()>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("disk-checker".into())
        .spawn(move || {
            let mut warned = false;
            loop {
                state.check_disks(&disk, &mut warned, &mut |p| disk_usage(p));
                match stop.recv_timeout(disk.check_interval.max(Duration::from_millis(10))) {
                    Err(std_mpsc::RecvTimeoutError::Timeout) => {}
                    _ => return,
                }
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// statvfs of a real directory: a size, no more usable than total; a missing one fails.
    #[test]
    fn disk_usage_of_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let u = disk_usage(dir.path()).unwrap();
        assert!(
            u.total_bytes > 0 && u.usable_bytes <= u.total_bytes,
            "{u:?}"
        );
        let missing = disk_usage(&dir.path().join("missing")).unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
    }

    fn disk() -> DiskConfig {
        DiskConfig {
            usage_threshold: 0.95,
            warn_threshold: 0.90,
            lwm_threshold: 0.85,
            min_usable_for_high_priority: 100,
            ..DiskConfig::default()
        }
    }

    fn state() -> BookieState {
        BookieState::new(
            &disk(),
            &[
                (Path::new("/a"), DirKind::Ledger),
                (Path::new("/b"), DirKind::Journal),
            ],
        )
    }

    /// Three ledger directories and a journal, measured from a table of usages.
    fn three_ledger_dirs(disk: &DiskConfig) -> (BookieState, impl Fn(&BookieState, [f64; 4])) {
        let s = BookieState::new(
            disk,
            &[
                (Path::new("/l1"), DirKind::Ledger),
                (Path::new("/l2"), DirKind::Ledger),
                (Path::new("/l3"), DirKind::Ledger),
                (Path::new("/j"), DirKind::Journal),
            ],
        );
        let disk = disk.clone();
        let run = move |s: &BookieState, used: [f64; 4]| {
            let mut warned = false;
            s.check_disks(&disk, &mut warned, &mut |p| {
                let i = ["/l1", "/l2", "/l3", "/j"]
                    .iter()
                    .position(|d| Path::new(d) == p)
                    .unwrap();
                Ok(DiskUsage {
                    total_bytes: 10_000,
                    usable_bytes: ((1.0 - used[i]) * 10_000.0) as u64,
                })
            });
        };
        (s, run)
    }

    #[test]
    fn any_full_ledger_directory_turns_read_only_by_default_as_java() {
        // Java's readOnlyModeOnAnyDiskFullEnabled (default true since 4.16).
        let d = DiskConfig {
            lwm_threshold: 0.5,
            ..disk()
        };
        assert!(d.read_only_on_any_full);
        let (s, run) = three_ledger_dirs(&d);
        run(&s, [0.96, 0.2, 0.2, 0.2]);
        assert!(s.is_read_only(), "one full ledger directory");
        assert!(s.high_priority_available(), "the others take recovery adds");
        assert_eq!(s.disk_pressure(), DISK_FULL_LEVEL);
        run(&s, [0.94, 0.2, 0.2, 0.2]);
        assert!(
            !s.is_read_only(),
            "none full: writable at once (others were writable: no low-water mark), total {}",
            (0.94 + 0.6) / 3.0
        );
        // Every directory full: the low-water mark applies to the way back.
        run(&s, [0.96, 0.96, 0.96, 0.2]);
        assert!(s.is_read_only());
        run(&s, [0.9, 0.9, 0.9, 0.2]);
        assert!(
            s.is_read_only(),
            "total 0.9 is above the low-water mark 0.5"
        );
        run(&s, [0.4, 0.4, 0.4, 0.2]);
        assert!(!s.is_read_only(), "below the low-water mark");
        // The key off: the other directories take the new entry logs.
        let (s, run) = three_ledger_dirs(&DiskConfig {
            read_only_on_any_full: false,
            ..d
        });
        run(&s, [0.96, 0.96, 0.2, 0.2]);
        assert!(!s.is_read_only());
        run(&s, [0.96, 0.96, 0.96, 0.2]);
        assert!(s.is_read_only());
    }

    #[test]
    fn a_full_ledger_directory_goes_read_only_alone() {
        let s = BookieState::new(
            &DiskConfig {
                read_only_on_any_full: false,
                ..disk()
            },
            &[
                (Path::new("/l1"), DirKind::Ledger),
                (Path::new("/l2"), DirKind::Ledger),
                (Path::new("/j"), DirKind::Journal),
            ],
        );
        let run = |l1: f64, l2: f64, j: f64| {
            let mut warned = false;
            let d = DiskConfig {
                read_only_on_any_full: false,
                ..disk()
            };
            s.check_disks(&d, &mut warned, &mut |p| {
                let used = match p.to_str() {
                    Some("/l1") => l1,
                    Some("/l2") => l2,
                    _ => j,
                };
                Ok(DiskUsage {
                    total_bytes: 10_000,
                    usable_bytes: ((1.0 - used) * 10_000.0) as u64,
                })
            });
        };
        run(0.96, 0.5, 0.5);
        assert!(
            !s.is_read_only(),
            "the other ledger directory takes new entry logs"
        );
        assert!(!s.dirs[0].writable() && s.dirs[1].writable());
        run(0.96, 0.97, 0.5);
        assert!(s.is_read_only(), "every ledger directory full");
        run(0.5, 0.5, 0.5);
        assert!(!s.is_read_only());
        run(0.5, 0.5, 0.96);
        assert!(s.is_read_only(), "a journal directory full");
    }

    fn check(s: &BookieState, a: f64, b: f64) {
        let mut warned = false;
        s.check_disks(&disk(), &mut warned, &mut |p| {
            let used = if p == Path::new("/a") { a } else { b };
            Ok(DiskUsage {
                total_bytes: 10_000,
                usable_bytes: ((1.0 - used) * 10_000.0) as u64,
            })
        });
    }

    #[test]
    fn disk_threshold_with_hysteresis() {
        let s = state();
        let rx = s.subscribe();
        check(&s, 0.5, 0.5);
        assert!(!s.is_read_only());
        assert_eq!(s.disk_pressure(), DISK_OK);
        check(&s, 0.91, 0.5);
        assert_eq!(s.disk_pressure(), DISK_ALMOST_FULL);
        assert!(!s.is_read_only());
        check(&s, 0.96, 0.5);
        assert_eq!(s.disk_pressure(), DISK_FULL_LEVEL);
        assert!(s.is_read_only() && *rx.borrow());
        assert!(!s.accepts_add(false));
        assert!(s.accepts_add(true), "400 bytes free on /a, 5000 on /b");
        assert!(!s.accepts_write_lac());
        // Below the threshold but total above the low-water mark: still read-only.
        check(&s, 0.94, 0.80);
        assert!(s.is_read_only());
        assert_eq!(s.disk_pressure(), DISK_ALMOST_FULL);
        check(&s, 0.90, 0.70);
        assert!(!s.is_read_only() && !*rx.borrow());
        assert!(s.accepts_add(false));
    }

    #[test]
    fn high_priority_needs_free_space() {
        let s = state();
        check(&s, 0.999, 0.999);
        assert!(s.is_read_only());
        assert!(!s.accepts_add(true), "10 bytes free < 100");
    }

    #[test]
    fn manual_is_sticky_and_io_failure_permanent() {
        let s = state();
        s.set_manual(true).unwrap();
        check(&s, 0.1, 0.1);
        assert!(
            s.is_read_only(),
            "the disk checker does not clear a manual read-only"
        );
        assert!(s.accepts_add(true));
        s.set_manual(false).unwrap();
        assert!(!s.is_read_only());
        s.set_io_failure("journal died");
        assert!(s.set_manual(false).is_ok());
        assert!(s.is_read_only() && !s.accepts_add(true));
        check(&s, 0.1, 0.1);
        assert!(s.is_read_only());
    }

    #[test]
    fn forced_and_disabled() {
        let forced = BookieState::new(
            &DiskConfig {
                force_read_only: true,
                ..disk()
            },
            &[],
        );
        assert!(forced.is_read_only() && *forced.subscribe().borrow());
        assert!(forced.set_manual(false).is_err());
        let disabled = BookieState::new(
            &DiskConfig {
                read_only_mode_enabled: false,
                ..disk()
            },
            &[(Path::new("/a"), DirKind::Ledger)],
        );
        assert!(disabled.set_manual(true).is_err());
        let mut warned = false;
        disabled.check_disks(&disk(), &mut warned, &mut |_| {
            Ok(DiskUsage {
                total_bytes: 100,
                usable_bytes: 1,
            })
        });
        assert!(
            !disabled.is_read_only(),
            "a full disk stops the bookie instead"
        );
        assert!(disabled.fatal_reason.lock().unwrap().is_some());
    }
}
