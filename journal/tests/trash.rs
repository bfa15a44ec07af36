//! Trimmed segments beyond the free pool are renamed `*.trash`, never unlinked by the journal
//! itself (its owner's thread is an event loop; unlinking a 64 MiB file takes 60-70 ms on ext4
//! with `discard`): the owner takes them and deletes them elsewhere, and the next open deletes
//! what was left.

use journal::{Journal, JournalConfig, Lsn};
use storage::sim::{SimConfig, SimDisk};

const DIR: &str = "journal";

fn config() -> JournalConfig {
    let c = JournalConfig {
        segment_size_bytes: 48 << 10,
        max_record_bytes: 4096,
        buffered_writes_threshold_bytes: 8192,
        zero_fill_chunk_bytes: 16 << 10,
        max_free_segments: 1,
        max_group_wait_us: 100,
        ..JournalConfig::default()
    };
    c.validate().expect("valid test config");
    c
}

fn fill(j: &mut Journal<storage::sim::SimStorage>, disk: &SimDisk, records: usize) {
    let payload = [9u8; 3000];
    let mut n = 0;
    while n < records {
        if j.append(&payload, disk.now_us()).is_ok() {
            n += 1;
        }
        j.tick(disk.now_us(), true).expect("tick");
        disk.advance(50);
    }
    j.flush().expect("flush");
}

fn names(disk: &SimDisk, suffix: &str) -> Vec<String> {
    let mut v: Vec<String> = disk
        .volatile_names(DIR)
        .into_iter()
        .filter(|n| n.ends_with(suffix))
        .collect();
    v.sort();
    v
}

#[test]
fn trim_sets_files_aside_and_the_owner_or_the_next_open_deletes_them() {
    let disk = SimDisk::new(SimConfig::new(5).with_latency_us(5, 100));
    let mut j = Journal::open(disk.storage(DIR), config(), Lsn(0), &mut |_, _| {}).expect("open");
    fill(&mut j, &disk, 100);
    let trimmed = j.trim(Lsn(j.durable_lsn().0 + 1)).expect("trim");
    assert!(
        trimmed >= 4,
        "premise: several sealed segments, {trimmed} trimmed"
    );
    // One recycled (the pool holds one), the rest set aside, nothing deleted yet.
    assert_eq!(
        names(&disk, ".free").len(),
        1,
        "{:?}",
        disk.volatile_names(DIR)
    );
    let trash = names(&disk, ".trash");
    assert_eq!(trash.len(), trimmed - 1, "{:?}", disk.volatile_names(DIR));
    let taken = {
        let mut t = j.take_trash();
        t.sort();
        t
    };
    assert_eq!(
        taken, trash,
        "the owner is given exactly the files set aside"
    );
    assert!(j.take_trash().is_empty(), "given once");
    // The owner deletes one of them, then the process dies before the rest.
    let mut storage = disk.storage(DIR);
    storage::Storage::remove(&mut storage, &taken[0]).expect("remove");
    drop(storage);
    drop(j);
    disk.crash();
    let mut j = Journal::open(disk.storage(DIR), config(), Lsn(0), &mut |_, _| {}).expect("reopen");
    assert!(
        names(&disk, ".trash").is_empty(),
        "the open deleted the rest: {:?}",
        disk.volatile_names(DIR)
    );
    // The log goes on after the restart, and its later trash goes through the port.
    fill(&mut j, &disk, 40);
    j.trim(Lsn(j.durable_lsn().0 + 1)).expect("trim");
    j.remove_trash().expect("remove through the port");
    assert!(names(&disk, ".trash").is_empty());
}
