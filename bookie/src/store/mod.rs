//! A shard's ledgers and what lies under them: the ledger table and its storage semantics,
//! the journal records, the entry-log threads and their directories, and the start-up checks
//! of the directories (lock, audit, journal recovery and space).

pub mod dir_audit;
pub mod format;
pub mod inspect;
pub mod inspect_java;
pub mod journal_recovery;
pub mod journal_space;
pub mod ledger;
pub mod ledger_dirs;
pub mod ledger_read;
pub mod ledger_storage;
pub mod lock;
pub mod paced;
pub mod record;
pub mod storage_wrap;
pub mod takeover;
pub mod takeover_retire;
