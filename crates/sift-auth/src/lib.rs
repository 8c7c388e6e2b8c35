//! Who may do what on a Sift broker, decided once for every door.
//!
//! A users file (`sift broker --users FILE`, TOML) names each user with
//! its password hash (argon2id, [`password`]) and its permissions: the
//! topics it may publish to, the topics it may subscribe to (each
//! optionally with a content restriction that the broker ANDs with every
//! subscription the grant covers), the streams it may read or manage, and
//! whether it may read the admin reports. [`UsersFile::parse`] checks the
//! whole file and names what is wrong and where; [`Permissions`] answers
//! each action. The crate does no I/O: the broker's session machine asks
//! it, so that every door (native, HTTP, STOMP, MQTT) gets the same
//! decision.

pub mod keys;
pub mod password;
pub mod permissions;
pub mod signing;
pub mod tokens;
pub mod users;

pub use permissions::{Permissions, StreamAction, SubscribeDecision, SubscribeGrant, UserLimits};
pub use users::{BrokerGrant, SignedTopic, User, UsersError, UsersFile};
