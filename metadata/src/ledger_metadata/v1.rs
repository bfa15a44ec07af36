//! Version 1 of the ledger metadata format (BookKeeper 4.0-4.1): text lines.

use super::{bad, LedgerMetadata, LedgerState, V1_IN_RECOVERY};
use crate::error::Result;

pub(super) fn parse(body: &[u8]) -> Result<LedgerMetadata> {
    let text = std::str::from_utf8(body).map_err(|_| bad("version 1 is not UTF-8"))?;
    let mut lines = text.lines();
    let mut num = |what: &str| -> Result<i64> {
        lines
            .next()
            .and_then(|l| l.parse::<i64>().ok())
            .ok_or_else(|| bad(format!("version 1: bad or missing {what}")))
    };
    let quorum = i32::try_from(num("quorum size")?).map_err(|_| bad("quorum size"))?;
    let ensemble = i32::try_from(num("ensemble size")?).map_err(|_| bad("ensemble size"))?;
    let length = num("length")?;
    let mut md = LedgerMetadata {
        format_version: 1,
        ensemble_size: ensemble,
        write_quorum_size: quorum,
        ack_quorum_size: quorum,
        state: LedgerState::Open,
        last_entry_id: None,
        length: 0,
        ensembles: Vec::new(),
        digest_type: None,
        password: None,
        ctime: None,
        custom_metadata: Vec::new(),
        ctoken: None,
    };
    for line in lines {
        let mut parts = line.split('\t');
        let first: i64 = parts
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| bad(format!("version 1: bad line {line:?}")))?;
        let rest: Vec<&str> = parts.collect();
        if rest.first() == Some(&"CLOSED") {
            if first == V1_IN_RECOVERY {
                md.state = LedgerState::InRecovery;
            } else {
                md.state = LedgerState::Closed;
                md.last_entry_id = Some(first);
                md.length = length;
            }
            break;
        }
        if rest.is_empty() {
            return Err(bad(format!(
                "version 1: ensemble line {line:?} lists no bookie"
            )));
        }
        md.ensembles
            .push((first, rest.into_iter().map(String::from).collect()));
    }
    Ok(md)
}

/// Version 1's text: quorum, ensemble size and length lines, one line per ensemble, and for a
/// closed (or in-recovery) ledger a last line without a newline.
pub(super) fn encode(md: &LedgerMetadata) -> String {
    let closed = md.state == LedgerState::Closed;
    let mut out = format!(
        "{}\n{}\n{}\n",
        md.write_quorum_size,
        md.ensemble_size,
        if closed { md.length } else { 0 }
    );
    for (first, members) in &md.ensembles {
        out.push_str(&first.to_string());
        for m in members {
            out.push('\t');
            out.push_str(m);
        }
        out.push('\n');
    }
    match md.state {
        LedgerState::Closed => out.push_str(&format!("{}\tCLOSED", md.last_entry_id.unwrap_or(-1))),
        LedgerState::InRecovery => out.push_str(&format!("{V1_IN_RECOVERY}\tCLOSED")),
        LedgerState::Open => {}
    }
    out
}
