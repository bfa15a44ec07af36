//! The bookie's side of journal recovery: the operator's switch between refusing to start on
//! journal corruption and cutting the journal there (`journalRecoveryMode`, `bookie serve
//! --journal-recovery-mode`), and messages that name the ledgers a cut would lose.
//!
//! The journal knows no ledgers: when recovery finds corruption it hands every valid record
//! after the corrupt position to [`LostRecords::record`] (`Journal::open_observing`), and the
//! refusal (Strict) or the log line (tolerant) lists the ledgers and entries those records
//! hold, so the operator knows what is at stake before choosing.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use journal::{JournalError, RecoveryMode, RecoveryReport};

use crate::store::record::JournalRecord;

/// The conf key of the switch.
pub const CONF_KEY: &str = "journalRecoveryMode";
/// The `bookie serve` flag of the switch.
pub const FLAG: &str = "--journal-recovery-mode";

/// Ledgers listed by name in a message; the rest are counted.
const LEDGERS_LISTED: usize = 20;

/// Parses the switch's value: `strict` (the default: refuse to start on corruption) or
/// `tolerate` (cut the journal at the corruption and start).
pub fn parse_mode(value: &str) -> Result<RecoveryMode, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "strict" => Ok(RecoveryMode::Strict),
        "tolerate" | "tolerant" | "toleratecorruption" => Ok(RecoveryMode::TolerateCorruption),
        _ => Err(format!("expected strict or tolerate, not {value:?}")),
    }
}

/// What the journal records after a corrupt position hold, per ledger.
#[derive(Debug, Default)]
pub struct LostRecords {
    /// Ledger → (records, lowest and highest entry id of its adds).
    ledgers: BTreeMap<i64, (u64, Option<(i64, i64)>)>,
    /// Records this version cannot decode.
    unreadable: u64,
}

impl LostRecords {
    /// Notes one valid record that lies after the corrupt position.
    pub fn record(&mut self, payload: &[u8]) {
        let Some(record) = JournalRecord::decode(payload) else {
            self.unreadable += 1;
            return;
        };
        let (ledger, entry) = match record {
            JournalRecord::Add { ledger, entry, .. } => (ledger, Some(entry)),
            JournalRecord::MasterKey { ledger, .. }
            | JournalRecord::Fence { ledger }
            | JournalRecord::ExplicitLac { ledger, .. } => (ledger, None),
        };
        let slot = self.ledgers.entry(ledger).or_default();
        slot.0 += 1;
        if let Some(e) = entry {
            slot.1 = Some(slot.1.map_or((e, e), |(lo, hi)| (lo.min(e), hi.max(e))));
        }
    }

    /// `ledgers affected: 7 (entries 1500..=2999, 1500 records), ...`.
    pub fn ledgers_line(&self) -> String {
        if self.ledgers.is_empty() && self.unreadable == 0 {
            return "no ledger's records follow it".into();
        }
        let mut line = format!("ledgers affected ({}):", self.ledgers.len());
        for (ledger, (records, entries)) in self.ledgers.iter().take(LEDGERS_LISTED) {
            let _ = match entries {
                Some((lo, hi)) => {
                    write!(line, " {ledger} (entries {lo}..={hi}, {records} records)")
                }
                None => write!(line, " {ledger} ({records} records)"),
            };
            line.push(',');
        }
        line.pop();
        if self.ledgers.len() > LEDGERS_LISTED {
            let _ = write!(line, " and {} more", self.ledgers.len() - LEDGERS_LISTED);
        }
        if self.unreadable > 0 {
            let _ = write!(line, "; {} records of an unknown type", self.unreadable);
        }
        line
    }

    /// The message a refused journal open leaves: the journal's error and, for corruption,
    /// the ledgers affected and the exact switch that starts the bookie anyway.
    pub fn refusal(&self, journal_dir: &Path, error: &JournalError) -> String {
        let dir = journal_dir.display();
        match error {
            JournalError::Corruption { .. } => format!(
                "journal {dir}: {error}; {}. Acknowledged entries may be among them: copy the \
                 journal directory and check the other bookies of these ledgers' ensembles \
                 first. To start anyway, cutting the journal there and losing these records, \
                 set {CONF_KEY}=tolerate in bk_server.conf or pass {FLAG} tolerate to \
                 `bookie serve`, then remove it again",
                self.ledgers_line()
            ),
            other => format!("journal {dir}: {other}"),
        }
    }

    /// Logs what a tolerant recovery cut off, if it cut anything.
    pub fn log_cut(&self, shard: usize, report: &RecoveryReport) {
        if let Some((file, offset)) = &report.tolerated_corruption {
            log::error!(
                "shard {shard}: {CONF_KEY}=tolerate: the journal was cut at corruption in \
                 {file} at offset {offset}; {}; {}",
                report.beyond_cut,
                self.ledgers_line()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn payload(record: &JournalRecord) -> Vec<u8> {
        let mut header = [0u8; crate::store::record::HEADER_MAX];
        let (n, rest) = record.encode(&mut header);
        let mut p = header[..n].to_vec();
        p.extend_from_slice(rest);
        p
    }

    /// Both spellings of the switch parse; anything else is refused with the accepted values.
    #[test]
    fn switch_values() {
        assert_eq!(parse_mode("strict"), Ok(RecoveryMode::Strict));
        assert_eq!(
            parse_mode(" Tolerate "),
            Ok(RecoveryMode::TolerateCorruption)
        );
        assert!(parse_mode("maybe")
            .unwrap_err()
            .contains("strict or tolerate"));
    }

    /// The refusal names the journal's error, each ledger with its entry range, and the exact
    /// conf key and flag that choose the tolerant mode.
    #[test]
    fn refusal_names_ledgers_and_the_switch() {
        let mut lost = LostRecords::default();
        for entry in 10..13 {
            lost.record(&payload(&JournalRecord::Add {
                ledger: 7,
                entry,
                body: Bytes::from_static(b"x"),
            }));
        }
        lost.record(&payload(&JournalRecord::Fence { ledger: 9 }));
        lost.record(&[0xee; 3]);
        let error = JournalError::Corruption {
            file: "0000000000000003.jrnl".into(),
            offset: 8192,
            kind: journal::CorruptionKind::BadRecordBeforeValidData,
            lost: journal::BeyondCut::default(),
        };
        let text = lost.refusal(Path::new("/j/shard-0"), &error);
        for part in [
            "/j/shard-0",
            "0000000000000003.jrnl at offset 8192",
            "7 (entries 10..=12, 3 records)",
            "9 (1 records)",
            "1 records of an unknown type",
            "journalRecoveryMode=tolerate",
            "--journal-recovery-mode tolerate",
        ] {
            assert!(text.contains(part), "{part:?} missing from: {text}");
        }
    }
}
