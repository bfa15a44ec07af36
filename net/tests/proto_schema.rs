//! The `.proto` file and the hand-written codec must describe the same messages.
//!
//! Method: a small line parser reads `net/proto/bookkeeper.proto` (message blocks,
//! nested enum blocks, `label type name = number;` fields, `NAME = value;` enum
//! values) and compares it with `net::v3::SCHEMA` (every field number the codec
//! uses) and with the Rust enums' wire values.

use std::collections::{BTreeMap, BTreeSet};

use net::{OperationType, ProtocolVersion, StatusCode};

struct Proto {
    /// (message, field) -> number
    fields: BTreeMap<(String, String), u32>,
    /// enum path ("StatusCode", "ReadRequest.Flag") -> name -> value
    enums: BTreeMap<String, BTreeMap<String, i64>>,
}

fn parse_proto() -> Proto {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/proto/bookkeeper.proto"
    ))
    .unwrap();
    let mut stack: Vec<(bool, String)> = Vec::new(); // (is_enum, name)
    let mut proto = Proto {
        fields: BTreeMap::new(),
        enums: BTreeMap::new(),
    };
    for raw in text.lines() {
        let line = raw.split("//").next().unwrap().trim();
        if line.is_empty() {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        match words[0] {
            "message" | "enum" => {
                stack.push((
                    words[0] == "enum",
                    words[1].trim_end_matches('{').to_string(),
                ));
                if line.ends_with('}') {
                    stack.pop();
                }
                continue;
            }
            "}" => {
                stack.pop();
                continue;
            }
            _ => {}
        }
        let Some((is_enum, _)) = stack.last() else {
            continue;
        };
        let path = stack
            .iter()
            .map(|(_, name)| name.as_str())
            .collect::<Vec<_>>()
            .join(".");
        let (left, right) = line.split_once('=').expect("a field or enum value");
        let value = right.trim().split([';', ' ']).next().unwrap();
        if *is_enum {
            let value = if let Some(hex) = value.strip_prefix("0x") {
                i64::from_str_radix(hex, 16).unwrap()
            } else {
                value.parse().unwrap()
            };
            proto
                .enums
                .entry(path)
                .or_default()
                .insert(left.trim().to_string(), value);
        } else {
            let parts: Vec<&str> = left.split_whitespace().collect();
            assert_eq!(parts.len(), 3, "label type name: {line}");
            assert!(
                ["required", "optional", "repeated"].contains(&parts[0]),
                "{line}"
            );
            proto
                .fields
                .insert((path, parts[2].to_string()), value.parse().unwrap());
        }
    }
    assert!(stack.is_empty(), "unbalanced braces");
    proto
}

/// Goal: every field the codec reads or writes is in the .proto with the same
/// number, and every field in the .proto is handled by the codec.
#[test]
fn codec_fields_match_the_proto() {
    let proto = parse_proto();
    let codec: BTreeMap<(String, String), u32> = net::v3::SCHEMA
        .iter()
        .map(|(message, field, number)| ((message.to_string(), field.to_string()), *number))
        .collect();
    assert_eq!(codec.len(), net::v3::SCHEMA.len(), "duplicate SCHEMA rows");
    // Nested enum `flag` fields are handled in the codec under the message name.
    assert_eq!(proto.fields, codec);
}

/// Goal: the Rust enums carry the .proto's values.
#[test]
fn enums_match_the_proto() {
    let proto = parse_proto();
    let statuses: BTreeMap<String, i64> = StatusCode::ALL
        .iter()
        .map(|s| (format!("{s:?}"), i64::from(s.v3_code())))
        .collect();
    assert_eq!(proto.enums["StatusCode"], statuses);
    let operations: BTreeSet<i64> = OperationType::ALL
        .iter()
        .map(|op| i64::from(op.code()))
        .collect();
    let proto_operations: BTreeSet<i64> = proto.enums["OperationType"].values().copied().collect();
    assert_eq!(proto_operations, operations);
    let versions: BTreeSet<i64> = [
        ProtocolVersion::One,
        ProtocolVersion::Two,
        ProtocolVersion::Three,
    ]
    .iter()
    .map(|v| i64::from(v.code()))
    .collect();
    assert_eq!(
        proto.enums["ProtocolVersion"]
            .values()
            .copied()
            .collect::<BTreeSet<_>>(),
        versions
    );
    assert_eq!(
        proto.enums["ReadRequest.Flag"]["FENCE_LEDGER"],
        i64::from(net::ReadFlag::FenceLedger.code())
    );
    assert_eq!(
        proto.enums["ReadRequest.Flag"]["ENTRY_PIGGYBACK"],
        i64::from(net::ReadFlag::EntryPiggyback.code())
    );
    assert_eq!(proto.enums["AddRequest.Flag"]["RECOVERY_ADD"], 1);
    assert_eq!(
        proto.enums["GetBookieInfoRequest.Flags"]["TOTAL_DISK_CAPACITY"],
        net::operation::BOOKIE_INFO_TOTAL_DISK_CAPACITY
    );
    assert_eq!(
        proto.enums["GetBookieInfoRequest.Flags"]["FREE_DISK_SPACE"],
        net::operation::BOOKIE_INFO_FREE_DISK_SPACE
    );
}
