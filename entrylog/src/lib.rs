//! Ledger storage (issue #4): entry logs, the index and per-ledger state. Only the shared ids live
//! here so far.
