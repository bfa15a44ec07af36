//! `bookie bookieformat --conf F [-nonInteractive] [-force] [-deleteCookie]`: Java's
//! `bookkeeper shell bookieformat`, which the Pulsar Helm chart runs in a bookie's init container
//! when its disks are not persistent (an empty disk and a cookie left in ZooKeeper would stop
//! the start). As Java's `Bookie.format`: each journal, ledger and index directory that holds
//! anything is emptied once confirmed (`-force` when `-nonInteractive`, else a prompt); a
//! missing one is created; with `-deleteCookie` the bookie's cookie leaves ZooKeeper (none there
//! is not an error).
//!
//! Unlike Java, the directories are locked first (`store/lock.rs`): a running bookie's are
//! refused, not emptied under it. The lock file itself stays.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use crate::config::BookieConfig;

/// The flags, spelled as Java's shell takes them (`-nonInteractive` or `-n`, ...).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Flags {
    pub non_interactive: bool,
    pub force: bool,
    pub delete_cookie: bool,
}

impl Flags {
    pub fn parse(args: &[String]) -> Result<Flags, String> {
        let mut f = Flags::default();
        for a in args {
            match a.trim_start_matches('-') {
                "nonInteractive" | "n" => f.non_interactive = true,
                "force" | "f" => f.force = true,
                "deleteCookie" | "d" => f.delete_cookie = true,
                _ => return Err(format!("bookieformat: unknown option {a}")),
            }
        }
        Ok(f)
    }
}

/// Empties the bookie's directories (and its ZooKeeper cookie); `Ok(false)`: aborted.
pub fn run(config: &BookieConfig, flags: &Flags) -> Result<bool, String> {
    let mut dirs: Vec<PathBuf> = config.journal_dirs.clone();
    dirs.extend(config.ledger_dirs.iter().cloned());
    dirs.extend(config.index_dirs.iter().flatten().cloned());
    dirs.dedup();
    let mut locks = Vec::new();
    for d in &dirs {
        locks.push(
            super::lock::DirLock::acquire_within(d, std::time::Duration::ZERO)
                .map_err(|e| format!("{e} (is a bookie running on it?)"))?,
        );
    }
    for d in &dirs {
        if holds_data(d)? && !confirmed(flags)? {
            log::error!("Bookie format aborted!!");
            return Ok(false);
        }
        clean(d)?;
    }
    drop(locks);
    log::info!("Bookie format completed successfully");
    if flags.delete_cookie && config.cluster.has_metadata_store() {
        delete_cookie(config)?;
    }
    Ok(true)
}

fn holds_data(dir: &Path) -> Result<bool, String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(false);
    };
    for e in entries {
        let e = e.map_err(|e| format!("{}: {e}", dir.display()))?;
        if e.file_name() != "LOCK" {
            return Ok(true);
        }
    }
    Ok(false)
}

fn confirmed(flags: &Flags) -> Result<bool, String> {
    if flags.non_interactive {
        return Ok(flags.force);
    }
    print!("Are you sure to format Bookie data..? (Y or N) ");
    std::io::stdout().flush().ok();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| format!("reading the answer: {e}"))?;
    Ok(matches!(line.trim(), "Y" | "y"))
}

/// Removes everything in `dir` but the lock file; creates `dir` when missing.
fn clean(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for e in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let e = e.map_err(|e| format!("{}: {e}", dir.display()))?;
        if e.file_name() == "LOCK" {
            continue;
        }
        let p = e.path();
        let removed = if e.file_type().is_ok_and(|t| t.is_dir()) {
            std::fs::remove_dir_all(&p)
        } else {
            std::fs::remove_file(&p)
        };
        removed.map_err(|e| format!("cannot remove {}: {e}", p.display()))?;
    }
    Ok(())
}

fn delete_cookie(config: &BookieConfig) -> Result<(), String> {
    let cfg = crate::admin::cluster::metadata_config(config).map_err(|f| f.message)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    rt.block_on(async {
        let zk = metadata::zk::connect(&cfg)
            .await
            .map_err(|e| e.to_string())?;
        metadata::cookie::delete_zk_cookie(&zk, &cfg, &cfg.bookie_id)
            .await
            .map_err(|e| e.to_string())
    })?;
    log::info!("cookie of {} removed from ZooKeeper", cfg.bookie_id);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_as_javas_shell_spells_them() {
        let args = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert_eq!(
            Flags::parse(&args("-nonInteractive -force -deleteCookie")).unwrap(),
            Flags {
                non_interactive: true,
                force: true,
                delete_cookie: true
            }
        );
        assert!(!Flags::parse(&args("-n -f")).unwrap().delete_cookie);
        assert!(Flags::parse(&args("-wipeEverything")).is_err());
    }

    #[test]
    fn empties_every_directory_once_forced_and_keeps_the_lock() {
        let root = tempfile::tempdir().unwrap();
        let mut c = crate::config::conf::conf_defaults();
        c.journal_dirs = vec![root.path().join("j")];
        c.ledger_dirs = vec![root.path().join("l1"), root.path().join("l2")];
        std::fs::create_dir_all(root.path().join("j/shard-0")).unwrap();
        std::fs::write(root.path().join("j/shard-0/seg"), b"x").unwrap();
        std::fs::create_dir_all(root.path().join("l1")).unwrap();
        std::fs::write(root.path().join("l1/VERSION"), b"x").unwrap();
        let not_forced = Flags {
            non_interactive: true,
            ..Flags::default()
        };
        assert!(!run(&c, &not_forced).unwrap(), "aborted without -force");
        assert!(root.path().join("j/shard-0/seg").exists());
        let forced = Flags {
            non_interactive: true,
            force: true,
            delete_cookie: false,
        };
        assert!(run(&c, &forced).unwrap());
        for d in ["j", "l1", "l2"] {
            let left: Vec<_> = std::fs::read_dir(root.path().join(d))
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(left, vec![std::ffi::OsString::from("LOCK")], "{d}");
        }
        // A running bookie's directory is refused, not emptied.
        let _held = super::super::lock::DirLock::acquire(&root.path().join("l2")).unwrap();
        std::fs::write(root.path().join("l2/data"), b"x").unwrap();
        assert!(run(&c, &forced).unwrap_err().contains("running"));
        assert!(root.path().join("l2/data").exists());
    }
}
