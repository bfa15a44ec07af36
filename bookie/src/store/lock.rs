//! An exclusive lock on a data directory, so two bookies (or a bookie and `bookie inspect`,
//! whose opening of ledger storage removes files a running flush may be writing) never work on
//! the same files. `flock` on a `LOCK` file: released by the kernel when the process dies.
//!
//! "When the process dies" is not "at once": after a SIGKILL the kernel releases the lock only
//! once every thread of the dying process has exited, measured at 9-165 ms for a bookie with
//! busy shards. A supervisor restarts faster than that, so a held lock is retried for
//! [`LOCK_WAIT`] before the start is refused.

use std::fs::File;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use std::time::{Duration, Instant};

/// How long a held lock is retried before giving up: far above the release delay of a killed
/// bookie, short enough that a second bookie on the same directories is refused promptly.
pub const LOCK_WAIT: Duration = Duration::from_secs(5);

/// Pause between two attempts.
const RETRY_EVERY: Duration = Duration::from_millis(10);

/// Held for as long as the value lives.
pub struct DirLock {
    _file: Flock<File>,
}

impl DirLock {
    /// Locks `dir` (created if missing), retrying a held lock for [`LOCK_WAIT`].
    pub fn acquire(dir: &Path) -> Result<DirLock, String> {
        DirLock::acquire_within(dir, LOCK_WAIT)
    }

    /// Locks `dir`, retrying a held lock for up to `wait`; then fails naming the directory.
    pub fn acquire_within(dir: &Path, wait: Duration) -> Result<DirLock, String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let path = dir.join("LOCK");
        let mut file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let deadline = Instant::now() + wait;
        let mut logged = false;
        loop {
            match try_flock(file) {
                Ok(Ok(locked)) => {
                    if logged {
                        log::info!("lock {} acquired", path.display());
                    }
                    return Ok(DirLock { _file: locked });
                }
                Ok(Err(held)) if Instant::now() < deadline => {
                    file = held;
                    if !logged {
                        log::info!(
                            "lock {} is held (a previous bookie still exiting?); retrying for up to {} ms",
                            path.display(),
                            wait.as_millis()
                        );
                        logged = true;
                    }
                    std::thread::sleep(RETRY_EVERY);
                }
                Ok(Err(_)) => {
                    return Err(format!(
                        "{} is in use by another bookie process (lock {} is held; waited {} ms)",
                        dir.display(),
                        path.display(),
                        wait.as_millis()
                    ))
                }
                Err(e) => return Err(format!("cannot lock {}: {e}", path.display())),
            }
        }
    }
}

/// One non-blocking `flock`: `Ok(Err(file))` when another open file description holds it.
fn try_flock(mut file: File) -> std::io::Result<Result<Flock<File>, File>> {
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(locked) => return Ok(Ok(locked)),
            Err((held, Errno::EWOULDBLOCK)) => return Ok(Err(held)),
            Err((again, Errno::EINTR)) => file = again,
            Err((_, errno)) => return Err(errno.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lock through another open file description: conflicts like another process's.
    fn hold(dir: &Path) -> Flock<File> {
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("LOCK"))
            .expect("open LOCK");
        try_flock(file).expect("flock").expect("lock not free")
    }

    /// A lock released 300 ms after the start (a killed bookie's threads exiting) is acquired.
    #[test]
    fn a_lock_released_soon_is_acquired() {
        let dir = tempfile::tempdir().unwrap();
        let held = hold(dir.path());
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            drop(held);
        });
        let lock = DirLock::acquire_within(dir.path(), Duration::from_secs(30));
        releaser.join().unwrap();
        assert!(lock.is_ok(), "{:?}", lock.err());
    }

    /// A lock held for longer than the bound refuses the start with the directory's name.
    #[test]
    fn a_lock_held_past_the_bound_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let _held = hold(dir.path());
        let err = DirLock::acquire_within(dir.path(), Duration::from_millis(200))
            .err()
            .expect("acquired a held lock");
        assert!(err.contains("in use by another bookie process"), "{err}");
        assert!(err.contains(&dir.path().display().to_string()), "{err}");
    }
}
