//! Gradual deletion of large files: entry-log segments retired by compaction and journal
//! segments trimmed beyond the pool, both renamed `*.trash` by their owners.
//!
//! Why: unlinking a large file frees all its extents at once, and on a file system mounted with
//! `discard` (this machine's ext4, and many cloud disks) the device then trims them while the
//! journal's commits queue behind. Measured here (a 4 KiB write + fdatasync loop beside it):
//! `rm` of three 64 MiB files stalled commits for 117 ms in all (35, 48 and 24 ms); the same
//! files truncated by 4 MiB every 10 ms stalled none over 8 ms. A compaction retires several
//! segments at once, which is where bench-gc's 200–280 ms stops of every add came from.
//!
//! So one thread per bookie takes trash paths over a channel and shortens each file by
//! [`STEP_BYTES`] with a pause after each step (at most [`BYTES_PER_SEC`]) before unlinking
//! what is left. A crash in between leaves a `*.trash` file that the owner finds at its next
//! open and hands here again.

use std::path::PathBuf;
use std::time::Duration;

/// Bytes cut from a file per truncation.
pub const STEP_BYTES: u64 = 4 << 20;
/// Deletion rate: a step every 10 ms.
pub const BYTES_PER_SEC: u64 = 400 << 20;

/// A handle on the deleting thread; cloned by every shard and flush thread.
#[derive(Clone)]
pub struct Reclaimer {
    tx: crossbeam_channel::Sender<PathBuf>,
}

impl Reclaimer {
    /// Starts the thread. It ends when every handle is dropped, after the queued files.
    pub fn start() -> std::io::Result<Reclaimer> {
        let (tx, rx) = crossbeam_channel::unbounded::<PathBuf>();
        std::thread::Builder::new()
            .name("reclaim".into())
            .spawn(move || {
                for path in rx {
                    delete_gradually(&path, STEP_BYTES, BYTES_PER_SEC);
                }
            })?;
        Ok(Reclaimer { tx })
    }

    /// Queues files for deletion.
    pub fn delete(&self, paths: impl IntoIterator<Item = PathBuf>) {
        for p in paths {
            if let Err(e) = self.tx.send(p) {
                // The thread is gone (shutdown): delete now rather than leak the file.
                let _ = std::fs::remove_file(e.0);
            }
        }
    }
}

/// Shortens `path` by `step` bytes at most `rate` bytes per second, then unlinks it. Errors are
/// logged: a file left behind is found again as trash at the next start.
pub fn delete_gradually(path: &std::path::Path, step: u64, rate: u64) {
    let pause = Duration::from_secs_f64(step as f64 / rate.max(1) as f64);
    match std::fs::OpenOptions::new().write(true).open(path) {
        Ok(file) => {
            let mut len = file.metadata().map(|m| m.len()).unwrap_or(0);
            while len > step {
                len -= step;
                if let Err(e) = file.set_len(len) {
                    log::warn!("cannot truncate {}: {e}", path.display());
                    break;
                }
                std::thread::sleep(pause);
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => log::warn!("cannot open {} to delete it: {e}", path.display()),
    }
    if let Err(e) = std::fs::remove_file(path) {
        if e.kind() != std::io::ErrorKind::NotFound {
            log::warn!("cannot delete {}: {e}", path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletes_a_file_in_steps_and_tolerates_a_missing_one() {
        let dir = std::env::temp_dir().join(format!("reclaim-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("0000000000000001.log.trash");
        std::fs::write(&path, vec![7u8; 10 * 4096 + 123]).unwrap();
        delete_gradually(&path, 4096, 4096 * 1000);
        assert!(!path.exists(), "the file is gone");
        delete_gradually(&path, 4096, 4096 * 1000);
        let r = Reclaimer::start().unwrap();
        let other = dir.join("0000000000000002.log.trash");
        std::fs::write(&other, vec![1u8; 3 * 4096]).unwrap();
        r.delete([other.clone()]);
        drop(r);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while other.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!other.exists(), "the thread deleted the queued file");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
