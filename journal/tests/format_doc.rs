//! The prose spec `docs/format/journal.md` checked against `journal::format`, so the two cannot
//! drift apart (redb's `design.md` and its header comment did).
//!
//! The test parses the doc's tables (constants, segment header block, record header, record
//! kinds) and checks them in both directions: the code's encoders put every field at the
//! documented offset with the documented value, and bytes built from the doc alone (offsets,
//! sizes and the documented CRC rule, no encoder) decode with the code's decoders. Changing a
//! constant, an offset, a kind value or the checksum rule on one side only fails it.

use journal::format::{
    decode_record, encode_padding, encode_record, free_file_name, padded_end, record_bytes,
    segment_file_name, Lsn, RecordFault, RecordKind, SegmentHeader, SegmentId, MAX_PADDING_PAYLOAD,
    RECORD_ALIGN, RECORD_HEADER_BYTES, RECORD_VERSION, SEGMENT_HEADER_BYTES, SEGMENT_MAGIC,
    SEGMENT_VERSION,
};

const DOC: &str = "../docs/format/journal.md";

/// Distinctive values, so a field read from the wrong offset cannot match by accident.
const ID: u64 = 0x0102_0304_0506_0708;
const GENERATION: u64 = 0x1112_1314_1516_1718;
const LSN: u64 = 0x2122_2324_2526_2728;

fn doc() -> String {
    let path = format!("{}/{DOC}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

/// The rows of the first table after the line `heading`, whose header row must be `columns`.
/// Cells are trimmed and stripped of backticks.
fn table(doc: &str, heading: &str, columns: &[&str]) -> Vec<Vec<String>> {
    let mut lines = doc.lines().skip_while(|l| l.trim() != heading);
    assert!(lines.next().is_some(), "{DOC}: no heading `{heading}`");
    let mut lines = lines.skip_while(|l| {
        assert!(!l.starts_with('#'), "{DOC}: no table under `{heading}`");
        !l.trim_start().starts_with('|')
    });
    let cells = |line: &str| -> Vec<String> {
        let line = line.trim();
        let inner = line.strip_prefix('|').and_then(|l| l.strip_suffix('|'));
        let inner = inner.unwrap_or_else(|| panic!("{DOC}: malformed table row `{line}`"));
        inner
            .split('|')
            .map(|c| c.trim().replace('`', ""))
            .collect()
    };
    let header = cells(lines.next().expect("table header"));
    assert_eq!(
        header, columns,
        "{DOC}: columns of the table under `{heading}`"
    );
    let separator = cells(lines.next().expect("table separator"));
    assert!(
        separator
            .iter()
            .all(|c| !c.is_empty() && c.chars().all(|ch| ch == '-' || ch == ':')),
        "{DOC}: separator row under `{heading}`"
    );
    let rows: Vec<Vec<String>> = lines
        .take_while(|l| l.trim_start().starts_with('|'))
        .map(cells)
        .collect();
    for row in &rows {
        assert_eq!(
            row.len(),
            columns.len(),
            "{DOC}: row {row:?} under `{heading}`"
        );
    }
    assert!(!rows.is_empty(), "{DOC}: empty table under `{heading}`");
    rows
}

fn int(cell: &str, what: &str) -> usize {
    cell.parse()
        .unwrap_or_else(|_| panic!("{DOC}: {what} `{cell}` is not a plain integer"))
}

#[derive(Debug)]
struct Field {
    offset: usize,
    size: usize,
    name: String,
}

/// A `| offset | size | field | meaning |` table whose fields tile `[0, total)` with no gap.
fn layout(doc: &str, heading: &str, total: usize) -> Vec<Field> {
    let fields: Vec<Field> = table(doc, heading, &["offset", "size", "field", "meaning"])
        .into_iter()
        .map(|row| Field {
            offset: int(&row[0], "offset"),
            size: int(&row[1], "size"),
            name: row[2].clone(),
        })
        .collect();
    let mut at = 0;
    for f in &fields {
        assert_eq!(
            f.offset, at,
            "{DOC} `{heading}`: `{}` leaves a gap or overlaps",
            f.name
        );
        assert!(f.size > 0, "{DOC} `{heading}`: `{}` has size 0", f.name);
        at += f.size;
    }
    assert_eq!(
        at, total,
        "{DOC} `{heading}`: fields add up to {at} bytes, the code has {total}"
    );
    fields
}

/// The one field called `name`.
fn field<'a>(fields: &'a [Field], name: &str) -> &'a Field {
    let mut found = fields.iter().filter(|f| f.name == name);
    let f = found
        .next()
        .unwrap_or_else(|| panic!("{DOC}: no field `{name}` in {fields:?}"));
    assert!(
        found.next().is_none(),
        "{DOC}: field `{name}` appears twice"
    );
    f
}

/// The integer stored little-endian in field `f`.
fn get(bytes: &[u8], f: &Field) -> u64 {
    assert!(f.size <= 8, "`{}` is not an integer field", f.name);
    let mut le = [0u8; 8];
    le[..f.size].copy_from_slice(&bytes[f.offset..f.offset + f.size]);
    u64::from_le_bytes(le)
}

/// Stores `value` little-endian in field `f`.
fn put(bytes: &mut [u8], f: &Field, value: u64) {
    assert!(f.size <= 8 && (f.size == 8 || value >> (8 * f.size) == 0));
    bytes[f.offset..f.offset + f.size].copy_from_slice(&value.to_le_bytes()[..f.size]);
}

fn header() -> SegmentHeader {
    SegmentHeader {
        id: SegmentId(ID),
        generation: GENERATION,
    }
}

/// The documented record CRC: CRC32C of `segment_id LE ‖ generation LE ‖ header after the crc
/// field ‖ payload`.
fn documented_record_crc(crc: &Field, header_bytes: &[u8], payload: &[u8]) -> u32 {
    let mut covered = Vec::new();
    covered.extend_from_slice(&ID.to_le_bytes());
    covered.extend_from_slice(&GENERATION.to_le_bytes());
    covered.extend_from_slice(&header_bytes[crc.offset + crc.size..RECORD_HEADER_BYTES]);
    covered.extend_from_slice(payload);
    crc32c::crc32c(&covered)
}

/// A record built from the doc alone: the documented fields, then the documented CRC.
fn doc_record(rec: &[Field], kind: u8, lsn: u64, payload: &[u8]) -> Vec<u8> {
    let mut bytes = vec![0u8; record_bytes(payload.len()) + 64];
    put(&mut bytes, field(rec, "version"), RECORD_VERSION.into());
    put(&mut bytes, field(rec, "kind"), kind.into());
    put(&mut bytes, field(rec, "length"), payload.len() as u64);
    put(&mut bytes, field(rec, "lsn"), lsn);
    put(&mut bytes, field(rec, "segment_id"), ID);
    bytes[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + payload.len()].copy_from_slice(payload);
    seal_record(rec, &mut bytes, payload.len());
    bytes
}

/// Recomputes the documented CRC of the record at the start of `bytes`.
fn seal_record(rec: &[Field], bytes: &mut [u8], payload_len: usize) {
    let crc = field(rec, "crc");
    let payload = bytes[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + payload_len].to_vec();
    let value = documented_record_crc(crc, bytes, &payload);
    put(bytes, crc, value.into());
}

fn kind_named(name: &str) -> RecordKind {
    match name {
        "Data" => RecordKind::Data,
        "Padding" => RecordKind::Padding,
        "SegmentEnd" => RecordKind::SegmentEnd,
        other => panic!("{DOC}: unknown record kind `{other}`"),
    }
}

fn check_constants(doc: &str) {
    let rows = table(doc, "### Constants", &["name", "value"]);
    let mut names: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    names.sort_unstable();
    let mut expected = [
        "GROUP_ALIGN",
        "MAX_PADDING_PAYLOAD",
        "RECORD_ALIGN",
        "RECORD_HEADER_BYTES",
        "RECORD_VERSION",
        "SEGMENT_HEADER_BYTES",
        "SEGMENT_MAGIC",
        "SEGMENT_VERSION",
    ];
    expected.sort_unstable();
    assert_eq!(
        names, expected,
        "{DOC}: the constants table lists other names"
    );
    for row in &rows {
        let (name, value) = (row[0].as_str(), row[1].as_str());
        if name == "SEGMENT_MAGIC" {
            assert_eq!(value.as_bytes(), SEGMENT_MAGIC, "{DOC}: SEGMENT_MAGIC");
            continue;
        }
        let code = match name {
            "SEGMENT_VERSION" => SEGMENT_VERSION as usize,
            "SEGMENT_HEADER_BYTES" => SEGMENT_HEADER_BYTES as usize,
            "RECORD_VERSION" => RECORD_VERSION as usize,
            "RECORD_HEADER_BYTES" => RECORD_HEADER_BYTES,
            "RECORD_ALIGN" => RECORD_ALIGN,
            "GROUP_ALIGN" => storage::ALIGN,
            "MAX_PADDING_PAYLOAD" => MAX_PADDING_PAYLOAD,
            _ => unreachable!(),
        };
        assert_eq!(int(value, name), code, "{DOC}: {name}");
    }
}

fn check_segment_header(doc: &str) {
    let total = SEGMENT_HEADER_BYTES as usize;
    let fields = layout(doc, "### Segment header block", total);
    let crc = field(&fields, "crc");
    assert_eq!(
        (crc.offset, crc.size),
        (4092, 4),
        "{DOC}: header crc position"
    );
    let magic = field(&fields, "magic");
    let version = field(&fields, "version");
    let block_size = field(&fields, "block_size");
    let id = field(&fields, "segment_id");
    let generation = field(&fields, "generation");

    // The encoder puts every field where the doc says.
    let mut block = vec![0xa5u8; total];
    header().encode(&mut block);
    assert_eq!(
        block[magic.offset..magic.offset + magic.size],
        SEGMENT_MAGIC,
        "magic"
    );
    assert_eq!(get(&block, version), SEGMENT_VERSION.into(), "version");
    assert_eq!(get(&block, block_size), storage::ALIGN as u64, "block_size");
    assert_eq!(get(&block, id), ID, "segment_id");
    assert_eq!(get(&block, generation), GENERATION, "generation");
    for f in fields.iter().filter(|f| f.name == "reserved") {
        assert!(
            block[f.offset..f.offset + f.size].iter().all(|&b| b == 0),
            "reserved bytes at {} are not zero",
            f.offset
        );
    }
    assert_eq!(
        get(&block, crc),
        u64::from(crc32c::crc32c(&block[..crc.offset])),
        "header crc covers [0, {})",
        crc.offset
    );

    // A block built from the doc alone decodes to the same header.
    let mut doc_block = vec![0u8; total];
    doc_block[magic.offset..magic.offset + magic.size].copy_from_slice(&SEGMENT_MAGIC);
    put(&mut doc_block, version, SEGMENT_VERSION.into());
    put(&mut doc_block, block_size, storage::ALIGN as u64);
    put(&mut doc_block, id, ID);
    put(&mut doc_block, generation, GENERATION);
    let reseal = |b: &mut Vec<u8>| {
        let value = crc32c::crc32c(&b[..crc.offset]);
        put(b, crc, value.into());
    };
    reseal(&mut doc_block);
    assert_eq!(
        doc_block, block,
        "the doc's header block differs from the encoder's"
    );
    assert_eq!(SegmentHeader::decode(&doc_block), Some(header()));

    // Readers reject an unknown version or block size, even with a valid CRC.
    for (f, value) in [(version, SEGMENT_VERSION as u64 + 1), (block_size, 512)] {
        let mut bad = doc_block.clone();
        put(&mut bad, f, value);
        reseal(&mut bad);
        assert_eq!(SegmentHeader::decode(&bad), None, "{} = {value}", f.name);
    }

    // The seed is CRC32C of the segment id and generation, little-endian.
    let mut seed_bytes = ID.to_le_bytes().to_vec();
    seed_bytes.extend_from_slice(&GENERATION.to_le_bytes());
    assert_eq!(header().crc_seed(), crc32c::crc32c(&seed_bytes), "crc seed");
}

fn check_record_header(doc: &str) -> Vec<Field> {
    let rec = layout(doc, "### Record header", RECORD_HEADER_BYTES);
    let h = header();
    let seed = h.crc_seed();
    let payload = b"thirteen byte"; // not a multiple of 8, so alignment padding shows

    // The encoder puts every field where the doc says.
    let mut bytes = vec![0u8; 128];
    let total = encode_record(&mut bytes, RecordKind::Data, Lsn(LSN), &h, seed, payload);
    let documented_total =
        (RECORD_HEADER_BYTES + payload.len()).div_ceil(RECORD_ALIGN) * RECORD_ALIGN;
    assert_eq!(
        total, documented_total,
        "record size is round_up(32 + length, 8)"
    );
    assert_eq!(get(&bytes, field(&rec, "version")), RECORD_VERSION.into());
    assert_eq!(
        get(&bytes, field(&rec, "kind")),
        RecordKind::Data as u64,
        "kind"
    );
    assert_eq!(get(&bytes, field(&rec, "flags")), 0, "flags");
    assert_eq!(
        get(&bytes, field(&rec, "length")),
        payload.len() as u64,
        "length"
    );
    assert_eq!(get(&bytes, field(&rec, "reserved")), 0, "reserved");
    assert_eq!(get(&bytes, field(&rec, "lsn")), LSN, "lsn");
    assert_eq!(get(&bytes, field(&rec, "segment_id")), ID, "segment_id");
    assert_eq!(
        &bytes[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + payload.len()],
        payload,
        "payload follows the header"
    );
    assert!(bytes[RECORD_HEADER_BYTES + payload.len()..total]
        .iter()
        .all(|&b| b == 0));
    let crc = field(&rec, "crc");
    assert_eq!(
        get(&bytes, crc),
        u64::from(documented_record_crc(crc, &bytes, payload)),
        "record crc is CRC32C(id ‖ generation ‖ header after crc ‖ payload)"
    );

    // A record built from the doc alone is byte-identical and decodes.
    let built = doc_record(&rec, RecordKind::Data as u8, LSN, payload);
    assert_eq!(
        built[..total],
        bytes[..total],
        "doc record differs from encoder's"
    );
    let back = decode_record(&built, &h, seed, 1 << 20).expect("doc-built record decodes");
    assert_eq!(
        (back.kind, back.lsn, back.payload, back.total),
        (RecordKind::Data, Lsn(LSN), &payload[..], total)
    );

    // Flags, reserved and version are checked on read (the CRC is recomputed, so only the
    // check itself can catch them).
    for (name, value) in [("flags", 1), ("reserved", 1), ("version", 2)] {
        let mut bad = built.clone();
        put(&mut bad, field(&rec, name), value);
        seal_record(&rec, &mut bad, payload.len());
        assert_eq!(
            decode_record(&bad, &h, seed, 1 << 20),
            Err(RecordFault::BadHeader),
            "{name} = {value} must be rejected"
        );
    }

    // A padding record carries its kind, its length and the next LSN at the same offsets.
    let mut pad = vec![0u8; 2 * storage::ALIGN];
    encode_padding(&mut pad, 4096 - 8, Lsn(LSN), &h, seed);
    assert_eq!(get(&pad, field(&rec, "kind")), RecordKind::Padding as u64);
    assert_eq!(
        get(&pad, field(&rec, "length")),
        (4096 - 8 - RECORD_HEADER_BYTES) as u64
    );
    assert_eq!(get(&pad, field(&rec, "lsn")), LSN);
    assert_eq!(get(&pad, field(&rec, "segment_id")), ID);
    rec
}

fn check_kinds(doc: &str, rec: &[Field]) {
    let rows = table(
        doc,
        "### Record kinds",
        &["value", "kind", "lsn field", "payload"],
    );
    let documented: Vec<(u8, RecordKind)> = rows
        .iter()
        .map(|r| (int(&r[0], "kind value") as u8, kind_named(&r[1])))
        .collect();
    for &(value, kind) in &documented {
        assert_eq!(kind as u8, value, "{DOC}: value of {kind:?}");
    }
    for kind in [
        RecordKind::Data,
        RecordKind::Padding,
        RecordKind::SegmentEnd,
    ] {
        assert!(
            documented.iter().any(|&(_, k)| k == kind),
            "{DOC}: {kind:?} is missing from the kinds table"
        );
    }
    // Exhaustive: a well-formed empty record decodes iff its kind byte is in the table.
    let h = header();
    for byte in 0..=u8::MAX {
        let bytes = doc_record(rec, byte, LSN, &[]);
        let got = decode_record(&bytes, &h, h.crc_seed(), 1 << 20).map(|r| r.kind);
        match documented.iter().find(|&&(v, _)| v == byte) {
            Some(&(_, kind)) => assert_eq!(got, Ok(kind), "kind byte {byte}"),
            None => assert_eq!(got, Err(RecordFault::BadHeader), "kind byte {byte}"),
        }
    }
    // SegmentEnd has no payload.
    let bytes = doc_record(rec, RecordKind::SegmentEnd as u8, LSN, &[0; 8]);
    assert_eq!(
        decode_record(&bytes, &h, h.crc_seed(), 1 << 20).map(|r| r.kind),
        Err(RecordFault::BadHeader),
        "a SegmentEnd with a payload"
    );
}

fn check_alignment_rules(doc: &str) {
    let align = storage::ALIGN;
    // Groups end on a 4 KiB boundary with a padding record; a gap smaller than a record header
    // extends to the next boundary, and records that end on a boundary get a whole block.
    for pos in (0..3 * align).step_by(RECORD_ALIGN) {
        let documented = if pos == 0 {
            0
        } else if pos % align == 0 {
            pos + align
        } else {
            (pos / align + 1..)
                .map(|b| b * align)
                .find(|b| b - pos >= RECORD_HEADER_BYTES)
                .expect("a boundary")
        };
        assert_eq!(padded_end(pos), documented, "padded_end({pos})");
        let padding = documented - pos;
        if padding > 0 {
            assert!(
                padding - RECORD_HEADER_BYTES <= align - RECORD_ALIGN,
                "padding of {padding} bytes at {pos}: payload above the documented 4088"
            );
        }
    }
    for n in 0..64 {
        assert_eq!(
            record_bytes(n),
            (RECORD_HEADER_BYTES + n).div_ceil(RECORD_ALIGN) * RECORD_ALIGN,
            "record_bytes({n})"
        );
    }
    // File names: 16 lowercase hex digits.
    for (pattern, name) in [
        ("{id:016x}.jrnl", segment_file_name(SegmentId(0xab))),
        ("{id:016x}.free", free_file_name(SegmentId(0xab))),
    ] {
        assert!(doc.contains(pattern), "{DOC}: no `{pattern}`");
        let suffix = pattern.trim_start_matches("{id:016x}");
        assert_eq!(
            name,
            format!("{:016x}{suffix}", 0xab),
            "file name {pattern}"
        );
    }
}

/// The doc's tables match the code's constants, offsets, kinds and checksum rule, in both
/// directions (encoder output read at the documented offsets; doc-built bytes decoded).
#[test]
fn format_doc_matches_constants() {
    let doc = doc();
    check_constants(&doc);
    check_segment_header(&doc);
    let rec = check_record_header(&doc);
    check_kinds(&doc, &rec);
    check_alignment_rules(&doc);
}
