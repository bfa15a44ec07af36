//! The space of the bookie's file systems, from `statvfs`: each directory's usage as Java's
//! `DiskChecker` computes it, and the ledger directories' free and total space counted once per
//! file system, as Java's `getTotalFreeSpace` / `getTotalDiskSpace` (the disk checker, the
//! `info` route and GET_BOOKIE_INFO).

use std::path::Path;

/// Usage and free space of one directory's file system, from `statvfs`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DiskUsage {
    pub total_bytes: u64,
    pub usable_bytes: u64,
}

impl DiskUsage {
    /// Java's `DiskChecker`: 1 − usable / total.
    pub fn usage(&self) -> f64 {
        if self.total_bytes == 0 {
            return 0.0;
        }
        1.0 - self.usable_bytes as f64 / self.total_bytes as f64
    }
}

/// `statvfs` of `dir`.
pub fn disk_usage(dir: &Path) -> std::io::Result<DiskUsage> {
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let stat = nix::sys::statvfs::statvfs(path.as_c_str())?;
    let frsize = stat.fragment_size() as u64;
    Ok(DiskUsage {
        total_bytes: (stat.blocks() as u64).saturating_mul(frsize),
        usable_bytes: (stat.blocks_available() as u64).saturating_mul(frsize),
    })
}

/// Free and total space of the ledger directories, each file system counted once (Java's
/// `getTotalFreeSpace` / `getTotalDiskSpace`).
pub fn ledger_space(dirs: &[std::path::PathBuf]) -> std::io::Result<DiskUsage> {
    use std::os::unix::fs::MetadataExt;
    let mut seen = Vec::new();
    let mut sum = DiskUsage {
        total_bytes: 0,
        usable_bytes: 0,
    };
    for dir in dirs {
        let dev = std::fs::metadata(dir)?.dev();
        if seen.contains(&dev) {
            continue;
        }
        seen.push(dev);
        let u = disk_usage(dir)?;
        sum.total_bytes += u.total_bytes;
        sum.usable_bytes += u.usable_bytes;
    }
    Ok(sum)
}
