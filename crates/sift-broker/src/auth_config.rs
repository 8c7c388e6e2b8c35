//! The `[auth]` section of the configuration: where the users file is, and
//! how sign-in failures are slowed. Re-exported by [`crate::config`].
//!
//! Without a users file the broker is open: every client may do
//! everything. That is only safe where nobody else can reach it, so `sift
//! broker` refuses to bind an address other than loopback without one
//! unless `allow_anonymous` is set.

use std::path::PathBuf;

use serde::Deserialize;

use crate::config::ConfigError;

/// Default of `auth.failure_delay_ms_max`: the longest a refused `AUTH`
/// waits before its answer, reached after a few failures on one name.
pub const AUTH_FAILURE_DELAY_MS_MAX_DEFAULT: u64 = 2_000;
/// Default of `auth.failure_delay_ms_min`: the wait after a first failure;
/// it doubles with each failure on the same user name up to the maximum.
pub const AUTH_FAILURE_DELAY_MS_MIN_DEFAULT: u64 = 100;
/// Default of `auth.failure_names_max`: user names whose recent failures
/// are remembered (the table of failures is bounded like every other).
pub const AUTH_FAILURE_NAMES_MAX_DEFAULT: usize = 10_000;

/// `[auth]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// The users file (`--users`); none: the broker is open.
    pub users_file: Option<PathBuf>,
    /// Serve an open broker (no users file) on addresses other than
    /// loopback (`--allow-anonymous`).
    pub allow_anonymous: bool,
    /// Wait before answering the first refused `AUTH` on a user name.
    pub failure_delay_ms_min: u64,
    /// Longest wait before answering a refused `AUTH`.
    pub failure_delay_ms_max: u64,
    /// User names whose recent failures are remembered.
    pub failure_names_max: usize,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            users_file: None,
            allow_anonymous: false,
            failure_delay_ms_min: AUTH_FAILURE_DELAY_MS_MIN_DEFAULT,
            failure_delay_ms_max: AUTH_FAILURE_DELAY_MS_MAX_DEFAULT,
            failure_names_max: AUTH_FAILURE_NAMES_MAX_DEFAULT,
        }
    }
}

impl AuthConfig {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.failure_delay_ms_min > self.failure_delay_ms_max {
            return Err(ConfigError::Invalid(format!(
                "auth.failure_delay_ms_min = {} exceeds auth.failure_delay_ms_max = {}",
                self.failure_delay_ms_min, self.failure_delay_ms_max
            )));
        }
        if self.failure_names_max == 0 {
            return Err(ConfigError::Invalid("auth.failure_names_max must be at least 1".into()));
        }
        Ok(())
    }
}
