//! Protobuf as the cluster's records use it: the binary wire format (ledger metadata v3,
//! the auditor's check times) and the text format (ledger metadata v2, the under-replication
//! manager's records), each read leniently and written as Java writes it.

pub mod binary;
pub mod text;
