//! Helpers shared by the real-disk tests of the storage port.

use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

/// A base directory whose file system accepts O_DIRECT (tmpfs does not): the system temp dir
/// if it does, else the target dir.
pub fn base_dir() -> PathBuf {
    let tmp = std::env::temp_dir();
    let probe = tmp.join(format!(
        "odirect-probe-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let ok = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(&probe)
        .is_ok();
    let _ = std::fs::remove_file(&probe);
    if ok {
        tmp
    } else {
        PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
    }
}
