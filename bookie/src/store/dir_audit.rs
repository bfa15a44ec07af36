//! The start-up audit of the journal, ledger and index directories: state this bookie does not
//! own stops the start, before anything is locked, stamped, registered or listened on.
//!
//! Why: the obvious way to try this bookie is to start it on a stopped Java bookie's
//! `bk_server.conf`. Java keeps everything in `<dir>/current/` (entry logs `*.log`, journals
//! `*.txn`, `lastMark`, DbLedgerStorage's RocksDB `ledgers/` and `locations/`, Interleaved and
//! SortedLedgerStorage's `*.idx` files), and its cookie (`current/VERSION`) is the same as ours.
//! Started on it, a bookie that ignores those files serves every ledger as empty, takes adds to
//! ledgers that recovery fenced and accepts any master key: acknowledged data is lost and fencing
//! broken, while the bookie looks healthy. So anything this bookie cannot account for is refused,
//! with a message that names the directory, what it holds and what to do. Nothing is changed.
//!
//! What this bookie owns in a configured directory: `current/VERSION` (the cookie, and the
//! `VERSION.tmp` of an interrupted stamp), `LOCK`, `shard-<n>/` (its journals and ledger
//! storage, whose own formats carry checksums and versions), `lost+found/` (an ext4 mount point)
//! and other configured directories nested inside it (compared by their canonical paths, so
//! symlinks and `./` spellings agree). Anything else is foreign. A Java `current/` that holds
//! only its cookie (a formatted bookie that never stored an entry) has nothing to lose and
//! passes.

use std::fs;
use std::path::{Path, PathBuf};

use crate::admin::readonly::DirKind;
use crate::config::BookieConfig;

/// At most this many names are read below one `current/` (Java's index files sit in two levels
/// of subfolders): enough to describe it, bounded on a disk of millions of files.
const SCAN_LIMIT: usize = 100_000;

/// What one directory holds that this bookie does not own.
#[derive(Debug, PartialEq)]
pub struct Foreign {
    pub dir: PathBuf,
    pub kind: DirKind,
    /// Human descriptions, e.g. "3 Java entry logs (current/*.log)".
    pub found: Vec<String>,
    /// Everything found is a Java bookie's state this bookie knows (journals, marks, entry
    /// logs, index files or DbLedgerStorage's RocksDB, `lastId`, `DIRTY`): it can take it over.
    pub java_known: bool,
}

/// Audits every configured directory; `Err` carries the message the start fails with.
/// `Ok(true)`: the directories hold a stopped Java bookie's state that this bookie takes
/// over (`store::takeover`) because its configuration names a storage class it can read.
pub fn check(config: &BookieConfig) -> Result<bool, String> {
    let foreign = audit(config)?;
    if foreign.is_empty() {
        return Ok(false);
    }
    if foreign.iter().all(|f| f.java_known) && crate::store::takeover::can_take_over(config) {
        crate::store::takeover::precheck(config)?;
        for f in &foreign {
            log::info!(
                "takeover: {} ({} directory): {}",
                f.dir.display(),
                kind_name(f.kind),
                f.found.join("; ")
            );
        }
        return Ok(true);
    }
    Err(refusal(&foreign))
}

/// The directories that hold foreign state (empty: all clear).
pub fn audit(config: &BookieConfig) -> Result<Vec<Foreign>, String> {
    let dirs = crate::store::ledger_dirs::checked(config);
    let configured: Vec<PathBuf> = dirs.iter().map(|(d, _)| canonical(d)).collect();
    let mut out: Vec<Foreign> = Vec::new();
    let mut scanned: Vec<PathBuf> = Vec::new();
    for (dir, kind) in &dirs {
        // A directory listed twice (a ledger directory that is also the index or the journal
        // directory) is read once.
        let me = canonical(dir);
        if scanned.contains(&me) {
            continue;
        }
        let (found, java_known) = scan(dir, &me, &configured)
            .map_err(|e| format!("directory audit of {}: {e}", dir.display()))?;
        scanned.push(me);
        if !found.is_empty() {
            out.push(Foreign {
                dir: dir.to_path_buf(),
                kind: *kind,
                found,
                java_known,
            });
        }
    }
    Ok(out)
}

/// The error a start refused for `foreign` ends with.
pub fn refusal(foreign: &[Foreign]) -> String {
    let mut m = String::from(
        "refusing to start: these directories hold state this bookie does not own, and nothing \
         in them was changed:",
    );
    for f in foreign {
        m.push_str(&format!(
            "\n  {} ({} directory): {}",
            f.dir.display(),
            kind_name(f.kind),
            f.found.join("; ")
        ));
    }
    let java = foreign
        .iter()
        .any(|f| f.found.iter().any(|s| s.contains("Java")));
    if java {
        m.push_str(
            "\nThese are a Java bookie's files. This bookie takes over the directories of a \
             stopped Java bookie in place when started on its own bk_server.conf (its \
             ledgerStorageClass: Interleaved, Sorted or DbLedgerStorage), but not these: files \
             it does not know are not guessed at. Started on them anyway it would serve every \
             ledger they hold as empty and take adds to ledgers that recovery fenced. To \
             replace that Java bookie: keep it running on these directories until \
             its ledgers are re-replicated elsewhere (decommission it: `bookkeeper shell \
             decommissionbookie`, or stop it for good and let autorecovery copy its ledgers), \
             then start this bookie on fresh, empty directories with a new cookie (`bookkeeper \
             shell deletecookie` removes the old one from ZooKeeper).",
        );
    } else {
        m.push_str(
            "\nMove those entries elsewhere, or point journalDirectories, ledgerDirectories and \
             indexDirectories at directories that hold only this bookie's data.",
        );
    }
    m
}

fn kind_name(kind: DirKind) -> &'static str {
    match kind {
        DirKind::Journal => "journal",
        DirKind::Ledger => "ledger",
        DirKind::Index => "index",
    }
}

/// `path` with symlinks and `.`/`..` resolved, or as given when it does not exist (yet).
fn canonical(path: &Path) -> PathBuf {
    fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Whether `path` is a directory, following a symlink (a symlinked `shard-0` or
/// `current/ledgers` is what it points to).
fn is_dir(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_dir())
}

/// What `dir` (canonically `me`) holds that this bookie does not own (empty when it owns
/// everything or the directory does not exist yet), and whether all of it is a Java bookie's
/// state this bookie knows.
fn scan(dir: &Path, me: &Path, configured: &[PathBuf]) -> Result<(Vec<String>, bool), String> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), true)),
        Err(e) => return Err(format!("cannot list {}: {e}", dir.display())),
    };
    let mut found = Vec::new();
    let mut unknown = Vec::new();
    let mut java_known = true;
    for (seen, entry) in entries.enumerate() {
        if seen >= SCAN_LIMIT {
            unknown.push(format!("(stopped reading after {SCAN_LIMIT} names)"));
            break;
        }
        let entry = entry.map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let is_dir = is_dir(&path);
        let ours = match name.as_str() {
            "LOCK" => !is_dir,
            "lost+found" => is_dir,
            // Where a takeover's replay of Java's journals ended (`store::takeover`).
            // What a takeover keeps of its own (`store::takeover`): where its replay of
            // Java's journals ended, and which taken-over ledgers were deleted since.
            "java-takeover" | "java-takeover.tmp" | "java-deleted" => !is_dir,
            "current" if is_dir => {
                let (f, sorted) = scan_current(&path)?;
                found.extend(f);
                java_known &= sorted;
                true
            }
            _ => {
                (is_dir && is_shard_dir(&name)) || {
                    let path = canonical(&path);
                    configured.iter().any(|c| c.starts_with(&path) && c != me)
                }
            }
        };
        if !ours {
            unknown.push(if is_dir { format!("{name}/") } else { name });
        }
    }
    if !unknown.is_empty() {
        unknown.sort();
        found.push(format!("unknown entries: {}", short_list(&unknown)));
        java_known = false;
    }
    Ok((found, java_known))
}

fn is_shard_dir(name: &str) -> bool {
    name.strip_prefix("shard-")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// What `current/` holds besides the cookie, described by what Java keeps there; and whether
/// all of it is a Java bookie's state this bookie knows (nothing unknown).
fn scan_current(current: &Path) -> Result<(Vec<String>, bool), String> {
    let mut java_known = true;
    let mut txn = 0usize;
    let mut logs = 0usize;
    let mut idx = 0usize;
    let mut seen = 0usize;
    let mut marks = 0usize;
    let mut found = Vec::new();
    let mut other = Vec::new();
    let mut java_files = Vec::new();
    for entry in
        fs::read_dir(current).map_err(|e| format!("cannot list {}: {e}", current.display()))?
    {
        let entry = entry.map_err(|e| format!("cannot list {}: {e}", current.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = is_dir(&entry.path());
        match (name.as_str(), is_dir) {
            ("VERSION" | "VERSION.tmp", false) => {}
            // the mode kept by persistBookieStatusEnabled, Java's and ours alike
            ("BOOKIE_STATUS" | "BOOKIE_STATUS.tmp", false) => {}
            // `lastMark.<n>` with several journal directories
            (n, false) if n.starts_with("lastMark") => marks += 1,
            ("ledgers", true) => found.push(
                "Java DbLedgerStorage's RocksDB ledger metadata: fenced flags, master keys \
                     (current/ledgers/)"
                    .to_string(),
            ),
            ("locations", true) => found.push(
                "Java DbLedgerStorage's RocksDB entry locations (current/locations/)".to_string(),
            ),
            // The entry log allocator's last id, and the unclean-shutdown marker of 4.15+.
            ("lastId" | "DIRTY", false) => java_files.push(name.clone()),
            // DbLedgerStorage's cache of entry log metadata (4.15+), rebuilt from the logs.
            ("metadata-cache", true) => java_files.push(format!("{name}/")),
            (n, false) if n.ends_with(".txn") => txn += 1,
            (n, false) if n.ends_with(".log") => logs += 1,
            (n, true) if n.len() <= 2 && n.bytes().all(|b| b.is_ascii_hexdigit()) => {
                // Interleaved/SortedLedgerStorage: current/<xx>/<yy>/<ledger>.idx
                let before = idx;
                count_idx(&entry.path(), 2, &mut idx, &mut seen);
                if idx == before {
                    other.push(format!("{name}/"));
                }
            }
            _ => other.push(if is_dir { format!("{name}/") } else { name }),
        }
        seen += 1;
        if seen >= SCAN_LIMIT {
            other.push(format!("(stopped reading after {SCAN_LIMIT} names)"));
            break;
        }
    }
    if marks > 0 {
        found.push(format!("{marks} Java journal mark(s) (current/lastMark*)"));
    }
    if txn > 0 {
        found.push(format!("{txn} Java journal file(s) (current/*.txn)"));
    }
    if logs > 0 {
        found.push(format!("{logs} Java entry log(s) (current/*.log)"));
    }
    if idx > 0 {
        found.push(format!(
            "{idx} Java ledger index file(s) of Interleaved/SortedLedgerStorage (current/*/*/*.idx)"
        ));
    }
    if !java_files.is_empty() {
        java_files.sort();
        found.push(format!("Java's {}", java_files.join(", ")));
    }
    if !other.is_empty() {
        other.sort();
        found.push(format!(
            "other files in current/ (a Java bookie's layout): {}",
            short_list(&other)
        ));
        java_known = false;
    }
    // Sorted for a stable message: the listing order of a directory is the file system's.
    found.sort();
    Ok((found, java_known))
}

/// Counts `*.idx` files below `dir`, `depth` levels at most, within the scan budget.
fn count_idx(dir: &Path, depth: usize, idx: &mut usize, seen: &mut usize) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        *seen += 1;
        if *seen >= SCAN_LIMIT {
            return;
        }
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            if depth > 1 {
                count_idx(&path, depth - 1, idx, seen);
            }
        } else if path.extension().is_some_and(|e| e == "idx") {
            *idx += 1;
        }
    }
}

/// The first few names, then how many more.
fn short_list(names: &[String]) -> String {
    const SHOWN: usize = 6;
    let mut s = names
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        s.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    s
}

/// For `bookie inspect DIR`: refuses a directory that is (or holds) a Java bookie's `current/`,
/// since opening it as our ledger storage or journal could write a MANIFEST into it.
///
/// Refused: `dir/current` or any `current` on the way from `/` to `dir` (canonically: `.`
/// inside Java's `current/`, or its `ledgers/` folder) that holds Java state.
pub fn check_inspect_dir(dir: &Path) -> Result<(), String> {
    let me = canonical(dir);
    let mut candidates = vec![me.join("current")];
    candidates.extend(
        me.ancestors()
            .filter(|a| a.file_name().is_some_and(|n| n == "current"))
            .map(Path::to_path_buf),
    );
    let mut found = Vec::new();
    for current in candidates.iter().filter(|c| is_dir(c)) {
        found.extend(scan_current(current)?.0);
    }
    if found.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{} holds a Java bookie's files ({}): `bookie inspect` reads this bookie's own formats \
         only (a shard directory such as data/ledgers/shard-0) and leaves these untouched",
        dir.display(),
        found.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, b"x").unwrap();
    }

    fn config(root: &Path) -> BookieConfig {
        BookieConfig {
            journal_dirs: vec![root.join("journal")],
            ledger_dirs: vec![root.join("ledgers")],
            ..BookieConfig::default()
        }
    }

    #[test]
    fn our_own_layout_and_missing_directories_pass() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let c = config(root);
        assert_eq!(audit(&c).unwrap(), vec![]);
        touch(&root.join("journal/current/VERSION"));
        touch(&root.join("journal/LOCK"));
        touch(&root.join("journal/shard-0/0000000000000001.jrnl"));
        touch(&root.join("ledgers/current/VERSION"));
        touch(&root.join("ledgers/current/VERSION.tmp"));
        touch(&root.join("ledgers/shard-1/MANIFEST"));
        touch(&root.join("ledgers/shard-1/0000000000000001.log"));
        fs::create_dir_all(root.join("ledgers/lost+found")).unwrap();
        assert_eq!(audit(&c).unwrap(), vec![]);
        assert!(!check(&c).unwrap());
    }

    #[test]
    fn a_nested_configured_directory_is_ours() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let c = BookieConfig {
            journal_dirs: vec![root.join("disk/journal")],
            ledger_dirs: vec![root.join("disk")],
            ..BookieConfig::default()
        };
        touch(&root.join("disk/journal/shard-0/0000000000000001.jrnl"));
        touch(&root.join("disk/shard-0/MANIFEST"));
        assert_eq!(audit(&c).unwrap(), vec![]);
    }

    #[test]
    fn java_db_ledger_storage_is_refused_with_what_it_holds() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let c = config(root);
        touch(&root.join("journal/current/VERSION"));
        touch(&root.join("journal/current/18c2d2b3a1e.txn"));
        touch(&root.join("journal/current/18c2d2b3a1f.txn"));
        touch(&root.join("ledgers/current/VERSION"));
        touch(&root.join("ledgers/current/lastMark"));
        touch(&root.join("ledgers/current/0.log"));
        touch(&root.join("ledgers/current/ledgers/CURRENT"));
        touch(&root.join("ledgers/current/locations/CURRENT"));
        // Taken over when the configuration names DbLedgerStorage ...
        let mut db = config(root);
        db.java_storage.ledger_storage_class =
            Some("org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage".into());
        assert!(check(&db).unwrap());
        // ... but not beside a file no Java bookie writes.
        touch(&root.join("ledgers/current/backup.tar"));
        let f = audit(&c).unwrap();
        assert_eq!(f.len(), 2);
        let ledgers = f.iter().find(|f| f.kind == DirKind::Ledger).unwrap();
        let text = ledgers.found.join("; ");
        assert!(text.contains("1 Java entry log(s)"), "{text}");
        assert!(text.contains("current/lastMark"), "{text}");
        assert!(text.contains("current/ledgers/"), "{text}");
        assert!(text.contains("current/locations/"), "{text}");
        let journal = f.iter().find(|f| f.kind == DirKind::Journal).unwrap();
        assert_eq!(
            journal.found,
            vec!["2 Java journal file(s) (current/*.txn)".to_string()]
        );
        let msg = check(&c).unwrap_err();
        assert!(
            msg.contains(&root.join("ledgers").display().to_string()),
            "{msg}"
        );
        assert!(msg.contains("decommission"), "{msg}");
        assert!(msg.contains("fresh, empty directories"), "{msg}");
    }

    #[test]
    fn java_known_ledger_storage_index_files_are_counted() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let c = config(root);
        touch(&root.join("ledgers/current/VERSION"));
        touch(&root.join("ledgers/current/0/0/0.idx"));
        touch(&root.join("ledgers/current/0/1/1.idx"));
        touch(&root.join("ledgers/current/lastId"));
        touch(&root.join("ledgers/current/DIRTY"));
        touch(&root.join("journal/current/18c2d2b3a1e.txn"));
        let f = audit(&c).unwrap();
        let ledgers = f.iter().find(|f| f.kind == DirKind::Ledger).unwrap();
        let text = ledgers.found.join("; ");
        assert!(text.contains("2 Java ledger index file(s)"), "{text}");
        assert!(text.contains("Java's DIRTY, lastId"), "{text}");
        assert!(f.iter().all(|f| f.java_known));
        // SortedLedgerStorage (Java's default class) is taken over ...
        assert!(check(&c).unwrap());
        // ... nor a class this bookie does not know,
        let mut other = config(root);
        other.java_storage.ledger_storage_class = Some("com.example.MyStorage".into());
        assert!(check(&other).unwrap_err().contains("Java"));
        // ... nor a directory that holds anything else besides.
        touch(&root.join("ledgers/current/notes.txt"));
        assert!(check(&c).unwrap_err().contains("notes.txt"));
    }

    #[test]
    fn unknown_entries_are_refused_without_java_advice() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let c = config(root);
        touch(&root.join("ledgers/notes.txt"));
        fs::create_dir_all(root.join("ledgers/shard-x")).unwrap();
        let msg = check(&c).unwrap_err();
        assert!(
            msg.contains("unknown entries: notes.txt, shard-x/"),
            "{msg}"
        );
        assert!(!msg.contains("Java"), "{msg}");
    }

    #[test]
    fn inspect_refuses_a_java_current_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        touch(&root.join("ledgers/current/VERSION"));
        check_inspect_dir(&root.join("ledgers")).unwrap();
        touch(&root.join("ledgers/current/0.log"));
        assert!(check_inspect_dir(&root.join("ledgers")).is_err());
        assert!(check_inspect_dir(&root.join("ledgers/current")).is_err());
        check_inspect_dir(&root.join("ledgers/shard-0")).unwrap();
    }

    #[test]
    fn shared_index_and_journal_directories_and_symlinks_pass() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        // journal == ledger == index directory; a symlinked shard directory; the journal
        // named through a symlink to its parent.
        let c = BookieConfig {
            journal_dirs: vec![root.join("link/disk")],
            ledger_dirs: vec![root.join("disk")],
            index_dirs: Some(vec![root.join("disk")]),
            ..BookieConfig::default()
        };
        touch(&root.join("disk/current/VERSION"));
        touch(&root.join("disk/shard-0/MANIFEST"));
        touch(&root.join("elsewhere/0000000000000001.jrnl"));
        std::os::unix::fs::symlink(root.join("elsewhere"), root.join("disk/shard-1")).unwrap();
        std::os::unix::fs::symlink(root, root.join("link")).unwrap();
        assert_eq!(audit(&c).unwrap(), vec![]);
    }

    #[test]
    fn a_nested_directory_hides_no_stray_sibling() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let c = BookieConfig {
            journal_dirs: vec![root.join("disk/journal")],
            ledger_dirs: vec![root.join("disk")],
            index_dirs: Some(vec![root.join("index")]),
            ..BookieConfig::default()
        };
        fs::create_dir_all(root.join("disk/journal")).unwrap();
        touch(&root.join("disk/journal-old/x"));
        touch(&root.join("index/current/lastMark.1"));
        touch(&root.join("index/current/ledgers/CURRENT"));
        let f = audit(&c).unwrap();
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!(f[0].kind, DirKind::Ledger);
        assert_eq!(
            f[0].found,
            vec!["unknown entries: journal-old/".to_string()]
        );
        assert_eq!(f[1].kind, DirKind::Index);
        let text = f[1].found.join("; ");
        assert!(text.contains("1 Java journal mark(s)"), "{text}");
        assert!(text.contains("current/ledgers/"), "{text}");
    }

    #[test]
    fn many_unknown_entries_are_named_in_short() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fs::create_dir_all(root.join("ledgers")).unwrap();
        for k in 0..20 {
            touch(&root.join(format!("ledgers/stray-{k:02}")));
        }
        let msg = check(&config(root)).unwrap_err();
        assert!(msg.contains("stray-00, stray-01"), "{msg}");
        assert!(msg.contains("and 14 more"), "{msg}");
    }

    #[test]
    fn inspect_refuses_paths_inside_a_java_current_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        touch(&root.join("ledgers/current/0.log"));
        fs::create_dir_all(root.join("ledgers/current/ledgers")).unwrap();
        let inside = root.join("ledgers/current/ledgers");
        assert!(check_inspect_dir(&inside).is_err());
        assert!(check_inspect_dir(&root.join("ledgers/current/ledgers/../ledgers")).is_err());
    }
}
