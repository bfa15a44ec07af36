//! Tests of the simulated disk (`storage::sim`): the model documented in its module docs.

/// Inside a module so that `cargo test -p storage sim` selects these tests by name.
mod sim {

    use storage::sim::{FaultConfig, SimConfig, SimDisk, SimRng, SimStorage};
    use storage::{align_down, AlignedBuf, Completion, FileId, IoError, Op, Storage, Wait, ALIGN};

    /// A buffer of `blocks` blocks filled with `byte`.
    fn block(byte: u8, blocks: usize) -> AlignedBuf {
        let mut buf = AlignedBuf::zeroed(blocks * ALIGN);
        buf.fill(byte);
        buf
    }

    /// Waits for every op of `s` to complete.
    fn drain(s: &mut SimStorage) -> Vec<Completion> {
        let mut out = Vec::new();
        while s.in_flight() > 0 {
            s.poll(&mut out, Wait::AtLeastOne { timeout_us: None })
                .unwrap();
        }
        out
    }

    /// Submits one op and waits for it.
    fn run(s: &mut SimStorage, op: Op) -> Completion {
        assert_eq!(s.in_flight(), 0);
        s.submit(99, op).unwrap();
        let mut out = drain(s);
        assert_eq!(out.len(), 1);
        out.pop().unwrap()
    }

    fn write(
        s: &mut SimStorage,
        file: FileId,
        offset: u64,
        buf: AlignedBuf,
    ) -> Result<usize, IoError> {
        run(s, Op::Write { file, offset, buf }).result
    }

    fn sync(s: &mut SimStorage, file: FileId) -> Result<usize, IoError> {
        run(s, Op::SyncData { file }).result
    }

    fn read(
        s: &mut SimStorage,
        file: FileId,
        offset: u64,
        len: usize,
    ) -> (Result<usize, IoError>, Vec<u8>) {
        let c = run(
            s,
            Op::Read {
                file,
                offset,
                buf: AlignedBuf::zeroed(len),
            },
        );
        (c.result, c.buf.unwrap().to_vec())
    }

    /// The basic path: create, write, read back, sync, sync_dir, crash: all of it survives.
    #[test]
    fn synced_data_survives_crash_byte_for_byte() {
        for seed in 0..50 {
            let disk = SimDisk::new(SimConfig::new(seed).with_sector_size(512));
            let mut s = disk.storage("journal");
            let f = s.open("a.log", true).unwrap();
            assert_eq!(write(&mut s, f, 0, block(1, 2)), Ok(2 * ALIGN));
            assert_eq!(write(&mut s, f, 2 * ALIGN as u64, block(2, 1)), Ok(ALIGN));
            let (r, data) = read(&mut s, f, 0, 4 * ALIGN);
            assert_eq!(r, Ok(3 * ALIGN));
            assert_eq!(&data[..2 * ALIGN], &[1u8; 2 * ALIGN][..]);
            assert_eq!(sync(&mut s, f), Ok(0));
            s.sync_dir().unwrap();
            let synced = disk.volatile_file("journal", "a.log").unwrap();
            assert_eq!(disk.durable_file("journal", "a.log").unwrap(), synced);
            // Unsynced tail and overwrite, then crash.
            assert_eq!(
                write(&mut s, f, 3 * ALIGN as u64, block(3, 2)),
                Ok(2 * ALIGN)
            );
            disk.crash();
            let after = disk.durable_file("journal", "a.log").unwrap();
            assert!(after.len() >= synced.len());
            assert_eq!(&after[..synced.len()], &synced[..], "seed {seed}");
            let mut s2 = disk.storage("journal");
            let f2 = s2.open("a.log", false).unwrap();
            assert_eq!(s2.file_len(f2).unwrap(), after.len() as u64);
        }
    }

    /// A random workload over every API call, with every fault class on and crashes in between.
    /// Returns the disk so callers can compare runs. Never panics, whatever the calls.
    fn chaos(seed: u64, steps: usize) -> SimDisk {
        let faults = FaultConfig::all(0.05).with_fsyncgate(seed & 1 == 0);
        let disk = SimDisk::new(
            SimConfig::new(seed)
                .with_faults(faults)
                .with_sector_size(512),
        );
        let mut rng = SimRng::new(seed).fork("workload");
        let names = ["a", "b", "c", "d"];
        let mut handles = vec![disk.storage("journal"), disk.storage("ledgers")];
        let mut opened: Vec<(usize, FileId)> = Vec::new();
        let mut out = Vec::new();
        for step in 0..steps {
            // Mostly the live handles (the last two); now and then a dead one.
            let h = if rng.chance(0.02) {
                rng.below(handles.len() as u64) as usize
            } else {
                handles.len() - 1 - rng.below(2) as usize
            };
            let s = &mut handles[h];
            let name = names[rng.below(names.len() as u64) as usize];
            let mine: Vec<FileId> = opened.iter().filter(|o| o.0 == h).map(|o| o.1).collect();
            let file = if mine.is_empty() || rng.chance(0.1) {
                rng.range(0, 6) as FileId
            } else {
                mine[rng.below(mine.len() as u64) as usize]
            };
            let offset = rng.below(8) * ALIGN as u64 + if rng.chance(0.05) { 7 } else { 0 };
            let mut buf = block(step as u8, rng.range(1, 4) as usize);
            if rng.chance(0.05) {
                buf.set_len(100);
            }
            match rng.below(16) {
                0 => {
                    if let Ok(file) = s.open(name, rng.chance(0.7)) {
                        opened.push((h, file));
                    }
                }
                1 => {
                    s.close(file);
                    opened.retain(|o| *o != (h, file));
                }
                2 => drop(s.rename(name, names[rng.below(4) as usize])),
                3 => drop(s.remove(name)),
                4 => drop(s.sync_dir()),
                5 => drop(s.truncate(file, rng.below(5 * ALIGN as u64))),
                6 => drop(s.allocate(file, offset, rng.below(3 * ALIGN as u64))),
                7 => drop(s.file_len(file)),
                8 => drop(s.list()),
                9 => drop(s.submit(step as u64, Op::SyncData { file })),
                10 | 11 => drop(s.submit(step as u64, Op::Write { file, offset, buf })),
                12 => drop(s.submit(step as u64, Op::Read { file, offset, buf })),
                13 => drop(s.poll(&mut out, Wait::No)),
                14 => drop(s.poll(
                    &mut out,
                    Wait::AtLeastOne {
                        timeout_us: Some(rng.below(300)),
                    },
                )),
                _ => {
                    if rng.chance(0.03) {
                        disk.crash();
                        // Old handles stay around (dead); new ones see the durable image.
                        handles.push(disk.storage("journal"));
                        handles.push(disk.storage("ledgers"));
                    } else {
                        disk.advance(rng.below(200));
                    }
                }
            }
        }
        disk
    }

    /// (directory, name, durable contents, volatile contents) of every file.
    type Snapshot = Vec<(String, String, Option<Vec<u8>>, Option<Vec<u8>>)>;

    fn snapshot(disk: &SimDisk) -> Snapshot {
        let mut all = Vec::new();
        for dir in ["journal", "ledgers"] {
            let mut names = disk.durable_names(dir);
            names.extend(disk.volatile_names(dir));
            names.sort();
            names.dedup();
            for name in names {
                let d = disk.durable_file(dir, &name);
                let v = disk.volatile_file(dir, &name);
                all.push((dir.to_string(), name, d, v));
            }
        }
        all
    }

    /// The same seed and the same calls give the same disk, bit for bit; another seed does not.
    #[test]
    fn determinism_same_seed_same_images_and_stats() {
        for seed in [1, 2, 3, 42] {
            let a = chaos(seed, 3000);
            let b = chaos(seed, 3000);
            assert_eq!(a.stats(), b.stats());
            assert_eq!(a.now_us(), b.now_us());
            assert_eq!(snapshot(&a), snapshot(&b));
            assert!(
                a.stats().crashes > 0 && a.stats().ops > 0,
                "{:?}",
                a.stats()
            );
        }
        assert_ne!(chaos(1, 3000).stats(), chaos(2, 3000).stats());
    }

    /// No sequence of calls panics, with every fault class at a high rate.
    #[test]
    fn random_calls_never_panic() {
        for seed in 100..140 {
            let disk = chaos(seed, 2000);
            let stats = disk.stats();
            assert!(
                stats.write_eio + stats.read_eio + stats.sync_eio + stats.enospc > 0,
                "seed {seed}: {stats:?}"
            );
        }
    }

    /// A sync makes durable only the writes that completed before it was submitted, and only
    /// for its own file.
    #[test]
    fn sync_covers_only_writes_completed_before_submission() {
        for seed in 0..30 {
            let disk = SimDisk::new(SimConfig::new(seed));
            let mut s = disk.storage("journal");
            let f = s.open("f", true).unwrap();
            let g = s.open("g", true).unwrap();
            assert_eq!(write(&mut s, f, 0, block(1, 1)), Ok(ALIGN));
            // B is in flight (latency >= 10 us) when the sync is submitted at the same instant.
            s.submit(
                1,
                Op::Write {
                    file: f,
                    offset: ALIGN as u64,
                    buf: block(2, 1),
                },
            )
            .unwrap();
            s.submit(2, Op::SyncData { file: f }).unwrap();
            let done = drain(&mut s);
            assert!(done.iter().all(|c| c.result.is_ok()));
            assert_eq!(
                disk.durable_file("journal", "f"),
                None,
                "not sync_dir'd yet"
            );
            s.sync_dir().unwrap();
            assert_eq!(
                disk.durable_file("journal", "f").unwrap(),
                vec![1u8; ALIGN],
                "seed {seed}"
            );
            assert_eq!(disk.volatile_file("journal", "f").unwrap().len(), 2 * ALIGN);
            // A sync of another file does not help f.
            assert_eq!(write(&mut s, g, 0, block(3, 1)), Ok(ALIGN));
            assert_eq!(sync(&mut s, g), Ok(0));
            assert_eq!(disk.durable_file("journal", "f").unwrap().len(), ALIGN);
            assert_eq!(disk.durable_file("journal", "g").unwrap(), vec![3u8; ALIGN]);
            // Once B has completed, the next sync covers it.
            assert_eq!(sync(&mut s, f), Ok(0));
            let mut want = vec![1u8; ALIGN];
            want.extend([2u8; ALIGN]);
            assert_eq!(disk.durable_file("journal", "f").unwrap(), want);
        }
    }

    /// Truncation is a size change made durable by the next sync of the file.
    #[test]
    fn truncate_and_allocate_are_durable_with_the_next_sync() {
        let disk = SimDisk::new(SimConfig::new(5));
        let mut s = disk.storage("ledgers");
        let f = s.open("log", true).unwrap();
        s.sync_dir().unwrap();
        assert_eq!(write(&mut s, f, 0, block(9, 3)), Ok(3 * ALIGN));
        s.truncate(f, ALIGN as u64 + 10).unwrap();
        s.allocate(f, 0, 4 * ALIGN as u64).unwrap();
        assert_eq!(s.file_len(f), Ok(4 * ALIGN as u64));
        assert_eq!(disk.durable_file("ledgers", "log").unwrap().len(), 0);
        assert_eq!(sync(&mut s, f), Ok(0));
        let d = disk.durable_file("ledgers", "log").unwrap();
        assert_eq!(d.len(), 4 * ALIGN);
        assert!(d[..ALIGN + 10].iter().all(|&b| b == 9));
        assert!(d[ALIGN + 10..].iter().all(|&b| b == 0));
        assert_eq!(disk.volatile_file("ledgers", "log").unwrap(), d);
    }

    /// What a crash did to one unsynced overwrite of four blocks, judged at 512-byte sectors.
    #[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Clone, Copy)]
    enum Outcome {
        Lost,
        Applied,
        Torn,
        Garbage,
    }

    /// Unsynced writes are lost, applied, torn at sector granularity, or corrupted, at random;
    /// every outcome happens at both sector sizes, and a torn write never tears inside a
    /// sector.
    #[test]
    fn crash_loses_applies_tears_or_corrupts_unsynced_writes() {
        for sector_size in [512, ALIGN] {
            let mut seen = std::collections::BTreeSet::new();
            for seed in 0..200 {
                let disk = SimDisk::new(SimConfig::new(seed).with_sector_size(sector_size));
                let mut s = disk.storage("journal");
                let f = s.open("seg", true).unwrap();
                s.sync_dir().unwrap();
                assert_eq!(write(&mut s, f, 0, block(0xAA, 4)), Ok(4 * ALIGN));
                assert_eq!(sync(&mut s, f), Ok(0));
                assert_eq!(write(&mut s, f, 0, block(0xBB, 4)), Ok(4 * ALIGN));
                disk.crash();
                let after = disk.durable_file("journal", "seg").unwrap();
                assert_eq!(after.len(), 4 * ALIGN);
                let (mut old, mut new, mut other) = (0, 0, 0);
                for sector in after.chunks(sector_size) {
                    if sector.iter().all(|&b| b == 0xAA) {
                        old += 1;
                    } else if sector.iter().all(|&b| b == 0xBB) {
                        new += 1;
                    } else {
                        other += 1;
                    }
                }
                let outcome = match (old, new, other) {
                (_, _, 1) => Outcome::Garbage,
                (_, 0, 0) => Outcome::Lost,
                (0, _, 0) => Outcome::Applied,
                (_, _, 0) => Outcome::Torn,
                _ => panic!("seed {seed}, sector {sector_size}: {other} sectors are neither old, new nor one garbage"),
            };
                seen.insert(outcome);
                // After recovery, reads see exactly the durable image.
                let mut s = disk.storage("journal");
                let f = s.open("seg", false).unwrap();
                let (r, data) = read(&mut s, f, 0, 4 * ALIGN);
                assert_eq!(r, Ok(4 * ALIGN));
                assert_eq!(data, after);
            }
            let all = [
                Outcome::Lost,
                Outcome::Applied,
                Outcome::Torn,
                Outcome::Garbage,
            ];
            assert_eq!(seen, all.into_iter().collect(), "sector {sector_size}");
        }
    }

    /// An unsynced append leaves the durable size at the old or the new size; bytes never written
    /// read as zeros; synced bytes are untouched.
    #[test]
    fn crash_size_is_old_or_new_and_holes_are_zero() {
        let (mut old_size, mut new_size) = (false, false);
        for seed in 0..100 {
            let disk = SimDisk::new(SimConfig::new(seed));
            let mut s = disk.storage("j");
            let f = s.open("x", true).unwrap();
            s.sync_dir().unwrap();
            assert_eq!(write(&mut s, f, 0, block(1, 1)), Ok(ALIGN));
            assert_eq!(sync(&mut s, f), Ok(0));
            // Write at block 3, leaving a hole at 1..3.
            assert_eq!(write(&mut s, f, 3 * ALIGN as u64, block(2, 1)), Ok(ALIGN));
            disk.crash();
            let d = disk.durable_file("j", "x").unwrap();
            assert_eq!(&d[..ALIGN], &[1u8; ALIGN][..]);
            match d.len() {
                n if n == ALIGN => old_size = true,
                n if n == 4 * ALIGN => {
                    new_size = true;
                    assert!(d[ALIGN..3 * ALIGN].iter().all(|&b| b == 0));
                }
                n => panic!("seed {seed}: size {n}"),
            }
        }
        assert!(old_size && new_size);
    }

    /// Unsynced creates, renames and removes may vanish (a prefix of them survives); synced ones
    /// never do.
    #[test]
    fn unsynced_namespace_ops_may_vanish_synced_never() {
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..100 {
            let disk = SimDisk::new(SimConfig::new(seed));
            let mut s = disk.storage("journal");
            s.open("a", true).unwrap();
            s.open("keep", true).unwrap();
            s.sync_dir().unwrap();
            s.open("b", true).unwrap();
            s.rename("a", "c").unwrap();
            s.remove("keep").unwrap();
            assert_eq!(disk.volatile_names("journal"), ["b", "c"]);
            disk.crash();
            let names = disk.durable_names("journal");
            let prefixes: [&[&str]; 4] = [
                &["a", "keep"],
                &["a", "b", "keep"],
                &["b", "c", "keep"],
                &["b", "c"],
            ];
            assert!(
                prefixes.iter().any(|p| names == *p),
                "seed {seed}: {names:?}"
            );
            let mut s = disk.storage("journal");
            let mut listed = s.list().unwrap();
            listed.sort();
            assert_eq!(listed, names);
            seen.insert(names);
        }
        assert_eq!(seen.len(), 4, "every prefix occurs: {seen:?}");
    }

    /// A file whose data was synced but whose creation was not can vanish entirely.
    #[test]
    fn synced_data_of_an_unsynced_create_can_vanish() {
        let mut vanished = false;
        for seed in 0..50 {
            let disk = SimDisk::new(SimConfig::new(seed));
            let mut s = disk.storage("journal");
            let f = s.open("seg", true).unwrap();
            assert_eq!(write(&mut s, f, 0, block(1, 1)), Ok(ALIGN));
            assert_eq!(sync(&mut s, f), Ok(0));
            disk.crash();
            match disk.durable_file("journal", "seg") {
                None => vanished = true,
                Some(d) => assert_eq!(d, vec![1u8; ALIGN]),
            }
        }
        assert!(vanished);
    }

    /// Without fsyncgate, a failed sync leaves the writes pending and a retry makes them durable.
    #[test]
    fn failed_sync_can_be_retried_without_fsyncgate() {
        let disk = SimDisk::new(SimConfig::new(3));
        let mut s = disk.storage("journal");
        let f = s.open("seg", true).unwrap();
        s.sync_dir().unwrap();
        assert_eq!(write(&mut s, f, 0, block(7, 1)), Ok(ALIGN));
        disk.set_faults(FaultConfig::none().with_sync_eio(1.0));
        assert_eq!(sync(&mut s, f), Err(IoError::EIO));
        assert_eq!(s.sync_dir(), Err(IoError::EIO));
        disk.set_faults(FaultConfig::none());
        assert_eq!(sync(&mut s, f), Ok(0));
        assert_eq!(
            disk.durable_file("journal", "seg").unwrap(),
            vec![7u8; ALIGN]
        );
    }

    /// fsyncgate: after a failed sync the covered writes are never durable, later syncs succeed
    /// anyway, reads still see the data, and new writes become durable normally.
    #[test]
    fn fsyncgate_drops_writes_and_later_syncs_lie() {
        for seed in 0..30 {
            let disk = SimDisk::new(SimConfig::new(seed));
            let mut s = disk.storage("journal");
            let f = s.open("seg", true).unwrap();
            s.sync_dir().unwrap();
            assert_eq!(write(&mut s, f, 0, block(1, 1)), Ok(ALIGN));
            disk.set_faults(FaultConfig::none().with_sync_eio(1.0).with_fsyncgate(true));
            assert_eq!(sync(&mut s, f), Err(IoError::EIO));
            disk.set_faults(FaultConfig::none().with_fsyncgate(true));
            // The page cache still has it.
            assert_eq!(read(&mut s, f, 0, ALIGN).1, vec![1u8; ALIGN]);
            // The next sync "succeeds" but the dropped write is not durable: the size is, the
            // bytes read as zeros.
            assert_eq!(sync(&mut s, f), Ok(0));
            assert_eq!(
                disk.durable_file("journal", "seg").unwrap(),
                vec![0u8; ALIGN]
            );
            // New writes after the failure become durable normally.
            assert_eq!(write(&mut s, f, ALIGN as u64, block(2, 1)), Ok(ALIGN));
            assert_eq!(sync(&mut s, f), Ok(0));
            let d = disk.durable_file("journal", "seg").unwrap();
            assert_eq!(&d[..ALIGN], &[0u8; ALIGN][..]);
            assert_eq!(&d[ALIGN..], &[2u8; ALIGN][..]);
            // And a crash never resurrects the dropped write.
            disk.crash();
            assert_eq!(
                disk.durable_file("journal", "seg").unwrap(),
                d,
                "seed {seed}"
            );
            assert_eq!(disk.stats().fsyncgate_dropped, 1);
        }
    }

    /// Misaligned offsets and lengths fail at submit with EINVAL and the buffer handed back, like
    /// O_DIRECT; a bad FileId fails with EBADF.
    #[test]
    fn misaligned_and_bad_requests_are_rejected() {
        let disk = SimDisk::new(SimConfig::new(1));
        let mut s = disk.storage("journal");
        let f = s.open("seg", true).unwrap();
        let (err, buf) = s
            .submit(
                1,
                Op::Write {
                    file: f,
                    offset: 512,
                    buf: block(1, 1),
                },
            )
            .unwrap_err();
        assert_eq!((err, buf.map(|b| b.len())), (IoError::EINVAL, Some(ALIGN)));
        let mut short = block(1, 1);
        short.set_len(100);
        let (err, buf) = s
            .submit(
                2,
                Op::Write {
                    file: f,
                    offset: 0,
                    buf: short,
                },
            )
            .unwrap_err();
        assert_eq!((err, buf.map(|b| b.len())), (IoError::EINVAL, Some(100)));
        let (err, buf) = s
            .submit(
                3,
                Op::Read {
                    file: f,
                    offset: 4095,
                    buf: block(0, 1),
                },
            )
            .unwrap_err();
        assert_eq!((err, buf.is_some()), (IoError::EINVAL, true));
        let (err, buf) = s
            .submit(
                4,
                Op::Write {
                    file: 77,
                    offset: 0,
                    buf: block(1, 1),
                },
            )
            .unwrap_err();
        assert_eq!((err, buf.is_some()), (IoError::EBADF, true));
        assert_eq!(
            s.submit(5, Op::SyncData { file: 77 }).unwrap_err().0,
            IoError::EBADF
        );
        assert_eq!(s.in_flight(), 0);
        assert_eq!(disk.stats().rejected, 5);
        assert_eq!(disk.volatile_file("journal", "seg").unwrap().len(), 0);
        // Namespace errors.
        assert_eq!(s.file_len(77), Err(IoError::EBADF));
        assert_eq!(s.truncate(77, 0), Err(IoError::EBADF));
        assert_eq!(s.allocate(77, 0, 1), Err(IoError::EBADF));
        assert_eq!(s.open("nope", false), Err(IoError::ENOENT));
        assert_eq!(s.open("a/b", true), Err(IoError::EINVAL));
        assert_eq!(s.rename("nope", "x"), Err(IoError::ENOENT));
        assert_eq!(s.remove("nope"), Err(IoError::ENOENT));
        s.close(77);
        s.close(f);
        assert_eq!(s.file_len(f), Err(IoError::EBADF));
    }

    /// Short writes and reads return a non-zero multiple of ALIGN below the length; a short write
    /// applies only its first n bytes; a bit flip changes exactly one bit of what was read.
    #[test]
    fn short_io_and_bitflips_are_bounded() {
        for seed in 0..30 {
            let disk = SimDisk::new(SimConfig::new(seed));
            let mut s = disk.storage("journal");
            let f = s.open("seg", true).unwrap();
            disk.set_faults(FaultConfig::none().with_short_write(1.0));
            let mut data = AlignedBuf::zeroed(8 * ALIGN);
            SimRng::new(seed).fill(&mut data);
            let want = data.to_vec();
            let n = write(&mut s, f, 0, data).unwrap();
            assert!(
                n > 0 && n < 8 * ALIGN && align_down(n) == n,
                "short write {n}"
            );
            assert_eq!(disk.volatile_file("journal", "seg").unwrap(), &want[..n]);
            // A one-block write cannot be short.
            assert_eq!(write(&mut s, f, n as u64, block(5, 1)), Ok(ALIGN));
            disk.set_faults(FaultConfig::none());
            let rest = AlignedBuf::zeroed(8 * ALIGN);
            let mut rest_data = rest;
            rest_data.copy_from_slice(&want);
            assert_eq!(write(&mut s, f, 0, rest_data), Ok(8 * ALIGN));

            disk.set_faults(FaultConfig::none().with_short_read(1.0));
            let (r, got) = read(&mut s, f, 0, 8 * ALIGN);
            let n = r.unwrap();
            assert!(
                n > 0 && n < 8 * ALIGN && align_down(n) == n,
                "short read {n}"
            );
            assert_eq!(got, &want[..n]);

            disk.set_faults(FaultConfig::none().with_read_bitflip(1.0));
            let (r, got) = read(&mut s, f, 0, 8 * ALIGN);
            assert_eq!(r, Ok(8 * ALIGN));
            let flipped: u32 = got
                .iter()
                .zip(&want)
                .map(|(a, b)| (a ^ b).count_ones())
                .sum();
            assert_eq!(flipped, 1);
            assert_eq!(
                disk.volatile_file("journal", "seg").unwrap(),
                want,
                "disk unchanged"
            );
        }
    }

    /// EIO and ENOSPC on writes write nothing; EIO on reads; ENOSPC on allocate.
    #[test]
    fn eio_and_enospc_faults() {
        let disk = SimDisk::new(SimConfig::new(9));
        let mut s = disk.storage("journal");
        let f = s.open("seg", true).unwrap();
        disk.set_faults(FaultConfig::none().with_write_eio(1.0));
        assert_eq!(write(&mut s, f, 0, block(1, 1)), Err(IoError::EIO));
        disk.set_faults(FaultConfig::none().with_enospc(1.0));
        assert_eq!(write(&mut s, f, 0, block(1, 1)), Err(IoError::ENOSPC));
        assert_eq!(s.allocate(f, 0, ALIGN as u64), Err(IoError::ENOSPC));
        assert_eq!(s.file_len(f), Ok(0));
        disk.set_faults(FaultConfig::none().with_read_eio(1.0));
        assert_eq!(read(&mut s, f, 0, ALIGN).0, Err(IoError::EIO));
        disk.set_faults(FaultConfig::none());
        assert_eq!(read(&mut s, f, 0, ALIGN).0, Ok(0), "end of file");
        let st = disk.stats();
        assert_eq!((st.write_eio, st.enospc, st.read_eio), (1, 2, 1));
    }

    /// After a crash, old handles fail every call with EIO (none panics), their in-flight ops never
    /// complete, and new handles see the durable image.
    #[test]
    fn dead_handles_after_crash_error_instead_of_panicking() {
        let disk = SimDisk::new(SimConfig::new(11));
        let mut s = disk.storage("journal");
        let f = s.open("seg", true).unwrap();
        s.sync_dir().unwrap();
        s.submit(
            1,
            Op::Write {
                file: f,
                offset: 0,
                buf: block(1, 1),
            },
        )
        .unwrap();
        s.submit(2, Op::SyncData { file: f }).unwrap();
        assert_eq!(s.in_flight(), 2);
        disk.crash();
        assert_eq!(s.in_flight(), 0);
        let mut out = Vec::new();
        assert_eq!(
            s.poll(&mut out, Wait::AtLeastOne { timeout_us: None }),
            Err(IoError::EIO)
        );
        assert!(out.is_empty());
        assert_eq!(s.list(), Err(IoError::EIO));
        assert_eq!(s.open("seg", false), Err(IoError::EIO));
        assert_eq!(s.file_len(f), Err(IoError::EIO));
        assert_eq!(s.allocate(f, 0, 1), Err(IoError::EIO));
        assert_eq!(s.truncate(f, 0), Err(IoError::EIO));
        assert_eq!(s.rename("seg", "x"), Err(IoError::EIO));
        assert_eq!(s.remove("seg"), Err(IoError::EIO));
        assert_eq!(s.sync_dir(), Err(IoError::EIO));
        let (err, buf) = s
            .submit(
                3,
                Op::Write {
                    file: f,
                    offset: 0,
                    buf: block(1, 1),
                },
            )
            .unwrap_err();
        assert_eq!((err, buf.is_some()), (IoError::EIO, true));
        s.close(f);
        let mut s2 = disk.storage("journal");
        let f2 = s2.open("seg", false).unwrap();
        let len = s2.file_len(f2).unwrap();
        assert_eq!(
            disk.durable_file("journal", "seg").unwrap().len() as u64,
            len
        );
        assert_eq!(
            s2.poll(&mut out, Wait::AtLeastOne { timeout_us: None }),
            Ok(())
        );
        assert!(out.is_empty());
    }

    /// Completions arrive in ready-time order, not submission order; Wait::No does not move the
    /// clock; a timeout moves it by no more than the timeout.
    #[test]
    fn completions_are_reordered_and_time_is_virtual() {
        let mut reordered = false;
        for seed in 0..10 {
            let disk = SimDisk::new(SimConfig::new(seed).with_latency_us(100, 1000));
            let mut s = disk.storage("journal");
            let f = s.open("seg", true).unwrap();
            for i in 0..16u64 {
                s.submit(
                    i,
                    Op::Write {
                        file: f,
                        offset: i * ALIGN as u64,
                        buf: block(i as u8, 1),
                    },
                )
                .unwrap();
            }
            let mut out = Vec::new();
            s.poll(&mut out, Wait::No).unwrap();
            assert!(out.is_empty());
            assert_eq!(disk.now_us(), 0);
            s.poll(
                &mut out,
                Wait::AtLeastOne {
                    timeout_us: Some(50),
                },
            )
            .unwrap();
            assert!(out.is_empty());
            assert_eq!(disk.now_us(), 50);
            s.poll(&mut out, Wait::AtLeastOne { timeout_us: None })
                .unwrap();
            assert!(!out.is_empty());
            assert!((100..=1000).contains(&disk.now_us()));
            out.extend(drain(&mut s));
            let tokens: Vec<u64> = out.iter().map(|c| c.token).collect();
            assert_eq!(tokens.len(), 16);
            reordered |= tokens.windows(2).any(|w| w[0] > w[1]);
            // Each write took effect at its completion.
            let v = disk.volatile_file("journal", "seg").unwrap();
            for (i, b) in v.chunks(ALIGN).enumerate() {
                assert!(b.iter().all(|&x| x == i as u8));
            }
            // Nothing in flight: return at once, time stands still.
            let now = disk.now_us();
            s.poll(&mut out, Wait::AtLeastOne { timeout_us: None })
                .unwrap();
            assert_eq!(disk.now_us(), now);
        }
        assert!(reordered);
    }

    /// Two handles on one directory share its namespace, and each polls only its own completions.
    #[test]
    fn handles_share_the_namespace_but_not_completions() {
        let disk = SimDisk::new(SimConfig::new(4));
        let mut a = disk.storage("journal");
        let mut b = disk.storage("journal");
        let mut other = disk.storage("ledgers");
        let fa = a.open("seg", true).unwrap();
        let fb = b.open("seg", false).unwrap();
        assert_eq!(other.open("seg", false), Err(IoError::ENOENT));
        a.submit(
            1,
            Op::Write {
                file: fa,
                offset: 0,
                buf: block(4, 1),
            },
        )
        .unwrap();
        assert_eq!(b.in_flight(), 0);
        let mut out = Vec::new();
        b.poll(&mut out, Wait::AtLeastOne { timeout_us: None })
            .unwrap();
        assert!(out.is_empty());
        drain(&mut a);
        assert_eq!(b.file_len(fb), Ok(ALIGN as u64));
    }

    /// An older sync completing after a newer one does not undo what the newer one made
    /// durable (size included).
    #[test]
    fn older_sync_completing_late_changes_nothing() {
        let mut late = 0;
        for seed in 0..100 {
            let disk = SimDisk::new(SimConfig::new(seed).with_latency_us(10, 1000));
            let mut s = disk.storage("j");
            let f = s.open("x", true).unwrap();
            s.sync_dir().unwrap();
            assert_eq!(write(&mut s, f, 0, block(1, 1)), Ok(ALIGN));
            s.submit(1, Op::SyncData { file: f }).unwrap();
            let b = Op::Write {
                file: f,
                offset: ALIGN as u64,
                buf: block(2, 1),
            };
            s.submit(2, b).unwrap();
            let mut out = Vec::new();
            while !out.iter().any(|c: &Completion| c.token == 2) {
                s.poll(&mut out, Wait::AtLeastOne { timeout_us: None })
                    .unwrap();
            }
            if out.iter().any(|c| c.token == 1) {
                continue; // sync 1 already done; not the interesting case
            }
            s.submit(3, Op::SyncData { file: f }).unwrap();
            out.extend(drain(&mut s));
            let order: Vec<u64> = out.iter().map(|c| c.token).collect();
            if order.iter().position(|&t| t == 3) < order.iter().position(|&t| t == 1) {
                late += 1;
            }
            let mut want = vec![1u8; ALIGN];
            want.extend([2u8; ALIGN]);
            assert_eq!(disk.durable_file("j", "x").unwrap(), want, "seed {seed}");
        }
        assert!(late > 0);
    }

    /// A write still in flight at a crash may or may not reach the disk; its completion never
    /// arrives.
    #[test]
    fn in_flight_writes_may_land_at_a_crash() {
        let (mut landed, mut lost) = (false, false);
        for seed in 0..60 {
            let disk = SimDisk::new(SimConfig::new(seed));
            let mut s = disk.storage("j");
            let f = s.open("x", true).unwrap();
            s.allocate(f, 0, ALIGN as u64).unwrap();
            assert_eq!(sync(&mut s, f), Ok(0));
            s.sync_dir().unwrap();
            s.submit(
                1,
                Op::Write {
                    file: f,
                    offset: 0,
                    buf: block(5, 1),
                },
            )
            .unwrap();
            disk.crash();
            match disk.durable_file("j", "x").unwrap() {
                d if d == vec![5u8; ALIGN] => landed = true,
                d if d == vec![0u8; ALIGN] => lost = true,
                _ => {} // torn or garbage
            }
            let mut s = disk.storage("j");
            let mut out = Vec::new();
            s.poll(&mut out, Wait::AtLeastOne { timeout_us: None })
                .unwrap();
            assert!(out.is_empty());
        }
        assert!(landed && lost);
    }
}
