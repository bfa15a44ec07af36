//! Taking over a stopped Java bookie's directories in place (issue 32): started on the Java
//! bookie's own `bk_server.conf`, this bookie serves what Java stored there and goes on from
//! it, with no re-replication. Interleaved/SortedLedgerStorage so far (index files); a
//! DbLedgerStorage bookie's directories are still refused by the start-up audit.
//!
//! At start (`start`, before the shards open):
//! 1. **Java's journal tail is made ours.** The records after Java's `lastMark` (what Java
//!    acknowledged but had not checkpointed: after a SIGKILL, the only copy of the newest
//!    entries) are replayed with Java's rules (`javastore::replay`) and flushed, entries and
//!    ledger metadata, into the shards' own ledger storage, in bounded batches, each durable
//!    before the next. Then `java-takeover` records where the replay ended, so a restart
//!    never replays it again (a ledger deleted since must not come back from it).
//! 2. **The index files are listed**, and each ledger's master key, fenced bit, explicit LAC,
//!    last entry and LAC (from the last entry's own bytes) read: a small read or three per
//!    ledger, nothing proportional to the data.
//!
//! While serving, a shard adopts its share of those ledgers into its ledger table (ours wins
//! where both know a ledger, fences add up); cache-miss reads that this bookie's ledger storage
//! cannot answer go to the Java files (`read::disk_reader`). New writes go to our own files.
//! Java's files are never written; the only change to them is what Java's own garbage
//! collection would make: a deleted ledger's index file is removed.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use entrylog::{FlushBatch, LedgerMeta, LedgerStore};
use javastore::journal::LastMark;
use javastore::replay::{replay_from, Replayed};
use javastore::sorted::SortedStore;
use javastore::{JavaDirs, StorageKind};

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
    /// The listing of index files and entry logs; each reader thread reads through its own
    /// copy.
    pub store: SortedStore,
    pub ledgers: BTreeMap<u64, LegacyLedger>,
}

impl Legacy {
    /// The index file of a ledger, if it is a taken-over one.
    pub fn index_path(&self, ledger: u64) -> Option<&PathBuf> {
        self.store.index_path(ledger)
    }
}

/// True when `config` describes a Java bookie this bookie can take over (its storage class is
/// Interleaved or SortedLedgerStorage).
pub fn can_take_over(config: &BookieConfig) -> bool {
    config.java_storage.is_sorted()
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
    match dirs.storage_kind().map_err(|e| e.to_string())? {
        StorageKind::Db => {
            return Err(
                "taking over a DbLedgerStorage bookie's directories is not supported yet"
                    .to_string(),
            )
        }
        StorageKind::Sorted | StorageKind::NoIndex => {}
    }
    let store = SortedStore::open(dirs.clone()).map_err(|e| e.to_string())?;
    let state_path = config.ledger_dirs[0].join(STATE_FILE);
    let marks = match read_state(&state_path)? {
        Some(marks) => marks,
        None => (0..dirs.journal_dirs.len())
            .map(|j| dirs.last_mark(j))
            .collect(),
    };
    let import = import_journal_tail(config, shards, state, &dirs, &store, &marks)?;
    if let Some((ends, stats)) = import {
        write_state(&state_path, &ends)?;
        log::info!(
            "takeover: Java journal replayed into ledger storage: {} entries, {} master keys, \
             {} fences, {} explicit LACs of {} ledgers; {} records of deleted ledgers skipped",
            stats.entries,
            stats.keys,
            stats.fences,
            stats.lacs,
            stats.ledgers,
            stats.skipped
        );
    }
    let mut ledgers = BTreeMap::new();
    let mut reader = store.clone();
    let ids: Vec<u64> = store.ledgers().collect();
    for ledger in ids {
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
        "takeover: {} Java ledgers in {} index files over {} entry logs, ready in {:.0} ms",
        ledgers.len(),
        store.ledgers().count(),
        store.entry_logs().len(),
        started.elapsed().as_secs_f64() * 1e3
    );
    Ok(Arc::new(Legacy { store, ledgers }))
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
    legacy: &SortedStore,
    marks: &[LastMark],
) -> Result<Option<(Vec<LastMark>, ImportStats)>, String> {
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
    let summary = replay_from(
        dirs,
        marks,
        config.java_storage.skip_invalid_journal_records,
        |_, _, _, rec| {
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
        },
    )
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
    legacy: &SortedStore,
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
        let idx = legacy
            .index_file(ledger as u64)
            .map_err(|e| e.to_string())?
            .map(|f| f.header);
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

/// Reads the replay's end from an earlier takeover; `None` when there was none. A damaged
/// file stops the start: replaying again from Java's mark could bring back deleted ledgers.
fn read_state(path: &Path) -> Result<Option<Vec<LastMark>>, String> {
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

fn decode_state(b: &[u8]) -> Result<Vec<LastMark>, String> {
    if b.len() < 20 || b[0..8] != STATE_MAGIC {
        return Err("not a takeover state file".into());
    }
    let version = u16::from_le_bytes([b[8], b[9]]);
    if version != STATE_VERSION {
        return Err(format!("unknown version {version}"));
    }
    let n = u32::from_le_bytes(b[12..16].try_into().expect("4")) as usize;
    let end = 16 + 16 * n;
    if b.len() != end + 4 {
        return Err(format!("{} bytes for {n} journals", b.len()));
    }
    let crc = u32::from_le_bytes(b[end..end + 4].try_into().expect("4"));
    if crc32c::crc32c(&b[..end]) != crc {
        return Err("checksum mismatch".into());
    }
    Ok((0..n)
        .map(|i| {
            let at = 16 + 16 * i;
            LastMark {
                file_id: u64::from_le_bytes(b[at..at + 8].try_into().expect("8")),
                offset: u64::from_le_bytes(b[at + 8..at + 16].try_into().expect("8")),
            }
        })
        .collect())
}

fn encode_state(marks: &[LastMark]) -> Vec<u8> {
    let mut b = Vec::with_capacity(20 + 16 * marks.len());
    b.extend_from_slice(&STATE_MAGIC);
    b.extend_from_slice(&STATE_VERSION.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&(marks.len() as u32).to_le_bytes());
    for m in marks {
        b.extend_from_slice(&m.file_id.to_le_bytes());
        b.extend_from_slice(&m.offset.to_le_bytes());
    }
    let crc = crc32c::crc32c(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

/// Writes the state durably: a temporary file, synced, renamed over, the directory synced.
fn write_state(path: &Path, marks: &[LastMark]) -> Result<(), String> {
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
    fn state_round_trips_and_damage_is_refused() {
        let marks = vec![
            LastMark {
                file_id: 0x18c_5f2a_3b4c,
                offset: 4096,
            },
            LastMark {
                file_id: 7,
                offset: 0,
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
