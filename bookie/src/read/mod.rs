//! The cold read path: reads that miss the write cache. A read's walk, one room each:
//! 1. `conn` parses the request and `shard` routes it to the ledger's shard, whose ledger
//!    table (`store::ledger_read`) answers from the write cache or says which disk read
//!    (`store::ledger::DiskRead`) will.
//! 2. `shard::cold_read` hands that read to this shard's read-ahead policy ([`ahead`]), the
//!    one owner of the read-ahead cache ([`cache`]) and of the runs in flight ([`run_waits`]):
//!    a hit is answered there, a read a run will bring parks, anything else goes to a reader
//!    thread as a single or a run read.
//! 3. A reader thread ([`read_thread`]) reads it with `entrylog::Reader` (index, then entry
//!    log), taking turns in the journal-first share of the disk ([`disk_share`]), and replies
//!    to the connection's shard; what a run brought beyond the asked entry goes back to the
//!    ledger's shard as a `RunLanded`, which step 2 caches and answers parked reads from.

pub mod ahead;
pub mod cache;
pub mod disk_reader;
pub mod disk_share;
pub mod read_thread;
pub mod run_waits;
