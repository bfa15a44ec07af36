//! Functional tests of the ledger store on the simulated disk (no faults, no crashes) and on a
//! real disk with io_uring: flush and read back, duplicates, rotation, reopen, index merges
//! against a BTreeMap model, deletion, and the sparse-index memory bound.

use std::collections::BTreeMap;

use bytes::Bytes;
use entrylog::{FlushBatch, LedgerMeta, LedgerStore, LedgerStoreConfig, Reader, StoreError};
use storage::sim::{SimConfig, SimDisk, SimRng};
use storage::Storage;

fn small_config() -> LedgerStoreConfig {
    LedgerStoreConfig {
        entry_log_size_bytes: 64 << 10,
        write_chunk_bytes: 16 << 10,
        max_writes_in_flight: 2,
        index_block_cache_bytes: 64 << 10,
        index_merge_width: 2,
        max_index_runs: 3,
    }
}

fn body(ledger: u64, entry: u64, version: u64, len: usize) -> Bytes {
    let mut b = vec![0u8; len.max(24)];
    b[0..8].copy_from_slice(&ledger.to_be_bytes());
    b[8..16].copy_from_slice(&entry.to_be_bytes());
    b[16..24].copy_from_slice(&version.to_be_bytes());
    for (i, x) in b[24..].iter_mut().enumerate() {
        *x = (i as u64 ^ ledger ^ entry ^ version) as u8;
    }
    Bytes::from(b)
}

fn meta(ledger: u64) -> LedgerMeta {
    LedgerMeta {
        ledger,
        master_key: Bytes::from(format!("key-{ledger}")),
        ..LedgerMeta::default()
    }
}

/// A reader of `disk`'s store "l" whose runs may span `run_bytes`.
fn run_reader(
    disk: &SimDisk,
    config: &LedgerStoreConfig,
    run_bytes: usize,
) -> Reader<storage::sim::SimStorage> {
    Reader::new(disk.storage("l"), config).with_run_bytes(run_bytes)
}

/// A store on `disk` (4 MiB entry logs) holding `count` entries of `len` bytes of one ledger,
/// flushed, with its view.
fn flushed_ledger(
    disk: &SimDisk,
    ledger: u64,
    count: u64,
    len: usize,
) -> (
    LedgerStoreConfig,
    LedgerStore<storage::sim::SimStorage>,
    std::sync::Arc<entrylog::ReadView>,
) {
    let config = LedgerStoreConfig {
        entry_log_size_bytes: 4 << 20,
        ..small_config()
    };
    let (mut store, _) = LedgerStore::open(disk.storage("l"), config.clone()).unwrap();
    let entries: Vec<(u64, u64, Bytes)> = (0..count)
        .map(|e| (ledger, e, body(ledger, e, 0, len)))
        .collect();
    store
        .flush(&FlushBatch {
            entries,
            ledgers: vec![meta(ledger)],
            journal_mark: 1,
        })
        .unwrap();
    let view = store.snapshot();
    (config, store, view)
}

/// Checks every key of `model` reads back through `reader`, and per-ledger queries agree.
fn check_model<S: Storage>(
    store: &LedgerStore<impl Storage>,
    reader: &mut Reader<S>,
    model: &BTreeMap<(u64, u64), Bytes>,
) {
    let view = store.snapshot();
    for ((l, e), b) in model {
        let got = reader.read(&view, *l, *e).unwrap();
        assert_eq!(got.as_ref(), Some(b), "entry {l}:{e}");
    }
    let mut per_ledger: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (l, e) in model.keys() {
        per_ledger.entry(*l).or_default().push(*e);
    }
    for (l, ids) in &per_ledger {
        assert_eq!(reader.entries_of(&view, *l).unwrap(), *ids, "ledger {l}");
        assert_eq!(
            reader.last_entry(&view, *l).unwrap(),
            ids.last().copied(),
            "ledger {l}"
        );
    }
    assert_eq!(reader.read(&view, 999_999, 0).unwrap(), None);
    assert_eq!(reader.last_entry(&view, 999_999).unwrap(), None);
}

/// A flush is readable at once and after reopening; later duplicates win, within a batch and
/// across batches; the mark and metadata come back.
#[test]
fn flush_read_reopen_duplicates() {
    let disk = SimDisk::new(SimConfig::new(1));
    let config = small_config();
    let (mut store, rec) = LedgerStore::open(disk.storage("l"), config.clone()).unwrap();
    assert_eq!(rec.journal_mark, 0);
    assert!(rec.ledgers.is_empty());
    let mut reader = Reader::new(disk.storage("l"), &config);
    let mut model = BTreeMap::new();
    let mut batch = FlushBatch {
        journal_mark: 10,
        ledgers: vec![meta(1), meta(2)],
        ..FlushBatch::default()
    };
    for e in (0..50).rev() {
        batch.entries.push((1, e, body(1, e, 0, 100 + e as usize)));
        batch.entries.push((2, e, body(2, e, 0, 7)));
    }
    // In-batch duplicate: the later one wins.
    batch.entries.push((1, 3, body(1, 3, 1, 33)));
    for (l, e, b) in &batch.entries {
        model.insert((*l, *e), b.clone());
    }
    let stats = store.flush(&batch).unwrap();
    assert_eq!(stats.entries, 100);
    check_model(&store, &mut reader, &model);
    // Cross-batch duplicate.
    let batch2 = FlushBatch {
        entries: vec![(2, 5, body(2, 5, 2, 5000)), (3, 0, body(3, 0, 0, 1))],
        ledgers: vec![LedgerMeta {
            fenced: true,
            lac: Some(4),
            explicit_lac: Some(Bytes::from_static(b"x")),
            ..meta(2)
        }],
        journal_mark: 20,
    };
    for (l, e, b) in &batch2.entries {
        model.insert((*l, *e), b.clone());
    }
    store.flush(&batch2).unwrap();
    check_model(&store, &mut reader, &model);
    drop(reader);
    drop(store);
    let (store, rec) = LedgerStore::open(disk.storage("l"), config.clone()).unwrap();
    assert_eq!(rec.journal_mark, 20);
    let by_id: BTreeMap<u64, LedgerMeta> = rec.ledgers.into_iter().map(|m| (m.ledger, m)).collect();
    assert_eq!(by_id.len(), 3);
    assert!(by_id[&2].fenced);
    assert_eq!(by_id[&2].lac, Some(4));
    assert_eq!(by_id[&2].last_entry, Some(49));
    assert_eq!(by_id[&1].last_entry, Some(49));
    assert_eq!(by_id[&1].master_key, Bytes::from_static(b"key-1"));
    // Ledger 3 had entries but no metadata: a default one is made.
    assert_eq!(by_id[&3].last_entry, Some(0));
    let mut reader = Reader::new(disk.storage("l"), &config);
    check_model(&store, &mut reader, &model);
}

/// Many flushes with random keys, rotations and merges: lookups always equal a BTreeMap
/// model, the run count stays bounded, and a scan of the segments (the rebuild source) gives
/// the same map as the index.
#[test]
fn index_matches_model_across_runs_and_merges() {
    let disk = SimDisk::new(SimConfig::new(2).with_latency_us(1, 20));
    let config = small_config();
    let (mut store, _) = LedgerStore::open(disk.storage("l"), config.clone()).unwrap();
    let mut reader = Reader::new(disk.storage("l"), &config);
    let mut rng = SimRng::new(7);
    let mut model = BTreeMap::new();
    let mut merges = 0;
    for round in 0..30u64 {
        let mut batch = FlushBatch {
            journal_mark: round + 1,
            ..FlushBatch::default()
        };
        for _ in 0..rng.range(1, 120) {
            let l = rng.range(1, 12);
            let e = rng.below(300);
            let b = body(l, e, round, rng.range(0, 900) as usize);
            batch.entries.push((l, e, b.clone()));
            model.insert((l, e), b);
        }
        let stats = store.flush(&batch).unwrap();
        merges += stats.merges;
        assert_eq!(stats.merge_failures, 0, "{stats:?}");
        assert!(store.snapshot().runs().len() <= config.max_index_runs);
        check_model(&store, &mut reader, &model);
    }
    assert!(merges > 0, "no merge happened");
    assert!(
        store.snapshot().segments().len() > 3,
        "no rotation happened"
    );
    // Rebuild from the entry log: newest (scan order) wins, equals the index.
    let mut rebuilt: BTreeMap<(u64, u64), entrylog::Location> = BTreeMap::new();
    store
        .scan_all(|s| {
            rebuilt.insert((s.ledger, s.entry), s.location);
        })
        .unwrap();
    let view = store.snapshot();
    assert_eq!(rebuilt.len(), model.len());
    for (k, loc) in &rebuilt {
        assert_eq!(reader.locate(&view, k.0, k.1).unwrap(), Some(*loc), "{k:?}");
    }
    // Merged-away run files are removed once no view holds them.
    drop(view);
    store.collect_garbage();
    let runs = disk
        .volatile_names("l")
        .iter()
        .filter(|n| n.ends_with(".idx"))
        .count();
    assert_eq!(runs, store.snapshot().runs().len());
}

/// A deleted ledger's entries disappear from reads at once and from the index at merges; its
/// tombstone survives a reopen; other ledgers are untouched.
#[test]
fn delete_ledger_drops_entries() {
    let disk = SimDisk::new(SimConfig::new(3));
    let config = small_config();
    let (mut store, _) = LedgerStore::open(disk.storage("l"), config.clone()).unwrap();
    let mut reader = Reader::new(disk.storage("l"), &config);
    for round in 0..3u64 {
        let entries = (0..20)
            .flat_map(|e| {
                [
                    (5, e + round * 20, body(5, e, round, 64)),
                    (6, e + round * 20, body(6, e, round, 64)),
                ]
            })
            .collect();
        store
            .flush(&FlushBatch {
                entries,
                ledgers: vec![meta(5), meta(6)],
                journal_mark: round + 1,
            })
            .unwrap();
    }
    let before = store.snapshot().index_records();
    store
        .flush(&FlushBatch {
            entries: vec![(5, 1000, body(5, 1000, 9, 10))],
            ledgers: vec![LedgerMeta {
                deleted: true,
                ..meta(5)
            }],
            journal_mark: 10,
        })
        .unwrap();
    let view = store.snapshot();
    assert_eq!(reader.read(&view, 5, 0).unwrap(), None);
    assert_eq!(reader.entries_of(&view, 5).unwrap(), Vec::<u64>::new());
    assert_eq!(reader.last_entry(&view, 5).unwrap(), None);
    assert_eq!(reader.entries_of(&view, 6).unwrap().len(), 60);
    // Force merges with more flushes of ledger 6 only, each bigger than every run before it
    // (an older run smaller than a newer one is merged into it).
    let mut added = 0;
    for round in 0..2u64 {
        let entries: Vec<_> = (0..130u64)
            .map(|i| {
                let e = 100 + round * 130 + i;
                (6, e, body(6, e, 0, 8))
            })
            .collect();
        added += entries.len() as u64;
        store
            .flush(&FlushBatch {
                entries,
                ledgers: vec![],
                journal_mark: 11 + round,
            })
            .unwrap();
    }
    let after = store.snapshot().index_records();
    assert_eq!(before, 120);
    assert_eq!(after, 60 + added, "merges kept deleted records");
    drop((view, reader, store));
    let (store, rec) = LedgerStore::open(disk.storage("l"), config.clone()).unwrap();
    assert!(rec.ledgers.iter().any(|m| m.ledger == 5 && m.deleted));
    let mut reader = Reader::new(disk.storage("l"), &config);
    assert_eq!(reader.read(&store.snapshot(), 5, 1).unwrap(), None);
    assert_eq!(
        reader.entries_of(&store.snapshot(), 6).unwrap().len() as u64,
        60 + added
    );
}

/// Corrupting an entry on disk makes its read an error, never wrong data; other entries
/// still read.
#[test]
fn corrupt_entry_is_an_error() {
    let disk = SimDisk::new(SimConfig::new(4));
    let config = small_config();
    let (mut store, _) = LedgerStore::open(disk.storage("l"), config.clone()).unwrap();
    let entries = (0..10).map(|e| (1, e, body(1, e, 0, 200))).collect();
    store
        .flush(&FlushBatch {
            entries,
            ledgers: vec![meta(1)],
            journal_mark: 1,
        })
        .unwrap();
    let view = store.snapshot();
    let mut reader = Reader::new(disk.storage("l"), &config);
    let loc = reader.locate(&view, 1, 4).unwrap().unwrap();
    flip_body_byte(&disk, loc);
    match reader.read(&view, 1, 4) {
        Err(StoreError::Corruption { offset, .. }) => assert_eq!(offset, loc.offset),
        other => panic!("expected corruption, got {other:?}"),
    }
    assert_eq!(reader.read(&view, 1, 5).unwrap(), Some(body(1, 5, 0, 200)));
    assert!(matches!(
        store.scan_all(|_| {}),
        Err(StoreError::Corruption { .. })
    ));
}

/// Building a run of 1,000,000 entries keeps its sparse index under the documented bound of
/// 126,000 bytes per million entries (+ fixed overhead), and lookups still work.
#[test]
fn sparse_index_memory_per_million() {
    let disk = SimDisk::new(SimConfig::new(5).with_latency_us(1, 2));
    let config = LedgerStoreConfig {
        max_index_runs: 8,
        ..LedgerStoreConfig::default()
    };
    let (mut store, _) = LedgerStore::open(disk.storage("l"), config.clone()).unwrap();
    let empty = Bytes::new();
    let entries: Vec<(u64, u64, Bytes)> = (0..1_000_000u64)
        .map(|i| (i % 1000, i / 1000, empty.clone()))
        .collect();
    store
        .flush(&FlushBatch {
            entries,
            ledgers: vec![],
            journal_mark: 1,
        })
        .unwrap();
    let view = store.snapshot();
    assert_eq!(view.index_records(), 1_000_000);
    let mem = view.index_memory_bytes();
    eprintln!("sparse index + run overhead for 1,000,000 entries: {mem} bytes");
    assert!(mem <= 126_000 + 256, "sparse index uses {mem} bytes");
    let mut reader = Reader::new(disk.storage("l"), &config);
    assert_eq!(reader.read(&view, 777, 999).unwrap(), Some(Bytes::new()));
    assert_eq!(reader.last_entry(&view, 5).unwrap(), Some(999));
    assert_eq!(reader.entries_of(&view, 0).unwrap().len(), 1000);
}

/// An empty directory with a stray data file but no MANIFEST refuses to open (it is never
/// taken for garbage); garbage next to a MANIFEST is removed.
#[test]
fn missing_manifest_and_garbage() {
    let disk = SimDisk::new(SimConfig::new(6));
    let mut s = disk.storage("x");
    s.open("0000000000000005.log", true).unwrap();
    match LedgerStore::open(disk.storage("x"), small_config()) {
        Err(StoreError::Corruption {
            kind: entrylog::CorruptionKind::MissingManifest,
            ..
        }) => {}
        other => panic!("expected MissingManifest, got {:?}", other.map(|_| ())),
    }
    let (store, _) = LedgerStore::open(disk.storage("y"), small_config()).unwrap();
    drop(store);
    let mut s = disk.storage("y");
    s.open("0000000000000009.idx", true).unwrap();
    s.open("MANIFEST.tmp", true).unwrap();
    s.open("notes.txt", true).unwrap();
    let (store, _) = LedgerStore::open(disk.storage("y"), small_config()).unwrap();
    assert_eq!(
        disk.volatile_names("y"),
        vec!["MANIFEST".to_string(), "notes.txt".to_string()]
    );
    assert!(store.manifest().next_file_id >= 10);
}

/// On a real disk with io_uring (or psync fallback): flush, read back, reopen, read back;
/// prints the flush throughput.
#[test]
fn real_disk_flush_and_read() {
    let base = if std::path::Path::new("/tmp").is_dir() {
        std::path::PathBuf::from("/tmp")
    } else {
        std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
    };
    let dir = tempfile::tempdir_in(base).unwrap();
    let config = LedgerStoreConfig {
        entry_log_size_bytes: 32 << 20,
        ..LedgerStoreConfig::default()
    };
    let (mut store, _) = LedgerStore::open(
        storage::open_dir(dir.path(), 256, false).unwrap(),
        config.clone(),
    )
    .unwrap();
    let mut model = BTreeMap::new();
    let mut total = 0usize;
    let mut elapsed = std::time::Duration::ZERO;
    for round in 0..4u64 {
        let mut batch = FlushBatch {
            journal_mark: round + 1,
            ledgers: (0..50).map(meta).collect(),
            ..FlushBatch::default()
        };
        for i in 0..5000u64 {
            let b = body(i % 50, round * 10_000 + i, round, 1024);
            total += b.len();
            model.insert((i % 50, round * 10_000 + i), b.clone());
            batch.entries.push((i % 50, round * 10_000 + i, b));
        }
        let t = std::time::Instant::now();
        store.flush(&batch).unwrap();
        elapsed += t.elapsed();
    }
    eprintln!(
        "real disk: flushed {} MiB in {:?}: {:.0} MiB/s",
        total >> 20,
        elapsed,
        total as f64 / 1048576.0 / elapsed.as_secs_f64()
    );
    let mut reader = Reader::new(storage::open_dir(dir.path(), 64, false).unwrap(), &config);
    check_model(&store, &mut reader, &model);
    drop(reader);
    drop(store);
    let (store, rec) = LedgerStore::open(
        storage::open_dir(dir.path(), 256, false).unwrap(),
        config.clone(),
    )
    .unwrap();
    assert_eq!(rec.journal_mark, 4);
    let mut reader = Reader::new(storage::open_dir(dir.path(), 64, false).unwrap(), &config);
    check_model(&store, &mut reader, &model);
}

/// A reader holding an old view keeps reading it after merges retire that view's runs: the
/// files are removed only once no view holds them.
#[test]
fn old_view_survives_merges() {
    let disk = SimDisk::new(SimConfig::new(8).with_latency_us(1, 20));
    let config = LedgerStoreConfig {
        max_index_runs: 2,
        ..small_config()
    };
    let (mut store, _) = LedgerStore::open(disk.storage("l"), config.clone()).unwrap();
    let mut reader = Reader::new(disk.storage("l"), &config);
    for r in 0..2u64 {
        store
            .flush(&FlushBatch {
                entries: vec![(1, r, body(1, r, 0, 50))],
                ledgers: vec![],
                journal_mark: r + 1,
            })
            .unwrap();
    }
    let old = store.snapshot();
    let old_runs: Vec<u64> = old.runs().iter().map(|r| r.id).collect();
    for r in 2..8u64 {
        let s = store
            .flush(&FlushBatch {
                entries: vec![(1, r, body(1, r, 0, 50))],
                ledgers: vec![],
                journal_mark: r + 1,
            })
            .unwrap();
        assert_eq!(s.merge_failures, 0);
    }
    let new = store.snapshot();
    assert!(
        new.runs().iter().all(|r| !old_runs.contains(&r.id)),
        "old runs still live"
    );
    // The old view still reads (its run files are still there).
    for r in 0..2u64 {
        assert_eq!(reader.read(&old, 1, r).unwrap(), Some(body(1, r, 0, 50)));
    }
    assert_eq!(
        reader.entries_of(&new, 1).unwrap(),
        (0..8).collect::<Vec<_>>()
    );
    drop(old);
    store
        .flush(&FlushBatch {
            journal_mark: 100,
            ..FlushBatch::default()
        })
        .unwrap();
    let idx = disk
        .volatile_names("l")
        .iter()
        .filter(|n| n.ends_with(".idx"))
        .count();
    assert_eq!(idx, store.snapshot().runs().len());
}

/// Garbage collection: deleted ledgers leave the index, segments with nothing live are
/// dropped, segments under the threshold are compacted in steps with flushes (overwrites,
/// new ledgers) between the steps, and every live entry reads back before and after reopening
/// while the disk usage falls.
#[test]
fn gc_drops_deleted_ledgers_and_compacts_segments() {
    let disk = SimDisk::new(SimConfig::new(11));
    let config = small_config();
    let (mut store, _) = LedgerStore::open(disk.storage("l"), config.clone()).unwrap();
    let mut reader = Reader::new(disk.storage("l"), &config);
    let mut model: BTreeMap<(u64, u64), Bytes> = BTreeMap::new();
    // Ledgers 1..=4 interleaved, so every segment holds all of them.
    let mut mark = 0;
    for round in 0..6u64 {
        let mut entries = Vec::new();
        for l in 1..=4u64 {
            for e in 0..25u64 {
                let id = round * 25 + e;
                let b = body(l, id, 0, 300);
                model.insert((l, id), b.clone());
                entries.push((l, id, b));
            }
        }
        mark += 1;
        store
            .flush(&FlushBatch {
                entries,
                ledgers: (1..=4).map(meta).collect(),
                journal_mark: mark,
            })
            .unwrap();
    }
    // Ledger 9 alone fills whole segments.
    for round in 0..3u64 {
        let entries: Vec<_> = (0..100u64)
            .map(|e| (9, round * 100 + e, body(9, round * 100 + e, 0, 500)))
            .collect();
        mark += 1;
        store
            .flush(&FlushBatch {
                entries,
                ledgers: vec![meta(9)],
                journal_mark: mark,
            })
            .unwrap();
    }
    let segments_before = store.snapshot().segments().len();
    let bytes_before: u64 = store.snapshot().segments().iter().map(|s| s.len).sum();
    // Delete 1, 2, 3 and 9: the interleaved segments keep a quarter live.
    mark += 1;
    store
        .flush(&FlushBatch {
            entries: vec![],
            ledgers: [1, 2, 3, 9]
                .into_iter()
                .map(|l| LedgerMeta {
                    deleted: true,
                    ..meta(l)
                })
                .collect(),
            journal_mark: mark,
        })
        .unwrap();
    model.retain(|(l, _), _| *l == 4);
    let gc = store.collect_index().unwrap();
    assert_eq!(store.snapshot().runs().len(), 1);
    assert_eq!(gc.records_after, 150, "{gc:?}");
    assert!(gc.records_before > gc.records_after);
    assert!(gc.segments_dropped >= 2, "ledger 9's own segments: {gc:?}");
    check_model(&store, &mut reader, &model);
    let low: Vec<_> = gc.usage.iter().filter(|u| u.usage() < 0.5).collect();
    assert!(!low.is_empty(), "{gc:?}");

    let mut c = store
        .begin_compaction(&gc.usage, 0.5, u64::MAX)
        .unwrap()
        .expect("segments under the threshold");
    let mut steps = 0;
    let stats = loop {
        steps += 1;
        match store.compact_step(&mut c, 4096).unwrap() {
            entrylog::Step::More(_) => {
                // A flush between steps: overwrite one live entry, add a new ledger.
                let b = body(4, steps, 7, 100);
                model.insert((4, steps), b.clone());
                let n = body(20, steps, 0, 100);
                model.insert((20, steps), n.clone());
                mark += 1;
                store
                    .flush(&FlushBatch {
                        entries: vec![(4, steps, b), (20, steps, n)],
                        ledgers: vec![meta(20)],
                        journal_mark: mark,
                    })
                    .unwrap();
                check_model(&store, &mut reader, &model);
            }
            entrylog::Step::Done(stats) => break stats,
        }
    };
    assert!(steps > 2, "the copy was done in steps");
    assert!(
        stats.entries_copied > 0 && stats.bytes_reclaimed() > 0,
        "{stats:?}"
    );
    check_model(&store, &mut reader, &model);
    let bytes_after: u64 = store.snapshot().segments().iter().map(|s| s.len).sum();
    assert!(
        bytes_after < bytes_before / 2,
        "{segments_before} segments, {bytes_before} B -> {bytes_after} B"
    );
    // Old segment files go once the reader lets go of old views.
    drop(reader);
    store.collect_garbage();
    assert_eq!(store.retired_files(), 0);
    let names = disk.storage("l").list().unwrap();
    let seg_files = names.iter().filter(|n| n.ends_with(".log")).count();
    assert_eq!(seg_files, store.snapshot().segments().len(), "{names:?}");
    drop(store);
    let (store, _) = LedgerStore::open(disk.storage("l"), config.clone()).unwrap();
    let mut reader = Reader::new(disk.storage("l"), &config);
    check_model(&store, &mut reader, &model);
    assert_eq!(
        reader.entries_of(&store.snapshot(), 9).unwrap(),
        Vec::<u64>::new()
    );
}

/// Tombstones do not pile up: a deleted ledger's tombstone goes at the collection that finds
/// no record and no segment of it left — at once for a ledger whose segments held nothing
/// else, after a compaction for one that shared its segments, never while the active segment
/// may still hold its entries — and stays gone after reopening, while the other ledger reads
/// back. A tombstone found at open is kept until every segment then present is gone.
#[test]
fn tombstones_are_purged_once_nothing_refers_to_the_ledger() {
    let disk = SimDisk::new(SimConfig::new(23));
    let config = small_config();
    let (mut store, _) = LedgerStore::open(disk.storage("l"), config.clone()).unwrap();
    let mut model: BTreeMap<(u64, u64), Bytes> = BTreeMap::new();
    let mut mark = 0;
    let mut flush =
        |store: &mut LedgerStore<_>, entries: Vec<(u64, u64, Bytes)>, ledgers: Vec<LedgerMeta>| {
            mark += 1;
            store
                .flush(&FlushBatch {
                    entries,
                    ledgers,
                    journal_mark: mark,
                })
                .unwrap();
        };
    // Ledger 3 alone in its segments, then ledgers 1 and 2 interleaved.
    for round in 0..2u64 {
        let entries = (0..100u64)
            .map(|e| (3, round * 100 + e, body(3, round * 100 + e, 0, 500)))
            .collect();
        flush(&mut store, entries, vec![meta(3)]);
    }
    for round in 0..4u64 {
        let mut entries = Vec::new();
        for l in 1..=2u64 {
            for e in 0..40u64 {
                let id = round * 40 + e;
                let b = body(l, id, 0, 300);
                model.insert((l, id), b.clone());
                entries.push((l, id, b));
            }
        }
        flush(&mut store, entries, vec![meta(1), meta(2)]);
    }
    let tombstone = |l: u64| LedgerMeta {
        deleted: true,
        ..meta(l)
    };
    flush(&mut store, vec![], vec![tombstone(1), tombstone(3)]);
    model.retain(|(l, _), _| *l == 2);
    let deleted = |store: &LedgerStore<_>| -> Vec<u64> {
        store
            .ledgers()
            .values()
            .filter(|m| m.deleted)
            .map(|m| m.ledger)
            .collect()
    };
    let gc = store.collect_index().unwrap();
    assert!(gc.segments_dropped >= 2, "ledger 3's segments: {gc:?}");
    assert_eq!((gc.tombstones_purged, gc.tombstones_kept), (1, 1), "{gc:?}");
    assert_eq!(
        deleted(&store),
        vec![1],
        "3's segments are gone, 1's are shared with 2"
    );
    assert!(store.ledgers().get(&3).is_none());

    // Ledger 1's entries are in the active segment too: a compaction cannot take that one
    // until ledger 2's new entries have rotated it out.
    for round in 4..8u64 {
        let entries: Vec<_> = (0..40u64)
            .map(|e| {
                let id = round * 40 + e;
                let b = body(2, id, 0, 300);
                model.insert((2, id), b.clone());
                (2, id, b)
            })
            .collect();
        flush(&mut store, entries, vec![meta(2)]);
    }
    let gc = store.collect_index().unwrap();
    assert_eq!(
        gc.tombstones_kept, 1,
        "1's segments are still there: {gc:?}"
    );
    let mut c = store
        .begin_compaction(&gc.usage, 0.99, u64::MAX)
        .unwrap()
        .expect("half-live segments");
    while let entrylog::Step::More(_) = store.compact_step(&mut c, 1 << 20).unwrap() {}
    let gc = store.collect_index().unwrap();
    assert_eq!((gc.tombstones_purged, gc.tombstones_kept), (1, 0), "{gc:?}");
    assert!(deleted(&store).is_empty());
    assert!(store.ledgers().get(&1).is_none());
    let mut reader = Reader::new(disk.storage("l"), &config);
    check_model(&store, &mut reader, &model);
    drop(reader);
    drop(store);

    // Reopened: no tombstone came back; ledger 2 reads back.
    let (mut store, rec) = LedgerStore::open(disk.storage("l"), config.clone()).unwrap();
    assert!(rec.ledgers.iter().all(|m| !m.deleted), "{:?}", rec.ledgers);
    let mut reader = Reader::new(disk.storage("l"), &config);
    check_model(&store, &mut reader, &model);
    drop(reader);

    // A tombstone found at open: where its entries are is unknown, so it waits for every
    // segment present at open to go.
    // (Ledger 5 keeps the segment of the open live.)
    flush(
        &mut store,
        vec![(5, 0, body(5, 0, 0, 300))],
        vec![tombstone(2), meta(5)],
    );
    drop(store);
    let (mut store, _) = LedgerStore::open(disk.storage("l"), config.clone()).unwrap();
    let gc = store.collect_index().unwrap();
    assert_eq!(
        gc.tombstones_kept, 1,
        "the active segment is still there: {gc:?}"
    );
    assert_eq!(deleted(&store), vec![2]);

    // A ledger first written after the open is not held back by the segments of the open:
    // ledger 7's entries (60 KiB each, a 64 KiB segment each) go into new segments, then
    // ledger 8's rotate the active segment away from them.
    flush(
        &mut store,
        (0..3).map(|e| (7, e, body(7, e, 0, 60 << 10))).collect(),
        vec![meta(7)],
    );
    flush(
        &mut store,
        vec![(8, 0, body(8, 0, 0, 60 << 10))],
        vec![meta(8)],
    );
    flush(&mut store, vec![], vec![tombstone(7)]);
    let gc = store.collect_index().unwrap();
    assert!(gc.segments_dropped >= 3, "{gc:?}");
    assert_eq!((gc.tombstones_purged, gc.tombstones_kept), (1, 1), "{gc:?}");
    assert_eq!(
        deleted(&store),
        vec![2],
        "7 is forgotten, 2 waits for the old segments"
    );
}

/// Flips one byte of a stored entry's body in place, through the port.
fn flip_body_byte(disk: &SimDisk, loc: entrylog::Location) {
    let seg = entrylog::format::file_name(entrylog::format::FileKind::Segment, loc.segment as u64);
    let mut s = disk.storage("l");
    let f = s.open(&seg, false).unwrap();
    let at = loc.offset + 40;
    let block = at & !4095;
    let mut out = Vec::new();
    s.submit(
        1,
        storage::Op::Read {
            file: f,
            offset: block,
            buf: storage::AlignedBuf::zeroed(4096),
        },
    )
    .unwrap();
    while out.is_empty() {
        s.poll(&mut out, storage::Wait::AtLeastOne { timeout_us: None })
            .unwrap();
    }
    let mut buf = out.pop().unwrap().buf.unwrap();
    buf.set_len(4096);
    buf[(at - block) as usize] ^= 0x10;
    s.submit(
        2,
        storage::Op::Write {
            file: f,
            offset: block,
            buf,
        },
    )
    .unwrap();
    while out.is_empty() {
        s.poll(&mut out, storage::Wait::AtLeastOne { timeout_us: None })
            .unwrap();
    }
    s.close(f);
}

/// Runs: `read_run` brings a ledger's contiguous entries in one device read, byte for byte,
/// within its entry and byte limits; `read` reads one entry; a corrupt entry inside a run ends
/// the run and fails only when it is asked for; a deleted ledger's entries are never read.
#[test]
fn a_run_is_one_device_read() {
    let disk = SimDisk::new(SimConfig::new(9));
    let config = LedgerStoreConfig {
        entry_log_size_bytes: 1 << 20,
        ..small_config()
    };
    let (mut store, _) = LedgerStore::open(disk.storage("l"), config.clone()).unwrap();
    // Two ledgers written interleaved: the flush stores each contiguously.
    let mut entries = Vec::new();
    for e in 0..300 {
        entries.push((1, e, body(1, e, 0, 200)));
        entries.push((2, e, body(2, e, 0, 150)));
    }
    store
        .flush(&FlushBatch {
            entries,
            ledgers: vec![meta(1), meta(2)],
            journal_mark: 1,
        })
        .unwrap();
    let view = store.snapshot();
    let mut reader = run_reader(&disk, &config, 64 << 10);
    // A single read is one entry, not a run.
    assert_eq!(reader.read(&view, 1, 0).unwrap(), Some(body(1, 0, 0, 200)));
    assert_eq!(reader.runs_read, 0);
    // 299 entries in runs of at most 50 (and 64 KiB: 232 B each fits 50): 6 device reads.
    let mut e = 1;
    while e < 300 {
        let reads = disk.stats().reads;
        let run = reader.read_run(&view, 1, e, 50).unwrap().unwrap();
        // One device read for the run's entries (and at times one for the index blocks ahead).
        assert!(
            disk.stats().reads <= reads + 2,
            "one device read from 1:{e}"
        );
        assert_eq!(run.len() as u64, 50.min(300 - e));
        for (i, b) in run.into_iter().enumerate() {
            assert_eq!(b, body(1, e + i as u64, 0, 200), "1:{}", e + i as u64);
        }
        e += 50;
    }
    assert_eq!(reader.runs_read, 6, "runs");
    assert_eq!(reader.entries_ahead, 299 - 6);
    // Past the ledger's end: nothing, and no error.
    assert_eq!(reader.read_run(&view, 1, 300, 50).unwrap(), None);
    // The byte limit: as many stored entries of ledger 2 (150 B and a header) as 2,400 bytes hold.
    let mut small = run_reader(&disk, &config, 2400);
    let fit = 2400 / (150 + entrylog::format::ENTRY_HEADER_BYTES);
    assert_eq!(small.read_run(&view, 2, 0, 50).unwrap().unwrap().len(), fit);
    // No byte limit set: one entry whatever is asked.
    let mut none = Reader::new(disk.storage("l"), &config);
    assert_eq!(none.read_run(&view, 2, 0, 50).unwrap().unwrap().len(), 1);

    // A corrupt entry inside a run: the entries before it come back, it fails alone, and the
    // ones after it read fine.
    let bad = reader.locate(&view, 2, 205).unwrap().unwrap();
    flip_body_byte(&disk, bad);
    let run = reader.read_run(&view, 2, 200, 50).unwrap().unwrap();
    assert_eq!(run.len(), 5, "the run ends before the bad entry");
    for (i, b) in run.into_iter().enumerate() {
        assert_eq!(b, body(2, 200 + i as u64, 0, 150));
    }
    match reader.read(&view, 2, 205) {
        Err(StoreError::Corruption { offset, .. }) => assert_eq!(offset, bad.offset),
        other => panic!("expected corruption, got {other:?}"),
    }
    match reader.read_run(&view, 2, 205, 50) {
        Err(StoreError::Corruption { offset, .. }) => assert_eq!(offset, bad.offset),
        other => panic!("expected corruption, got {other:?}"),
    }
    assert_eq!(
        reader.read(&view, 2, 206).unwrap(),
        Some(body(2, 206, 0, 150))
    );

    // A deleted ledger's entries are not read.
    store
        .flush(&FlushBatch {
            entries: Vec::new(),
            ledgers: vec![LedgerMeta {
                deleted: true,
                ..meta(2)
            }],
            journal_mark: 2,
        })
        .unwrap();
    let view = store.snapshot();
    assert_eq!(reader.read(&view, 2, 251).unwrap(), None);
    assert_eq!(reader.read_run(&view, 2, 250, 40).unwrap(), None);
}

/// `read_each`: many single reads with their device reads in flight together, answered in the
/// asked order and byte for byte as `read` answers them (missing entries, unknown ledgers, a
/// deleted ledger); short reads are read again; a flipped
/// bit is a corruption error for that entry alone, never wrong bytes.
#[test]
fn read_each_keeps_many_reads_in_flight() {
    let disk = SimDisk::new(SimConfig::new(21).with_latency_us(50, 400));
    let config = LedgerStoreConfig {
        entry_log_size_bytes: 1 << 20,
        ..small_config()
    };
    let (mut store, _) = LedgerStore::open(disk.storage("l"), config.clone()).unwrap();
    let mut entries = Vec::new();
    for e in 0..40u64 {
        for l in 1..=8u64 {
            entries.push((
                l,
                e,
                body(l, e, 0, 300 + (l as usize * 97 + e as usize * 13) % 900),
            ));
        }
    }
    let model: BTreeMap<(u64, u64), Bytes> = entries
        .iter()
        .map(|(l, e, b)| ((*l, *e), b.clone()))
        .collect();
    store
        .flush(&FlushBatch {
            entries,
            ledgers: (1..=8).map(meta).collect(),
            journal_mark: 1,
        })
        .unwrap();
    store
        .flush(&FlushBatch {
            entries: Vec::new(),
            ledgers: vec![LedgerMeta {
                deleted: true,
                ..meta(8)
            }],
            journal_mark: 2,
        })
        .unwrap();
    let view = store.snapshot();
    let mut reader = run_reader(&disk, &config, 64 << 10);
    // A shuffled set of keys, with some that are not there.
    let mut rng = SimRng::new(5);
    let mut asked: Vec<(u64, u64)> = Vec::new();
    for _ in 0..48 {
        asked.push((1 + rng.below(9), rng.below(44)));
    }
    let expect = |l: u64, e: u64| {
        if l == 8 {
            None
        } else {
            model.get(&(l, e)).cloned()
        }
    };
    let before = disk.stats();
    let views: Vec<(&entrylog::ReadView, u64, u64)> =
        asked.iter().map(|&(l, e)| (&*view, l, e)).collect();
    let got = reader.read_each(&views);
    assert_eq!(got.len(), asked.len());
    for (&(l, e), r) in asked.iter().zip(&got) {
        assert_eq!(r.as_ref().unwrap(), &expect(l, e), "{l}:{e}");
    }
    let stats = disk.stats();
    assert!(
        stats.max_queued >= 16,
        "device reads went in flight together: depth {}",
        stats.max_queued
    );
    assert!(stats.reads > before.reads);
    assert_eq!(reader.runs_read, 0, "single reads only");

    // Short reads are read again; bit flips are errors, never wrong bytes.
    disk.set_faults(
        storage::sim::FaultConfig::none()
            .with_short_read(0.3)
            .with_read_bitflip(0.1),
    );
    let mut fresh = Reader::new(disk.storage("l"), &config);
    let keys: Vec<(u64, u64)> = (0..60).map(|i| (1 + i % 7, i / 2)).collect();
    let views: Vec<(&entrylog::ReadView, u64, u64)> =
        keys.iter().map(|&(l, e)| (&*view, l, e)).collect();
    let mut errors = 0;
    for (&(l, e), r) in keys.iter().zip(fresh.read_each(&views)) {
        match r {
            Ok(b) => assert_eq!(b, expect(l, e), "{l}:{e}"),
            Err(StoreError::Corruption { .. }) => errors += 1,
            Err(other) => panic!("{l}:{e}: {other}"),
        }
    }
    let stats = disk.stats();
    assert!(stats.short_reads > 0, "the faults ran");
    assert_eq!(errors as u64 > 0, stats.bitflips > 0);
}

/// Read-ahead walks the index from the record it found rather than searching every run per
/// entry (`Reader::locate_cursor`): with re-added entries in newer runs that overlap the older
/// runs' key ranges, holes, and index blocks read ahead in groups, a sequential reader still
/// gets the newest copy of every entry, and nothing for a missing one.
#[test]
fn read_ahead_takes_the_newest_copy_across_runs() {
    let disk = SimDisk::new(SimConfig::new(11));
    let config = LedgerStoreConfig {
        entry_log_size_bytes: 4 << 20,
        max_index_runs: 8,
        ..small_config()
    };
    let (mut store, _) = LedgerStore::open(disk.storage("l"), config.clone()).unwrap();
    let mut rng = SimRng::new(5);
    let mut model: BTreeMap<(u64, u64), Bytes> = BTreeMap::new();
    let mut first = FlushBatch {
        journal_mark: 1,
        ..FlushBatch::default()
    };
    for e in 0..400u64 {
        for l in 1..=4u64 {
            if l == 3 && e % 97 == 50 {
                continue; // holes in ledger 3
            }
            let b = body(l, e, 0, 100);
            first.entries.push((l, e, b.clone()));
            model.insert((l, e), b);
        }
    }
    store.flush(&first).unwrap();
    let mut read_ahead_runs = 0;
    for round in 1..6u64 {
        let mut batch = FlushBatch {
            journal_mark: round + 1,
            ..FlushBatch::default()
        };
        for _ in 0..rng.range(5, 60) {
            let l = rng.range(1, 5);
            let e = rng.below(400 + 40 * round);
            let b = body(l, e, round, 100);
            batch.entries.push((l, e, b.clone()));
            model.insert((l, e), b);
        }
        store.flush(&batch).unwrap();
        let view = store.snapshot();
        assert!(view.runs().len() > 1, "overlapping runs to read across");
        let mut reader = run_reader(&disk, &config, 64 << 10);
        for l in 1..=4u64 {
            // A sequential reader: a run from each entry not brought by the run before.
            let mut e = 0;
            while e < 400 + 40 * round + 5 {
                match reader.read_run(&view, l, e, 64).unwrap() {
                    None => {
                        assert_eq!(model.get(&(l, e)), None, "round {round}, {l}:{e}");
                        e += 1;
                    }
                    Some(run) => {
                        for b in run {
                            assert_eq!(Some(&b), model.get(&(l, e)), "round {round}, {l}:{e}");
                            e += 1;
                        }
                    }
                }
            }
        }
        read_ahead_runs += reader.runs_read;
    }
    assert!(
        read_ahead_runs > 20,
        "read-ahead ran: {read_ahead_runs} runs"
    );
}

/// `read_runs`: the asked run and the ones after it are read with their device reads in
/// flight together (on the simulated disk, whose latency makes them overlap) and told one by
/// one, in order, byte for byte; a group stops at the ledger's end, and past it nothing is read.
#[test]
fn read_runs_reads_several_runs_in_flight() {
    let disk = SimDisk::new(SimConfig::new(31).with_latency_us(50, 200));
    let (config, _store, view) = flushed_ledger(&disk, 8, 290, 300);
    let mut reader = run_reader(&disk, &config, 256 << 10);
    // Up to three runs of 50 from `start`: the runs told, (first entry, entries).
    let mut read_runs = |start: u64| {
        let mut landed = Vec::new();
        let before = disk.stats().max_queued;
        reader
            .read_runs(&view, 8, start, (3, 50), |s, bodies, more| {
                for (i, b) in bodies.iter().enumerate() {
                    assert_eq!(b, &body(8, s + i as u64, 0, 300), "8:{}", s + i as u64);
                }
                landed.push((s, bodies.len(), more));
            })
            .unwrap();
        (landed, reader.runs_read, before)
    };
    let (landed, runs, _) = read_runs(0);
    assert_eq!(
        landed,
        vec![
            (0, 50, Some((50, 150))),
            (50, 50, Some((100, 150))),
            (100, 50, None)
        ],
        "in order, one by one"
    );
    assert_eq!(runs, 3);
    assert!(disk.stats().max_queued >= 2, "the device reads overlapped");
    // Up to the ledger's end: the group stops there, and past it nothing is read.
    assert_eq!(
        read_runs(200).0,
        vec![(200, 50, Some((250, 290))), (250, 40, None)]
    );
    assert_eq!(read_runs(290).0, vec![(290, 0, None)]);
}
