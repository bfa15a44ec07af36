//! Taking over a stopped Java bookie's directories in place (issue 32): started on the Java
//! bookie's own `bk_server.conf`, this bookie serves what Java stored there and goes on from
//! it, with no re-replication. Interleaved/SortedLedgerStorage (index files) and
//! DbLedgerStorage (RocksDB index, read through the system librocksdb) alike.
//!
//! At start (`start`, before the shards open):
//! 1. **The storage is checked against the configuration**: the class the conf names must be
//!    what the directories hold; a DbLedgerStorage bookie whose data-integrity check is
//!    pending (limbo ledgers, NEEDS_INTEGRITY_CHECK) or that holds a ledger in two
//!    directories is refused, naming it.
//! 2. **Java's journal tail is made ours.** The records after Java's `lastMark` (what Java
//!    acknowledged but had not checkpointed: after a SIGKILL, the only copy of the newest
//!    entries) are replayed with Java's rules (`javastore::replay`) and flushed, entries and
//!    ledger metadata, into the shards' own ledger storage, in bounded batches, each durable
//!    before the next. Then `java-takeover` records where the replay ended, so a restart
//!    never replays it again (a ledger deleted since must not come back from it).
//! 3. **Java's ledgers are listed**, and each one's master key, fenced bit, explicit LAC, last
//!    entry and LAC (from the last entry's own bytes) read: a few small reads per ledger,
//!    nothing proportional to the data.
//!
//! While serving, a shard adopts its share of those ledgers into its ledger table (ours wins
//! where both know a ledger, fences add up); cache-miss reads that this bookie's ledger storage
//! cannot answer go to the Java files (`read::disk_reader`). New writes go to our own files.
//! Java's files are never written, so the Java bookie can be started on them again (README,
//! "Taking over a Java bookie"); a taken-over ledger deleted since is recorded in
//! `java-deleted`, this bookie's own file, before the shards drop it, and stays deleted. An
//! entry log left with no entry of a ledger this bookie stores is then removed
//! (`store::takeover_retire`), as Java's collector would remove it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use entrylog::{FlushBatch, LedgerMeta, LedgerStore};
use javastore::journal::LastMark;
use javastore::replay::{replay_from, Replayed};
use javastore::{JavaDirs, JavaStore, StorageKind};

use crate::admin::readonly::BookieState;
use crate::config::BookieConfig;
use crate::shard::shard_of;

/// Where the replay of Java's journals ended, in the first ledger directory.
pub const STATE_FILE: &str = "java-takeover";
const STATE_MAGIC: [u8; 8] = *b"BKRSJTKO";
const STATE_VERSION: u16 = 1;
/// Replayed entry bytes held in memory before they are flushed.
const IMPORT_BATCH_BYTES: usize = 256 << 20;

/// A ledger as the Java index file leaves it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LegacyLedger {
    pub master_key: Bytes,
    pub fenced: bool,
    pub explicit_lac: Option<Bytes>,
    pub last_entry: Option<u64>,
    /// The LAC its last entry carries (bytes 16..24), -1 when unknown.
    pub lac: i64,
}

/// The Java side of a taken-over bookie, shared read-only by shards and reader threads.
pub struct Legacy {
    /// The listing of Java's ledgers and entry logs; each reader thread reads through its own
    /// copy.
    pub store: JavaStore,
    pub ledgers: BTreeMap<u64, LegacyLedger>,
    deleted: Mutex<DeletedLog>,
}

impl Legacy {
    /// Records durably that these ledgers (those of them that are Java's) were deleted: at
    /// the next start they are not taken over again.
    pub fn record_deleted(&self, ids: &[i64]) -> Result<(), String> {
        let ours: Vec<u64> = ids
            .iter()
            .filter(|&&l| l >= 0 && self.ledgers.contains_key(&(l as u64)))
            .map(|&l| l as u64)
            .collect();
        if ours.is_empty() {
            return Ok(());
        }
        self.deleted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .append(&ours)
    }
}

/// True when `config` names a Java ledger storage class this bookie can take over.
pub fn can_take_over(config: &BookieConfig) -> bool {
    config.java_storage.is_sorted() || config.java_storage.is_db()
}

/// Checks, before anything is locked or written, that the storage class the configuration
/// names is what the directories hold; returns what they hold.
pub fn precheck(config: &BookieConfig) -> Result<StorageKind, String> {
    let dirs = java_dirs(config);
    let kind = dirs
        .storage_kind()
        .map_err(|e| format!("refusing to start: {e}"))?;
    let db = config.java_storage.is_db();
    if matches!(
        (kind, db),
        (StorageKind::Db, false) | (StorageKind::Sorted, true)
    ) {
        let class = config
            .java_storage
            .ledger_storage_class
            .clone()
            .unwrap_or_else(|| "SortedLedgerStorage (the default)".into());
        return Err(format!(
            "refusing to start: ledgerStorageClass is {class}, but {} hold {}; nothing in them \
             was changed. Start this bookie with the configuration the Java bookie ran with.",
            dirs.ledger_dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            match kind {
                StorageKind::Db => "DbLedgerStorage's RocksDB index (current/ledgers/)",
                _ => "Interleaved/SortedLedgerStorage index files (current/*/*/*.idx)",
            }
        ));
    }
    Ok(kind)
}

fn java_dirs(config: &BookieConfig) -> JavaDirs {
    JavaDirs::new(
        config.journal_dirs.clone(),
        config.ledger_dirs.clone(),
        config.index_dirs.clone(),
    )
}

/// Replays Java's journal tail into the shards' ledger storage (once), then reads the index
/// files' ledgers. Errors name the file and stop the start.
pub fn start(
    config: &BookieConfig,
    shards: usize,
    state: &BookieState,
) -> Result<Arc<Legacy>, String> {
    let started = Instant::now();
    let dirs = java_dirs(config);
    let kind = precheck(config)?;
    let store = JavaStore::open(dirs.clone(), kind).map_err(|e| format!("takeover: {e}"))?;
    if let JavaStore::Db(d) = &store {
        if d.flags
            .is_some_and(|f| f & javastore::db::NEEDS_INTEGRITY_CHECK != 0)
        {
            return Err(format!(
                "takeover: {}: the Java bookie's data-integrity check had not finished \
                 (NEEDS_INTEGRITY_CHECK): start the Java bookie once to complete it",
                dirs.ledger_dirs[0].display()
            ));
        }
        let limbo = d.limbo();
        if !limbo.is_empty() {
            return Err(format!(
                "takeover: {} ledger(s) in limbo (a Java data-integrity check pending), e.g. \
                 {:?}: start the Java bookie once to complete it",
                limbo.len(),
                &limbo[..limbo.len().min(5)]
            ));
        }
        if !d.duplicates.is_empty() {
            return Err(format!(
                "takeover: ledger(s) {:?} are in the ledgers database of more than one ledger \
                 directory (the directory list changed under allowStorageExpansion?)",
                &d.duplicates[..d.duplicates.len().min(5)]
            ));
        }
    }
    // Every entry log's header, now: an unknown version or a damaged header stops the start
    // naming the file, instead of failing the reads of its entries later.
    let logs = store
        .check_entry_logs()
        .map_err(|e| format!("takeover: {e}"))?;
    log::debug!("takeover: {logs} Java entry log headers checked");
    let state_path = config.ledger_dirs[0].join(STATE_FILE);
    // What the Java journals look like now: their marks and newest files.
    let java_now: Vec<(LastMark, u64)> = (0..dirs.journal_dirs.len())
        .map(|j| {
            let last_file = dirs
                .journal_files(j)
                .map_err(|e| e.to_string())?
                .last()
                .map_or(0, |(id, _)| *id);
            Ok((dirs.last_mark(j), last_file))
        })
        .collect::<Result<_, String>>()?;
    let earlier = read_state(&state_path)?;
    if let Some(st) = &earlier {
        // A Java bookie that ran on these directories after the takeover moved its mark or
        // wrote a journal file: what this bookie holds of them is stale.
        let moved = st.len() != java_now.len()
            || st
                .iter()
                .zip(&java_now)
                .any(|(t, (mark, last))| t.java_mark != *mark || t.java_last_file != *last);
        if moved {
            return Err(format!(
                "takeover: a Java bookie ran on these directories after this bookie took them \
                 over ({} records their state then): this bookie's copy of them is stale. Go on \
                 with the Java bookie, or move this bookie's shard-*/, {STATE_FILE} and \
                 {DELETED_FILE} aside to take the directories over afresh",
                state_path.display()
            ));
        }
    }
    let marks: Vec<LastMark> = match &earlier {
        Some(st) => st.iter().map(|t| t.end).collect(),
        None => java_now.iter().map(|(m, _)| *m).collect(),
    };
    let deleted_log = DeletedLog::open(&config.ledger_dirs[0].join(DELETED_FILE))?;
    let import = import_journal_tail(config, shards, state, &dirs, &store, &marks, &deleted_log)?;
    let ends = match import {
        Some((ends, stats)) => {
            log::info!(
                "takeover: Java journal replayed into ledger storage: {} entries, {} master \
                 keys, {} fences, {} explicit LACs of {} ledgers; {} records of deleted ledgers \
                 skipped",
                stats.entries,
                stats.keys,
                stats.fences,
                stats.lacs,
                stats.ledgers,
                stats.skipped
            );
            Some(ends)
        }
        None => None,
    };
    if earlier.is_none() || ends.is_some() {
        let ends = ends.unwrap_or(marks);
        let st: Vec<JournalState> = ends
            .iter()
            .zip(&java_now)
            .map(|(end, (mark, last))| JournalState {
                end: *end,
                java_mark: *mark,
                java_last_file: *last,
            })
            .collect();
        write_state(&state_path, &st)?;
    }
    let mut ledgers = BTreeMap::new();
    let mut reader = store.clone();
    for ledger in store.ledgers() {
        if deleted_log.ids.contains(&ledger) {
            continue;
        }
        let Some(st) = store.state(ledger).map_err(|e| e.to_string())? else {
            continue;
        };
        let lac = match st.last_entry {
            Some(last) => match reader.read(ledger, last) {
                Ok(Some(body)) if body.len() >= 24 => {
                    i64::from_be_bytes(body[16..24].try_into().expect("8 bytes"))
                }
                Ok(_) => -1,
                Err(e) => {
                    // An index page flushed before its entry log was synced (Java's order):
                    // the entry came back from the journal replay, or it was never
                    // acknowledged. The LAC then comes from our own copy.
                    log::warn!("takeover: ledger {ledger}: last entry {last} unreadable: {e}");
                    -1
                }
            },
            None => -1,
        };
        ledgers.insert(
            ledger,
            LegacyLedger {
                master_key: st.master_key,
                fenced: st.fenced,
                explicit_lac: st.explicit_lac,
                last_entry: st.last_entry,
                lac,
            },
        );
    }
    log::info!(
        "takeover: {} Java ledgers ({}; {} deleted since the takeover) over {} entry logs, \
         ready in {:.0} ms",
        ledgers.len(),
        store.kind_name(),
        deleted_log.ids.len(),
        store.entry_log_count(),
        started.elapsed().as_secs_f64() * 1e3
    );
    Ok(Arc::new(Legacy {
        store,
        ledgers,
        deleted: Mutex::new(deleted_log),
    }))
}

#[derive(Default)]
struct ImportStats {
    entries: u64,
    keys: u64,
    fences: u64,
    lacs: u64,
    ledgers: usize,
    skipped: u64,
}

/// Replays the Java journals from `marks` and flushes what they hold into the shards' ledger
/// storage. `None` when the journals hold nothing after the marks and no state needs writing.
fn import_journal_tail(
    config: &BookieConfig,
    shards: usize,
    state: &BookieState,
    dirs: &JavaDirs,
    legacy: &JavaStore,
    marks: &[LastMark],
    deleted: &DeletedLog,
) -> Result<Option<(Vec<LastMark>, ImportStats)>, String> {
    // Nothing after the marks (every start after the first takeover): the shards' storage is
    // not opened twice for nothing. The tail is bounded by Java's checkpoint interval.
    let skip_invalid = config.java_storage.skip_invalid_journal_records;
    let mut any = false;
    replay_from(dirs, marks, skip_invalid, |_, _, _, _| any = true)
        .map_err(|e| format!("takeover: {e}"))?;
    if !any {
        return Ok(None);
    }
    // Each shard's own ledger storage, opened here and closed before the shard opens it.
    let mut stores = Vec::with_capacity(shards);
    for id in 0..shards {
        let d = crate::store::ledger_dirs::for_shard(config, id, shards, state)?;
        for member in &d.ledgers.members {
            fs::create_dir_all(member)
                .map_err(|e| format!("cannot create {}: {e}", member.display()))?;
        }
        let home = d.ledgers.members[0].clone();
        let storage = storage::open_dir_set(d.ledgers.clone(), 64, config.force_psync)
            .map_err(|e| format!("{}: {e}", home.display()))?;
        let (store, _) = LedgerStore::open(storage, config.ledger_store.clone())
            .map_err(|e| format!("ledger storage {}: {e}", home.display()))?;
        stores.push(store);
    }
    let known = |ledger: i64| {
        ledger >= 0
            && !deleted.ids.contains(&(ledger as u64))
            && (legacy.has_ledger(ledger as u64)
                || stores[shard_of(ledger, shards)]
                    .ledgers()
                    .get(&(ledger as u64))
                    .is_some_and(|m| !m.deleted))
    };
    let mut replayed = Replayed::default();
    let mut stats = ImportStats::default();
    let mut held = 0usize;
    let mut batches: Vec<Replayed> = Vec::new();
    let summary = replay_from(dirs, marks, skip_invalid, |_, _, _, rec| {
        match &rec {
            javastore::journal::Record::Entry { body, .. } => held += body.len(),
            javastore::journal::Record::MasterKey { .. } => stats.keys += 1,
            javastore::journal::Record::Fence { .. } => stats.fences += 1,
            javastore::journal::Record::ExplicitLac { .. } => stats.lacs += 1,
            javastore::journal::Record::Other { .. } => {}
        }
        replayed.apply(rec, known);
        if held >= IMPORT_BATCH_BYTES {
            // The entries so far go out as one batch; the ledgers stay known.
            let mut full = Replayed::default();
            for (l, r) in replayed.ledgers.iter_mut() {
                let entries = std::mem::take(&mut r.entries);
                full.ledgers.insert(
                    *l,
                    javastore::replay::ReplayedLedger {
                        entries,
                        ..r.clone()
                    },
                );
            }
            batches.push(full);
            held = 0;
        }
    })
    .map_err(|e| format!("takeover: {e}"))?;
    if summary.iter().all(|j| j.records == 0) {
        return Ok(None);
    }
    stats.skipped = replayed.skipped_unknown;
    stats.ledgers = replayed.ledgers.len();
    batches.push(replayed);
    for batch in &batches {
        stats.entries += batch
            .ledgers
            .values()
            .map(|l| l.entries.len() as u64)
            .sum::<u64>();
        flush_into(&mut stores, shards, legacy, batch)?;
    }
    Ok(Some((summary.iter().map(|j| j.end()).collect(), stats)))
}

/// Flushes one batch of replayed ledgers into the shards' stores, merged with what each store
/// already holds of them.
fn flush_into(
    stores: &mut [LedgerStore<storage::RealStorage>],
    shards: usize,
    legacy: &JavaStore,
    batch: &Replayed,
) -> Result<(), String> {
    let mut per_shard: Vec<FlushBatch> = (0..shards).map(|_| FlushBatch::default()).collect();
    for (&ledger, r) in &batch.ledgers {
        if ledger < 0 {
            continue;
        }
        let s = shard_of(ledger, shards);
        let ours = stores[s].ledgers().get(&(ledger as u64)).cloned();
        if ours.as_ref().is_some_and(|m| m.deleted) {
            continue;
        }
        let idx = legacy.state(ledger as u64).map_err(|e| e.to_string())?;
        let master_key = r
            .master_key
            .clone()
            .or_else(|| ours.as_ref().map(|m| m.master_key.clone()))
            .filter(|k| !k.is_empty())
            .or_else(|| idx.as_ref().map(|h| h.master_key.clone()))
            .unwrap_or_default();
        let lac = r
            .entries
            .values()
            .filter_map(|b| b.get(16..24))
            .map(|b| i64::from_be_bytes(b.try_into().expect("8 bytes")))
            .filter(|&v| v >= 0)
            .map(|v| v as u64)
            .chain(ours.as_ref().and_then(|m| m.lac))
            .max();
        let last_entry = r
            .entries
            .keys()
            .next_back()
            .map(|&e| e as u64)
            .max(ours.as_ref().and_then(|m| m.last_entry));
        per_shard[s].ledgers.push(LedgerMeta {
            ledger: ledger as u64,
            master_key,
            fenced: r.fenced
                || ours.as_ref().is_some_and(|m| m.fenced)
                || idx.as_ref().is_some_and(|h| h.fenced),
            deleted: false,
            explicit_lac: r
                .explicit_lac
                .clone()
                .or_else(|| ours.as_ref().and_then(|m| m.explicit_lac.clone()))
                .or_else(|| idx.as_ref().and_then(|h| h.explicit_lac.clone())),
            last_entry,
            lac,
        });
        for (&e, body) in &r.entries {
            per_shard[s]
                .entries
                .push((ledger as u64, e as u64, body.clone()));
        }
    }
    for (s, mut b) in per_shard.into_iter().enumerate() {
        if b.ledgers.is_empty() {
            continue;
        }
        b.journal_mark = stores[s].journal_mark();
        stores[s]
            .flush(&b)
            .map_err(|e| format!("takeover: flushing Java's journal tail into shard {s}: {e}"))?;
    }
    Ok(())
}

/// One Java journal as the takeover left it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct JournalState {
    /// Where the replay ended: the next one starts here.
    end: LastMark,
    /// Java's own `lastMark` then, and its newest journal file: if either has moved since, a
    /// Java bookie ran on the directories after the takeover.
    java_mark: LastMark,
    java_last_file: u64,
}

const STATE_RECORD: usize = 40;

/// Reads an earlier takeover's state; `None` when there was none. A damaged file stops the
/// start: replaying again from Java's mark could bring back deleted ledgers.
fn read_state(path: &Path) -> Result<Option<Vec<JournalState>>, String> {
    let b = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    decode_state(&b).map(Some).map_err(|w| {
        format!(
            "{}: {w}; it records how far this bookie replayed the Java journals it took over",
            path.display()
        )
    })
}

fn decode_state(b: &[u8]) -> Result<Vec<JournalState>, String> {
    if b.len() < 20 || b[0..8] != STATE_MAGIC {
        return Err("not a takeover state file".into());
    }
    let version = u16::from_le_bytes([b[8], b[9]]);
    if version != STATE_VERSION {
        return Err(format!("unknown version {version}"));
    }
    let n = u32::from_le_bytes(b[12..16].try_into().expect("4")) as usize;
    let end = 16 + STATE_RECORD * n;
    if b.len() != end + 4 {
        return Err(format!("{} bytes for {n} journals", b.len()));
    }
    let crc = u32::from_le_bytes(b[end..end + 4].try_into().expect("4"));
    if crc32c::crc32c(&b[..end]) != crc {
        return Err("checksum mismatch".into());
    }
    let u = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8"));
    Ok((0..n)
        .map(|i| {
            let at = 16 + STATE_RECORD * i;
            JournalState {
                end: LastMark {
                    file_id: u(at),
                    offset: u(at + 8),
                },
                java_mark: LastMark {
                    file_id: u(at + 16),
                    offset: u(at + 24),
                },
                java_last_file: u(at + 32),
            }
        })
        .collect())
}

fn encode_state(journals: &[JournalState]) -> Vec<u8> {
    let mut b = Vec::with_capacity(20 + STATE_RECORD * journals.len());
    b.extend_from_slice(&STATE_MAGIC);
    b.extend_from_slice(&STATE_VERSION.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&(journals.len() as u32).to_le_bytes());
    for j in journals {
        for v in [
            j.end.file_id,
            j.end.offset,
            j.java_mark.file_id,
            j.java_mark.offset,
            j.java_last_file,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
    }
    let crc = crc32c::crc32c(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

/// Writes the state durably: a temporary file, synced, renamed over, the directory synced.
fn write_state(path: &Path, marks: &[JournalState]) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    let err = |what: &str, e: std::io::Error| format!("cannot {what} {}: {e}", tmp.display());
    let mut f = fs::File::create(&tmp).map_err(|e| err("create", e))?;
    f.write_all(&encode_state(marks))
        .map_err(|e| err("write", e))?;
    f.sync_all().map_err(|e| err("sync", e))?;
    fs::rename(&tmp, path).map_err(|e| err("rename", e))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| format!("cannot sync {}: {e}", dir.display()))
}

/// Which taken-over ledgers were deleted since the takeover, in the first ledger directory.
pub const DELETED_FILE: &str = "java-deleted";
const DELETED_MAGIC: [u8; 8] = *b"BKRSJDEL";
const DELETED_VERSION: u16 = 1;
const DELETED_HEADER: usize = 16;
/// A record: the ledger id (u64 LE), the CRC32C of those 8 bytes (u32 LE), 4 zero bytes.
const DELETED_RECORD: usize = 16;

/// `java-deleted`: an append-only list of taken-over ledgers deleted since the takeover. Each
/// append is synced before the shards drop the ledgers; a record cut short by a crash is the
/// last one and is ignored (that deletion happens again at the next collection).
struct DeletedLog {
    path: PathBuf,
    ids: BTreeSet<u64>,
}

impl DeletedLog {
    fn open(path: &Path) -> Result<DeletedLog, String> {
        let b = match fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let ids = decode_deleted(&b).map_err(|w| format!("{}: {w}", path.display()))?;
        Ok(DeletedLog {
            path: path.to_path_buf(),
            ids,
        })
    }

    fn append(&mut self, ids: &[u64]) -> Result<(), String> {
        let err =
            |what: &str, e: std::io::Error| format!("cannot {what} {}: {e}", self.path.display());
        let new = !self.path.exists();
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| err("open", e))?;
        let len = f.metadata().map_err(|e| err("stat", e))?.len() as usize;
        let mut b = Vec::new();
        if len < DELETED_HEADER {
            // A new file (or one whose header a crash cut): start it over.
            f.set_len(0).map_err(|e| err("truncate", e))?;
            b.extend_from_slice(&DELETED_MAGIC);
            b.extend_from_slice(&DELETED_VERSION.to_le_bytes());
            b.extend_from_slice(&[0u8; 6]);
        } else if !(len - DELETED_HEADER).is_multiple_of(DELETED_RECORD) {
            // A record a crash cut short: the next one starts where it started.
            let whole = len - (len - DELETED_HEADER) % DELETED_RECORD;
            f.set_len(whole as u64).map_err(|e| err("truncate", e))?;
        }
        for &l in ids {
            b.extend_from_slice(&encode_deleted_record(l));
        }
        f.write_all(&b).map_err(|e| err("append to", e))?;
        f.sync_data().map_err(|e| err("sync", e))?;
        if new {
            let dir = self.path.parent().unwrap_or(Path::new("."));
            fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| format!("cannot sync {}: {e}", dir.display()))?;
        }
        self.ids.extend(ids.iter().copied());
        log::info!(
            "takeover: {} deleted Java ledger(s) recorded in {}",
            ids.len(),
            self.path.display()
        );
        Ok(())
    }
}

fn encode_deleted_record(ledger: u64) -> [u8; DELETED_RECORD] {
    let mut r = [0u8; DELETED_RECORD];
    r[0..8].copy_from_slice(&ledger.to_le_bytes());
    r[8..12].copy_from_slice(&crc32c::crc32c(&ledger.to_le_bytes()).to_le_bytes());
    r
}

fn decode_deleted(b: &[u8]) -> Result<BTreeSet<u64>, String> {
    let mut ids = BTreeSet::new();
    if b.len() < DELETED_HEADER {
        // Empty, or a header a crash cut: nothing was recorded after it.
        return Ok(ids);
    }
    if b[0..8] != DELETED_MAGIC {
        return Err("not a list of deleted ledgers".into());
    }
    let version = u16::from_le_bytes([b[8], b[9]]);
    if version != DELETED_VERSION {
        return Err(format!("unknown version {version}"));
    }
    let records: Vec<&[u8]> = b[DELETED_HEADER..].chunks(DELETED_RECORD).collect();
    for (i, r) in records.iter().enumerate() {
        let last = i + 1 == records.len();
        let ok = r.len() == DELETED_RECORD
            && r[12..16] == [0u8; 4]
            && u32::from_le_bytes(r[8..12].try_into().expect("4")) == crc32c::crc32c(&r[0..8]);
        if !ok {
            if last {
                break; // a torn last append
            }
            return Err(format!("record {i} is corrupt"));
        }
        ids.insert(u64::from_le_bytes(r[0..8].try_into().expect("8")));
    }
    Ok(ids)
}

/// The ledgers a shard adopts: the taken-over ledgers it owns that its own storage has not
/// deleted.
pub fn owned<'a>(
    legacy: &'a Legacy,
    shard: usize,
    shards: usize,
    deleted: &'a BTreeSet<u64>,
) -> impl Iterator<Item = (u64, &'a LegacyLedger)> + 'a {
    legacy
        .ledgers
        .iter()
        .filter(move |(l, _)| shard_of(**l as i64, shards) == shard && !deleted.contains(l))
        .map(|(l, s)| (*l, s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deleted_ledgers_survive_torn_appends_and_refuse_damage() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(DELETED_FILE);
        let mut log = DeletedLog::open(&p).unwrap();
        assert!(log.ids.is_empty());
        log.append(&[5, 9]).unwrap();
        log.append(&[12]).unwrap();
        assert_eq!(
            DeletedLog::open(&p).unwrap().ids,
            BTreeSet::from([5, 9, 12])
        );
        // A crash in the middle of an append: the cut record is not a deletion, and the next
        // append starts where it started.
        let full = fs::read(&p).unwrap();
        fs::write(&p, &full[..full.len() - 5]).unwrap();
        let mut log = DeletedLog::open(&p).unwrap();
        assert_eq!(log.ids, BTreeSet::from([5, 9]));
        log.append(&[20]).unwrap();
        assert_eq!(
            DeletedLog::open(&p).unwrap().ids,
            BTreeSet::from([5, 9, 20])
        );
        // A damaged record before the last one is refused, naming the file.
        let mut bad = fs::read(&p).unwrap();
        bad[DELETED_HEADER + 2] ^= 1;
        fs::write(&p, &bad).unwrap();
        assert!(DeletedLog::open(&p).err().unwrap().contains(DELETED_FILE));
    }

    #[test]
    fn state_round_trips_and_damage_is_refused() {
        let marks = vec![
            JournalState {
                end: LastMark {
                    file_id: 0x18c_5f2a_3b4c,
                    offset: 4096,
                },
                java_mark: LastMark {
                    file_id: 0x18c_5f2a_3b4c,
                    offset: 512,
                },
                java_last_file: 0x18c_5f2a_3b4c,
            },
            JournalState {
                end: LastMark::default(),
                java_mark: LastMark::default(),
                java_last_file: 0,
            },
        ];
        let b = encode_state(&marks);
        assert_eq!(decode_state(&b).unwrap(), marks);
        for i in 0..b.len() {
            let mut c = b.clone();
            c[i] ^= 0x40;
            assert!(decode_state(&c).is_err(), "byte {i}");
        }
        assert!(decode_state(&b[..b.len() - 1]).is_err());
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(STATE_FILE);
        assert_eq!(read_state(&p).unwrap(), None);
        write_state(&p, &marks).unwrap();
        assert_eq!(read_state(&p).unwrap(), Some(marks));
        fs::write(&p, b"junk").unwrap();
        assert!(read_state(&p).unwrap_err().contains(STATE_FILE));
    }
}
