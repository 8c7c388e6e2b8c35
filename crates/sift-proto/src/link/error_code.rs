//! Error codes carried by `LINK_ERROR` frames.

use crate::ErrorCode;

/// First code of the link-specific range. Link codes start well above the
/// client protocol's so that new [`ErrorCode`]s can never collide with them.
pub const LINK_ERROR_CODE_BASE: u16 = 0x0100;

/// Why a broker refused something on a link: a client-protocol
/// [`ErrorCode`] where one fits (malformed, unsupported_version,
/// unexpected_frame, handshake_timeout_ms, shutting_down...), or a
/// link-specific code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkErrorCode {
    /// The peer belongs to another cluster.
    ClusterMismatch,
    /// The peer has this broker's own name, or that of a broker already
    /// linked: names must be unique within a cluster.
    DuplicateBrokerName,
    /// A link to a broker of the peer's name is already up: usually the two
    /// brokers dialled each other and the other handshake won. Not a
    /// configuration error; the dialler tries again later.
    AlreadyLinked,
    /// A code shared with the client protocol (or one this version does not
    /// know, as [`ErrorCode::Unknown`]).
    Common(ErrorCode),
}

impl LinkErrorCode {
    /// The wire value.
    pub fn code(self) -> u16 {
        match self {
            LinkErrorCode::ClusterMismatch => LINK_ERROR_CODE_BASE,
            LinkErrorCode::DuplicateBrokerName => LINK_ERROR_CODE_BASE + 1,
            LinkErrorCode::AlreadyLinked => LINK_ERROR_CODE_BASE + 2,
            LinkErrorCode::Common(code) => code.code(),
        }
    }

    /// The code for a wire value; unknown values are kept, not rejected.
    pub fn from_code(code: u16) -> LinkErrorCode {
        match code.checked_sub(LINK_ERROR_CODE_BASE) {
            Some(0) => LinkErrorCode::ClusterMismatch,
            Some(1) => LinkErrorCode::DuplicateBrokerName,
            Some(2) => LinkErrorCode::AlreadyLinked,
            _ => LinkErrorCode::Common(ErrorCode::from_code(code)),
        }
    }

    /// A short name, as printed by tools and in logs.
    pub fn name(self) -> &'static str {
        match self {
            LinkErrorCode::ClusterMismatch => "cluster_mismatch",
            LinkErrorCode::DuplicateBrokerName => "duplicate_broker_name",
            LinkErrorCode::AlreadyLinked => "already_linked",
            LinkErrorCode::Common(code) => code.name(),
        }
    }
}

impl From<ErrorCode> for LinkErrorCode {
    fn from(code: ErrorCode) -> LinkErrorCode {
        LinkErrorCode::Common(code)
    }
}

impl std::fmt::Display for LinkErrorCode {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{} ({})", self.name(), self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_codes_do_not_shadow_common_codes_and_round_trip() {
        for code in
            (1..=20).chain([LINK_ERROR_CODE_BASE, LINK_ERROR_CODE_BASE + 1, LINK_ERROR_CODE_BASE + 2, 999, u16::MAX])
        {
            assert_eq!(LinkErrorCode::from_code(code).code(), code);
        }
        assert_eq!(LinkErrorCode::from_code(1), LinkErrorCode::Common(ErrorCode::Malformed));
        assert_eq!(LinkErrorCode::from_code(LINK_ERROR_CODE_BASE), LinkErrorCode::ClusterMismatch);
        assert_eq!(LinkErrorCode::from_code(999), LinkErrorCode::Common(ErrorCode::Unknown(999)));
    }
}
