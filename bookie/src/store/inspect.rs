//! `bookie inspect journal|entrylog|index|ledger`: what the journal and ledger storage hold,
//! read with the same code the bookie uses, on a stopped bookie's directory (the directory
//! lock makes sure). Inspecting the journal changes nothing: it scans as recovery does, but
//! seals, renames, removes and creates nothing.

use std::path::Path;

use entrylog::{LedgerStore, LedgerStoreConfig, Reader};

use crate::store::journal_recovery::LostRecords;
use crate::store::lock::DirLock;
use crate::store::record::JournalRecord;

fn open(dir: &Path) -> Result<(DirLock, LedgerStore<storage::RealStorage>), String> {
    let parent = dir.parent().unwrap_or(dir);
    let lock = DirLock::acquire(parent)?;
    let storage =
        storage::open_dir(dir, 64, true).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (store, _) = LedgerStore::open(storage, LedgerStoreConfig::default())
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok((lock, store))
}

/// Verifies every entry and prints a summary.
pub fn entrylog(dir: &Path) -> Result<(), String> {
    let (_lock, mut store) = open(dir)?;
    let m = store.manifest().clone();
    println!(
        "manifest generation {}, journal mark {}, {} segments, {} index runs, {} ledgers",
        m.generation,
        m.journal_mark,
        m.segments.len(),
        m.runs.len(),
        store.ledgers().len()
    );
    let mut per_ledger = std::collections::BTreeMap::<u64, (u64, u64)>::new();
    let count = store
        .scan_all(|e| {
            let slot = per_ledger.entry(e.ledger).or_default();
            slot.0 += 1;
            slot.1 += e.location.length as u64;
        })
        .map_err(|e| format!("verification failed: {e}"))?;
    for (ledger, (entries, bytes)) in &per_ledger {
        println!("ledger {ledger:>20}: {entries:>10} entries, {bytes:>14} bytes");
    }
    let view = store.snapshot();
    println!(
        "{count} entries verified (header and CRC32C of each); index: {} records, {} bytes of sparse index in memory",
        view.index_records(),
        view.index_memory_bytes()
    );
    Ok(())
}

/// The entry ids of a ledger, as ranges.
pub fn index(dir: &Path, ledger: u64) -> Result<(), String> {
    let (_lock, store) = open(dir)?;
    let view = store.snapshot();
    let storage =
        storage::open_dir(dir, 64, true).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut reader = Reader::new(storage, &LedgerStoreConfig::default());
    let ids = reader
        .entries_of(&view, ledger)
        .map_err(|e| e.to_string())?;
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for id in ids.iter().copied() {
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == id => *end = id,
            _ => ranges.push((id, id)),
        }
    }
    println!("ledger {ledger}: {} entries", ids.len());
    for (a, b) in ranges {
        println!("  {a}..={b}");
    }
    Ok(())
}

/// A ledger's metadata.
pub fn ledger(dir: &Path, ledger: u64) -> Result<(), String> {
    let (_lock, store) = open(dir)?;
    match store.ledgers().get(&ledger) {
        None => println!("ledger {ledger}: not in this ledger storage"),
        Some(m) => println!(
            "ledger {ledger}: master key {} bytes, fenced {}, deleted {}, last entry {:?}, LAC {:?}, explicit LAC {}",
            m.master_key.len(),
            m.fenced,
            m.deleted,
            m.last_entry,
            m.lac,
            m.explicit_lac.as_ref().map(|b| format!("{} bytes", b.len())).unwrap_or_else(|| "none".into())
        ),
    }
    Ok(())
}

/// One line describing a journal record, and its type's index in the summary.
fn describe(payload: &[u8]) -> (usize, String) {
    match JournalRecord::decode(payload) {
        Some(JournalRecord::Add {
            ledger,
            entry,
            body,
        }) => (
            1,
            format!("add ledger {ledger} entry {entry} ({} bytes)", body.len()),
        ),
        Some(JournalRecord::MasterKey { ledger, key }) => (
            2,
            format!("master key ledger {ledger} ({} bytes)", key.len()),
        ),
        Some(JournalRecord::Fence { ledger }) => (3, format!("fence ledger {ledger}")),
        Some(JournalRecord::ExplicitLac { ledger, body }) => (
            4,
            format!("explicit LAC ledger {ledger} ({} bytes)", body.len()),
        ),
        None => (0, format!("unknown record ({} bytes)", payload.len())),
    }
}

/// Prints the records of one shard's journal directory and where its log ends, read-only.
pub fn journal(dir: &Path) -> Result<(), String> {
    if !dir.is_dir() {
        return Err(format!("{}: not a directory", dir.display()));
    }
    let mut storage =
        storage::open_dir(dir, 64, true).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut by_type = [0u64; 5];
    let mut lost = LostRecords::default();
    let scan = journal::scan(
        &mut storage,
        &journal::JournalConfig::default(),
        journal::Lsn(0),
        &mut |lsn, payload| {
            let (t, text) = describe(payload);
            by_type[t] += 1;
            println!("lsn {:>10}  {text}", lsn.0);
        },
        &mut |_, payload| lost.record(payload),
    );
    let count: u64 = by_type.iter().sum();
    println!(
        "{count} records: {} adds, {} master keys, {} fences, {} explicit LACs, {} unknown",
        by_type[1], by_type[2], by_type[3], by_type[4], by_type[0]
    );
    let scan = scan.map_err(|e| lost.refusal(dir, &e))?;
    println!(
        "{} segments of log; next lsn {}",
        scan.live_segments, scan.next_lsn.0
    );
    if let Some((file, offset, fault)) = &scan.report.torn_tail {
        println!(
            "log ends in {file} at offset {offset} ({fault}); {}",
            scan.report.beyond_cut
        );
    }
    Ok(())
}
