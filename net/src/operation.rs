//! Operation identifiers of both protocols: the v3 `OperationType` and
//! `ProtocolVersion` enums, and the v2 opcodes and flag bits (docs/protocol.md §2.2,
//! §2.3, §3.2).

/// The v3 `ProtocolVersion` enum. Clients send `VERSION_THREE`; the bookie answers
/// `EBADVERSION` to most operations carrying anything else (docs/protocol.md §3.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProtocolVersion {
    /// `VERSION_ONE = 1`.
    One,
    /// `VERSION_TWO = 2`.
    Two,
    /// `VERSION_THREE = 3`.
    Three,
}

impl ProtocolVersion {
    /// The enum value on the wire.
    pub const fn code(self) -> i32 {
        match self {
            ProtocolVersion::One => 1,
            ProtocolVersion::Two => 2,
            ProtocolVersion::Three => 3,
        }
    }

    /// Parses an enum value; `None` outside the enum.
    pub const fn from_code(code: i32) -> Option<ProtocolVersion> {
        match code {
            1 => Some(ProtocolVersion::One),
            2 => Some(ProtocolVersion::Two),
            3 => Some(ProtocolVersion::Three),
            _ => None,
        }
    }
}

/// The v3 `OperationType` enum: what a v3 request asks for, copied into its reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OperationType {
    /// `READ_ENTRY = 1`.
    ReadEntry,
    /// `ADD_ENTRY = 2`.
    AddEntry,
    /// `RANGE_READ_ENTRY = 3`: defined, never served (EBADREQ).
    RangeReadEntry,
    /// `RANGE_ADD_ENTRY = 4`: defined, never served (EBADREQ).
    RangeAddEntry,
    /// `AUTH = 5`.
    Auth,
    /// `WRITE_LAC = 6`.
    WriteLac,
    /// `READ_LAC = 7`.
    ReadLac,
    /// `GET_BOOKIE_INFO = 8`.
    GetBookieInfo,
    /// `START_TLS = 9`.
    StartTls,
    /// `FORCE_LEDGER = 10`.
    ForceLedger,
    /// `GET_LIST_OF_ENTRIES_OF_LEDGER = 11`.
    GetListOfEntriesOfLedger,
    /// `BATCH_READ_ENTRY = 12`: served over v2 only; over v3 it is EBADREQ.
    BatchReadEntry,
}

impl OperationType {
    /// Every operation, in wire order.
    pub const ALL: [OperationType; 12] = [
        OperationType::ReadEntry,
        OperationType::AddEntry,
        OperationType::RangeReadEntry,
        OperationType::RangeAddEntry,
        OperationType::Auth,
        OperationType::WriteLac,
        OperationType::ReadLac,
        OperationType::GetBookieInfo,
        OperationType::StartTls,
        OperationType::ForceLedger,
        OperationType::GetListOfEntriesOfLedger,
        OperationType::BatchReadEntry,
    ];

    /// The enum value on the wire.
    pub const fn code(self) -> i32 {
        match self {
            OperationType::ReadEntry => 1,
            OperationType::AddEntry => 2,
            OperationType::RangeReadEntry => 3,
            OperationType::RangeAddEntry => 4,
            OperationType::Auth => 5,
            OperationType::WriteLac => 6,
            OperationType::ReadLac => 7,
            OperationType::GetBookieInfo => 8,
            OperationType::StartTls => 9,
            OperationType::ForceLedger => 10,
            OperationType::GetListOfEntriesOfLedger => 11,
            OperationType::BatchReadEntry => 12,
        }
    }

    /// Parses an enum value; `None` outside the enum.
    pub const fn from_code(code: i32) -> Option<OperationType> {
        if code < 1 || code > 12 {
            return None;
        }
        Some(OperationType::ALL[(code - 1) as usize])
    }
}

/// v2 opcodes (the middle byte of the v2 header word, docs/protocol.md §2.2).
pub mod opcode {
    /// `ADDENTRY`.
    pub const ADD_ENTRY: u8 = 1;
    /// `READENTRY`.
    pub const READ_ENTRY: u8 = 2;
    /// `AUTH`.
    pub const AUTH: u8 = 3;
    /// `READ_LAC`: a constant only; the Java bookie closes the connection on it.
    pub const READ_LAC: u8 = 4;
    /// `WRITE_LAC`: a constant only; the Java bookie closes the connection on it.
    pub const WRITE_LAC: u8 = 5;
    /// `GET_BOOKIE_INFO`: a constant only; the Java bookie closes the connection on it.
    pub const GET_BOOKIE_INFO: u8 = 6;
    /// `BATCH_READ_ENTRY` (4.17+).
    pub const BATCH_READ_ENTRY: u8 = 7;
}

/// v2 flag bits (the low 16 bits of the v2 header word, docs/protocol.md §2.3).
pub mod flag {
    /// Fence the ledger, then read (READ, BATCH_READ).
    pub const DO_FENCING: u16 = 0x0001;
    /// Write even if the ledger is fenced (ADD).
    pub const RECOVERY_ADD: u16 = 0x0002;
    /// High-priority scheduling (ADD, READ, BATCH_READ).
    pub const HIGH_PRIORITY: u16 = 0x0004;
}

/// The v2 protocol version byte that clients send (`CURRENT_PROTOCOL_VERSION`).
pub const V2_CURRENT_VERSION: u8 = 2;

/// Length of a v2 master key; v2 always carries exactly this many bytes.
pub const MASTER_KEY_LENGTH: usize = 20;

/// v3 `ReadRequest.flag` values (only one flag at a time).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReadFlag {
    /// `FENCE_LEDGER = 1`: fence, then read (ledger recovery).
    FenceLedger,
    /// `ENTRY_PIGGYBACK = 2`: long poll that may attach entry `previousLAC + 1`.
    EntryPiggyback,
}

impl ReadFlag {
    /// The enum value on the wire.
    pub const fn code(self) -> i32 {
        match self {
            ReadFlag::FenceLedger => 1,
            ReadFlag::EntryPiggyback => 2,
        }
    }

    /// Parses an enum value; `None` outside the enum.
    pub const fn from_code(code: i32) -> Option<ReadFlag> {
        match code {
            1 => Some(ReadFlag::FenceLedger),
            2 => Some(ReadFlag::EntryPiggyback),
            _ => None,
        }
    }
}

/// `AddRequest.writeFlags` bit 0: reply after the journal write, before its fsync.
pub const WRITE_FLAG_DEFERRED_SYNC: i32 = 1;

/// `GetBookieInfoRequest.requested` bit: total disk capacity.
pub const BOOKIE_INFO_TOTAL_DISK_CAPACITY: i64 = 0x1;
/// `GetBookieInfoRequest.requested` bit: free disk space.
pub const BOOKIE_INFO_FREE_DISK_SPACE: i64 = 0x2;

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: each enum's code and from_code are inverse, and values outside the
    /// enum are refused.
    #[test]
    fn enum_codes_round_trip() {
        for op in OperationType::ALL {
            assert_eq!(OperationType::from_code(op.code()), Some(op));
        }
        assert_eq!(OperationType::from_code(0), None);
        assert_eq!(OperationType::from_code(13), None);
        for v in [
            ProtocolVersion::One,
            ProtocolVersion::Two,
            ProtocolVersion::Three,
        ] {
            assert_eq!(ProtocolVersion::from_code(v.code()), Some(v));
        }
        assert_eq!(ProtocolVersion::from_code(4), None);
        for f in [ReadFlag::FenceLedger, ReadFlag::EntryPiggyback] {
            assert_eq!(ReadFlag::from_code(f.code()), Some(f));
        }
        assert_eq!(ReadFlag::from_code(3), None);
    }
}
