//! An exclusive lock on a data directory, so two bookies (or a bookie and `bookie inspect`,
//! whose opening of ledger storage removes files a running flush may be writing) never work on
//! the same files. `flock` on a `LOCK` file: released by the kernel when the process dies.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Held for as long as the value lives.
pub struct DirLock {
    _file: File,
}

impl DirLock {
    pub fn acquire(dir: &Path) -> Result<DirLock, String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let path = dir.join("LOCK");
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        // SAFETY: flock on a descriptor we own.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            return Err(format!(
                "{} is in use by another bookie process (lock {} is held)",
                dir.display(),
                path.display()
            ));
        }
        Ok(DirLock { _file: file })
    }
}
