//! The cold read path: reads that miss the write cache, the read-ahead runs that wait for
//! a device read already on its way, the reader threads that do the reads, and the
//! journal-first share of the disk they take turns in.

pub mod disk_share;
pub mod read_thread;
pub mod run_waits;
