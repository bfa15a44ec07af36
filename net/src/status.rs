//! The one closed set of status codes a bookie can put on the wire.
//!
//! v2 and v3 carry the same eleven meanings with different numbers (docs/protocol.md
//! §2.4, §3.2). Everything above the codec speaks [`StatusCode`]; the numbers only
//! exist at the two edges, in [`StatusCode::v2_rc`] / [`StatusCode::from_v2_rc`] and
//! [`StatusCode::v3_code`] / [`StatusCode::from_v3_code`].

/// A status code of the BookKeeper protocol. The variant names are the wire
/// names, so they can be grepped for in the Java sources and the spec.
#[allow(clippy::upper_case_acronyms)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StatusCode {
    /// Success. v2 `0`, v3 `0`.
    EOK,
    /// The ledger is not on this bookie. v2 `1`, v3 `402`.
    ENOLEDGER,
    /// The entry is not on this bookie. v2 `2`, v3 `403`.
    ENOENTRY,
    /// Bad or unsupported request. v2 `100`, v3 `404`.
    EBADREQ,
    /// I/O or general error. v2 `101`, v3 `501`.
    EIO,
    /// Wrong master key, or not authenticated. v2 `102`, v3 `502`.
    EUA,
    /// Unsupported protocol version. v2 `103`, v3 `503`.
    EBADVERSION,
    /// The ledger is fenced. v2 `104`, v3 `504`.
    EFENCED,
    /// The bookie is read-only. v2 `105`, v3 `505`.
    EREADONLY,
    /// Overloaded. v2 `106`, v3 `506`.
    ETOOMANYREQUESTS,
    /// The ledger is in limbo. v3 `507`. On v2 it is sent as `EIO` (see [`StatusCode::v2_rc`]).
    EUNKNOWNLEDGERSTATE,
}

impl StatusCode {
    /// Every status code, in wire order.
    pub const ALL: [StatusCode; 11] = [
        StatusCode::EOK,
        StatusCode::ENOLEDGER,
        StatusCode::ENOENTRY,
        StatusCode::EBADREQ,
        StatusCode::EIO,
        StatusCode::EUA,
        StatusCode::EBADVERSION,
        StatusCode::EFENCED,
        StatusCode::EREADONLY,
        StatusCode::ETOOMANYREQUESTS,
        StatusCode::EUNKNOWNLEDGERSTATE,
    ];

    /// The v3 `StatusCode` enum value.
    pub const fn v3_code(self) -> i32 {
        match self {
            StatusCode::EOK => 0,
            StatusCode::ENOLEDGER => 402,
            StatusCode::ENOENTRY => 403,
            StatusCode::EBADREQ => 404,
            StatusCode::EIO => 501,
            StatusCode::EUA => 502,
            StatusCode::EBADVERSION => 503,
            StatusCode::EFENCED => 504,
            StatusCode::EREADONLY => 505,
            StatusCode::ETOOMANYREQUESTS => 506,
            StatusCode::EUNKNOWNLEDGERSTATE => 507,
        }
    }

    /// Parses a v3 enum value. `None` for a value outside the enum, which a proto2
    /// parser treats as an unknown field (docs/protocol.md §3.1).
    pub const fn from_v3_code(code: i32) -> Option<StatusCode> {
        Some(match code {
            0 => StatusCode::EOK,
            402 => StatusCode::ENOLEDGER,
            403 => StatusCode::ENOENTRY,
            404 => StatusCode::EBADREQ,
            501 => StatusCode::EIO,
            502 => StatusCode::EUA,
            503 => StatusCode::EBADVERSION,
            504 => StatusCode::EFENCED,
            505 => StatusCode::EREADONLY,
            506 => StatusCode::ETOOMANYREQUESTS,
            507 => StatusCode::EUNKNOWNLEDGERSTATE,
            _ => return None,
        })
    }

    /// The v2 `rc` to send. `EUNKNOWNLEDGERSTATE` becomes `EIO(101)`: the Java v2
    /// client has no mapping for 107 and closes the connection on it (docs/protocol.md
    /// §2.4 trap, §9 item 8).
    pub const fn v2_rc(self) -> i32 {
        match self {
            StatusCode::EOK => 0,
            StatusCode::ENOLEDGER => 1,
            StatusCode::ENOENTRY => 2,
            StatusCode::EBADREQ => 100,
            StatusCode::EIO | StatusCode::EUNKNOWNLEDGERSTATE => 101,
            StatusCode::EUA => 102,
            StatusCode::EBADVERSION => 103,
            StatusCode::EFENCED => 104,
            StatusCode::EREADONLY => 105,
            StatusCode::ETOOMANYREQUESTS => 106,
        }
    }

    /// Parses a v2 `rc` as our client does. 107 is accepted (a Java bookie sends it
    /// on v2 reads of a ledger in limbo) even though the Java client would close the
    /// connection on it; any other unknown value is a protocol error for the caller.
    pub const fn from_v2_rc(rc: i32) -> Option<StatusCode> {
        Some(match rc {
            0 => StatusCode::EOK,
            1 => StatusCode::ENOLEDGER,
            2 => StatusCode::ENOENTRY,
            100 => StatusCode::EBADREQ,
            101 => StatusCode::EIO,
            102 => StatusCode::EUA,
            103 => StatusCode::EBADVERSION,
            104 => StatusCode::EFENCED,
            105 => StatusCode::EREADONLY,
            106 => StatusCode::ETOOMANYREQUESTS,
            107 => StatusCode::EUNKNOWNLEDGERSTATE,
            _ => return None,
        })
    }

    /// True for `EOK`.
    pub const fn is_ok(self) -> bool {
        matches!(self, StatusCode::EOK)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: the two numberings are inverse to each other for every code, except the
    /// documented v2 fold of EUNKNOWNLEDGERSTATE into EIO.
    #[test]
    fn numberings_round_trip() {
        for status in StatusCode::ALL {
            assert_eq!(StatusCode::from_v3_code(status.v3_code()), Some(status));
            let back = StatusCode::from_v2_rc(status.v2_rc()).unwrap();
            if status == StatusCode::EUNKNOWNLEDGERSTATE {
                assert_eq!(back, StatusCode::EIO);
            } else {
                assert_eq!(back, status);
            }
        }
        assert_eq!(
            StatusCode::from_v2_rc(107),
            Some(StatusCode::EUNKNOWNLEDGERSTATE)
        );
        assert_eq!(StatusCode::from_v2_rc(108), None);
        assert_eq!(StatusCode::from_v3_code(1), None);
    }
}
