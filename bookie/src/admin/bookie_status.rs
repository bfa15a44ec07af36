//! `persistBookieStatusEnabled`: the bookie's read-only or writable mode kept across a
//! restart in a `BOOKIE_STATUS` file, in Java's format, so that a bookie an operator set
//! read-only by hand comes back read-only (docs/semantics.md §3.3).
//!
//! Java's `BookieStatus` (4.17.3 on; the fourth field is new there): one UTF-8 line
//! `1,READ_ONLY|READ_WRITE,<ms since the epoch>,<manual true|false>` in
//! `<ledgerDir>/current/BOOKIE_STATUS` of every ledger directory, written when the mode
//! changes. At start-up, after the journals are replayed and before the registration, the
//! newest readable file wins; a read-only one makes the bookie start read-only, unless
//! read-only is forced anyway. A file of three fields (older Java) counts as manual, as Java
//! reads it. Java overwrites the file in place; we write a temporary file, sync it and rename
//! it over, so that a crash leaves the old line or the new one, never half of one, and a
//! Java bookie given these directories back reads the same format.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The file's name in a ledger directory's `current/`.
pub const FILE_NAME: &str = "BOOKIE_STATUS";
/// The only layout version Java writes and reads.
const LAYOUT_VERSION: u32 = 1;
/// How much of a status file is read: its line is under 60 bytes.
const MAX_FILE_BYTES: u64 = 4096;

/// A persisted mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BookieStatus {
    pub read_only: bool,
    /// When it was written, ms since the epoch: the newest of the directories' files wins.
    pub last_update_ms: i64,
    /// Set read-only (or writable) by an operator, not by the disks.
    pub manual: bool,
}

impl BookieStatus {
    /// The mode as of now (Java stamps `System.currentTimeMillis()`).
    pub fn now(read_only: bool, manual: bool) -> BookieStatus {
        let last_update_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        BookieStatus {
            read_only,
            last_update_ms,
            manual,
        }
    }

    /// The line Java's `BookieStatus.toString` writes, newline included.
    pub fn to_line(self) -> String {
        format!(
            "{LAYOUT_VERSION},{},{},{}\n",
            if self.read_only {
                "READ_ONLY"
            } else {
                "READ_WRITE"
            },
            self.last_update_ms,
            self.manual
        )
    }

    /// Java's `parse`: version 1, a mode, a time, and (4.17.3 on) the manual flag; `None` for
    /// anything else (Java ignores such a file too).
    pub fn parse(text: &str) -> Option<BookieStatus> {
        let line = text.lines().next()?.trim();
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if !(3..=4).contains(&fields.len()) || fields[0].parse::<u32>().ok()? != LAYOUT_VERSION {
            return None;
        }
        let read_only = match fields[1] {
            "READ_ONLY" => true,
            "READ_WRITE" => false,
            _ => return None,
        };
        let last_update_ms = fields[2].parse().ok()?;
        let manual = match fields.get(3) {
            None => true,
            Some(v) => v.eq_ignore_ascii_case("true"),
        };
        Some(BookieStatus {
            read_only,
            last_update_ms,
            manual,
        })
    }
}

/// `<dir>/current/BOOKIE_STATUS` for each ledger directory.
pub fn paths(ledger_dirs: &[PathBuf]) -> Vec<PathBuf> {
    ledger_dirs
        .iter()
        .map(|d| d.join(metadata::cookie::CURRENT_DIR).join(FILE_NAME))
        .collect()
}

/// The newest readable status among `files`; unreadable or malformed ones are skipped with a
/// warning, as Java skips them.
pub fn read_newest(files: &[PathBuf]) -> Option<BookieStatus> {
    let mut newest: Option<BookieStatus> = None;
    for f in files {
        let text = match read_head(f) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                log::warn!("cannot read {}: {e}", f.display());
                continue;
            }
        };
        match BookieStatus::parse(&text) {
            Some(s) if newest.is_none_or(|n| s.last_update_ms > n.last_update_ms) => {
                newest = Some(s)
            }
            Some(_) => {}
            None => log::warn!(
                "{}: not a bookie status line: {:?}",
                f.display(),
                text.trim()
            ),
        }
    }
    newest
}

/// The first bytes of a status file: one line is all Java reads, so a file grown by anything
/// else is not read whole.
fn read_head(path: &Path) -> std::io::Result<String> {
    use std::io::Read as _;
    let mut head = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_FILE_BYTES)
        .read_to_end(&mut head)?;
    Ok(String::from_utf8_lossy(&head).into_owned())
}

/// Writes `status` to every file (its `current/` is made when missing). Each is written whole
/// (temporary file, sync, rename); the first failure is returned after trying them all.
pub fn write_all(files: &[PathBuf], status: &BookieStatus) -> Result<(), String> {
    let mut first_error = None;
    for f in files {
        if let Err(e) = write_one(f, status) {
            log::warn!("cannot write {}: {e}", f.display());
            first_error.get_or_insert(format!("{}: {e}", f.display()));
        }
    }
    first_error.map_or(Ok(()), Err)
}

fn write_one(path: &Path, status: &BookieStatus) -> std::io::Result<()> {
    let dir = path.parent().expect("a status file has a directory");
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!("{FILE_NAME}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(status.to_line().as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_lines_round_trip() {
        let s = BookieStatus {
            read_only: true,
            last_update_ms: 1_765_000_000_123,
            manual: true,
        };
        assert_eq!(s.to_line(), "1,READ_ONLY,1765000000123,true\n");
        assert_eq!(BookieStatus::parse(&s.to_line()), Some(s));
        let w = BookieStatus::parse("1,READ_WRITE,5,false\n").unwrap();
        assert!(!w.read_only && !w.manual && w.last_update_ms == 5);
        // Before 4.17.3 there was no manual flag: Java reads it as manual.
        assert!(BookieStatus::parse("1,READ_ONLY,7").unwrap().manual);
        for bad in [
            "",
            "2,READ_ONLY,7,true",
            "1,SOMETIMES,7",
            "1,READ_ONLY,x",
            "1,READ_ONLY",
        ] {
            assert_eq!(BookieStatus::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_newest_file_wins_and_bad_ones_are_skipped() {
        let dir = std::env::temp_dir().join(format!("bookie-status-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let dirs: Vec<PathBuf> = (0..3).map(|i| dir.join(format!("l{i}"))).collect();
        let files = paths(&dirs);
        assert_eq!(read_newest(&files), None, "no file yet");
        let old = BookieStatus {
            read_only: true,
            last_update_ms: 10,
            manual: true,
        };
        write_all(&files, &old).unwrap();
        assert_eq!(read_newest(&files), Some(old));
        assert!(files[0].ends_with("current/BOOKIE_STATUS"));
        let new = BookieStatus {
            read_only: false,
            last_update_ms: 20,
            manual: true,
        };
        write_all(&files[1..2], &new).unwrap();
        std::fs::write(&files[2], "garbage\n").unwrap();
        assert_eq!(read_newest(&files), Some(new));
        // A first line followed by a mountain of bytes: the line counts, the rest is not read.
        let newest = "1,READ_ONLY,30,true\n".to_string() + &"x".repeat(1 << 20);
        std::fs::write(&files[2], newest).unwrap();
        assert_eq!(read_newest(&files).map(|s| s.last_update_ms), Some(30));
        assert!(!files[0].with_file_name("BOOKIE_STATUS.tmp").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
