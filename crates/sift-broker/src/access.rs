//! Who a session is and what it may do: the broker's side of sign-in.
//!
//! [`Access`] holds the users file the broker started with (or none: an
//! open broker), replaced in place when the file is read again on SIGHUP
//! ([`Access::replace`]: sessions keep the standing they signed in with,
//! every later sign-in uses the new file), and answers an `AUTH` with the session's new
//! [`Standing`]. Every door signs in the same way, by an `AUTH` that its
//! session hands to the session machine, so a STOMP `login`, an MQTT
//! username and an HTTP `Authorization` header all end in
//! [`Access::sign_in`], and every later action is judged by the same
//! [`Permissions`] in `crate::session`.
//!
//! Password guessing is slowed: each refused `AUTH` on a user name waits
//! before its answer, twice as long as the one before, from
//! `auth.failure_delay_ms_min` up to `auth.failure_delay_ms_max`, and a
//! success forgets the failures. The table of failures holds at most
//! `auth.failure_names_max` names.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use sift_auth::{Permissions, UsersFile};
use sift_proto::{Auth, AuthMethod};

use crate::config::AuthConfig;

/// A hash that no password matches, verified in place of an unknown
/// user's so that a refusal takes as long whether or not the name exists.
const UNKNOWN_USER_HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$c2lmdHVua25vd251c2Vy$3cuBhZm5mpUBEIWLr2EcMuHFiM5XKuQr5VBTWP9lqxM";

/// What a session may do now.
#[derive(Debug, Clone)]
pub enum Standing {
    /// An open broker (no users file): everything, without checks.
    Open {
        /// The name an `AUTH` gave, kept for reports; not checked.
        user: Option<Arc<str>>,
    },
    /// A signed-in user, or anonymous access, with these permissions.
    Limited {
        /// The user; `None` for anonymous access.
        user: Option<Arc<str>>,
        /// What it may do.
        permissions: Arc<Permissions>,
    },
    /// Nothing until an `AUTH` succeeds: the broker has users and no
    /// anonymous access.
    MustSignIn,
}

impl Standing {
    /// The user acting, for reports and the audit log.
    pub fn user(&self) -> Option<&str> {
        match self {
            Standing::Open { user } | Standing::Limited { user, .. } => user.as_deref(),
            Standing::MustSignIn => None,
        }
    }
}

/// Why an `AUTH` was refused. The text goes back to the client, so a
/// password's refusal says no more than that the credentials were refused
/// (never which part); a token's says what is wrong with the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignInError {
    /// Unknown user or wrong password.
    #[error("user {0:?}: unknown user or wrong password")]
    Refused(String),
    /// A bearer token that does not verify, has lapsed, or names no user
    /// of the users file.
    #[error("{0}")]
    Token(String),
    /// The check itself did not finish (its task failed).
    #[error("the sign-in check failed: {0}")]
    CheckFailed(String),
}

/// The users a broker knows and how sign-in failures are slowed.
#[derive(Debug)]
pub struct Access {
    config: AuthConfig,
    /// `None`: an open broker (which a reload cannot lock).
    users: Option<RwLock<Arc<Users>>>,
    /// Whether the users file names signed topics: publishes elsewhere
    /// skip the check without taking the lock.
    signed_topics: std::sync::atomic::AtomicBool,
    /// Recent failures by user name, bounded by `failure_names_max`.
    failures: Mutex<HashMap<String, u32>>,
}

/// One reading of the users file.
#[derive(Debug)]
struct Users {
    by_name: HashMap<String, sift_auth::User>,
    anonymous: Option<Arc<Permissions>>,
    token_issuers: Vec<sift_auth::tokens::TokenIssuer>,
    signed_topics: Vec<sift_auth::SignedTopic>,
}

impl Users {
    fn of(file: UsersFile) -> Users {
        let anonymous = file.anonymous.map(Arc::new);
        let by_name = file.users.into_iter().map(|user| (user.name.clone(), user)).collect();
        Users { by_name, anonymous, token_issuers: file.token_issuers, signed_topics: file.signed_topics }
    }
}

/// A reload of the users file on an open broker: it was started without
/// one, and stays open (restart it with `--users` to lock it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the broker started without a users file and stays open; restart it with --users to require sign-in")]
pub struct StartedOpen;

/// The standing a bearer token gives: its user's, if the token verifies
/// with a trusted issuer's key at `now_s` and names a user of the file
/// (the `AUTH`'s user, when given, must be that user).
fn token_standing(users: &Users, auth: &Auth, now_s: u64) -> Result<Standing, SignInError> {
    let claims = sift_auth::tokens::verify(&auth.secret, &users.token_issuers, now_s)
        .map_err(|error| SignInError::Token(error.to_string()))?;
    if !auth.user.is_empty() && auth.user != claims.sub {
        return Err(SignInError::Token(format!("the token is for {:?}, not {:?}", claims.sub, auth.user)));
    }
    let user = users.by_name.get(&claims.sub).ok_or_else(|| SignInError::Token(format!("no user {:?}", claims.sub)))?;
    Ok(standing_of(user))
}

/// The standing of a signed-in `user`: its name and permissions.
fn standing_of(user: &sift_auth::User) -> Standing {
    Standing::Limited { user: Some(Arc::from(user.name.as_str())), permissions: Arc::new(user.permissions.clone()) }
}

impl Access {
    /// An open broker: no users file.
    pub fn open(config: AuthConfig) -> Access {
        Access { config, users: None, signed_topics: Default::default(), failures: Mutex::new(HashMap::new()) }
    }

    /// A broker with the users of `file`.
    pub fn with_users(config: AuthConfig, file: UsersFile) -> Access {
        let signed_topics = std::sync::atomic::AtomicBool::new(!file.signed_topics.is_empty());
        let users = RwLock::new(Arc::new(Users::of(file)));
        Access { config, users: Some(users), signed_topics, failures: Mutex::new(HashMap::new()) }
    }

    /// Puts `file` in place of the users the broker had: sign-ins from now
    /// on use it; signed-in sessions keep their standing.
    pub fn replace(&self, file: UsersFile) -> Result<(), StartedOpen> {
        let Some(users) = &self.users else { return Err(StartedOpen) };
        self.signed_topics.store(!file.signed_topics.is_empty(), std::sync::atomic::Ordering::Relaxed);
        *users.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(Users::of(file));
        Ok(())
    }

    /// Checks the signature of a message about to be published, when its
    /// topic is one of the users file's `[[signed_topic]]`s (the first
    /// that matches); every other message passes.
    pub fn check_signature(&self, message: &sift_core::Message) -> Result<(), sift_auth::signing::SignatureError> {
        if !self.signed_topics.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(());
        }
        let Some(users) = self.users() else { return Ok(()) };
        match users.signed_topics.iter().find(|rule| rule.topic.matches(&message.topic)) {
            Some(rule) => sift_auth::signing::verify(message, &rule.keys).map(|_| ()),
            None => Ok(()),
        }
    }

    /// The users now in force; `None` on an open broker.
    fn users(&self) -> Option<Arc<Users>> {
        self.users.as_ref().map(|users| users.read().unwrap_or_else(PoisonError::into_inner).clone())
    }

    /// True when the broker has no users file.
    pub fn is_open(&self) -> bool {
        self.users.is_none()
    }

    /// Users the broker knows (0 when open).
    pub fn user_count(&self) -> usize {
        self.users().map_or(0, |users| users.by_name.len())
    }

    /// True when clients that do not sign in get the `[anonymous]` entry.
    pub fn admits_anonymous(&self) -> bool {
        self.users().is_some_and(|users| users.anonymous.is_some())
    }

    /// What a session may do before it signs in.
    pub fn initial(&self) -> Standing {
        let Some(users) = self.users() else { return Standing::Open { user: None } };
        match &users.anonymous {
            Some(anonymous) => Standing::Limited { user: None, permissions: anonymous.clone() },
            None => Standing::MustSignIn,
        }
    }

    /// The standing of a client whose TLS certificate proves `name` (its
    /// door's client CA vouched for it): that user's, if the users file
    /// names it; the open standing, named, on a broker without users;
    /// `None` (the initial standing applies) for a name no user has.
    pub fn certified(&self, name: &str) -> Option<Standing> {
        let Some(users) = self.users() else { return Some(Standing::Open { user: Some(Arc::from(name)) }) };
        users.by_name.get(name).map(standing_of)
    }

    /// Checks an `AUTH` at `now_s` (seconds since the epoch, by the
    /// broker's clock: a token's lapse is judged by it). Blocking: a
    /// password costs one argon2id verification (tens of milliseconds), so
    /// callers run it off the async threads.
    pub fn sign_in(&self, auth: &Auth, now_s: u64) -> Result<Standing, SignInError> {
        let Some(users) = self.users() else {
            let user = (!auth.user.is_empty()).then(|| Arc::from(auth.user.as_str()));
            return Ok(Standing::Open { user });
        };
        match auth.method {
            AuthMethod::Token => return token_standing(&users, auth, now_s),
            // The session checked that a front-end of this process asserts it.
            AuthMethod::Certificate => {
                return users
                    .by_name
                    .get(&auth.user)
                    .map(standing_of)
                    .ok_or_else(|| SignInError::Refused(auth.user.clone()))
            }
            AuthMethod::Password => {}
        }
        let refused = || SignInError::Refused(auth.user.clone());
        let Some(user) = users.by_name.get(&auth.user) else {
            sift_auth::password::verify(&auth.secret, UNKNOWN_USER_HASH);
            return Err(refused());
        };
        let Some(hash) = &user.password_hash else {
            sift_auth::password::verify(&auth.secret, UNKNOWN_USER_HASH);
            return Err(refused());
        };
        if !sift_auth::password::verify(&auth.secret, hash) {
            return Err(refused());
        }
        self.lock_failures().remove(&auth.user);
        Ok(standing_of(user))
    }

    /// Records a refused `AUTH` on `user` and returns how long its answer
    /// waits: the minimum after a first failure, doubling with each one
    /// after it, up to the maximum.
    pub fn failed(&self, user: &str) -> Duration {
        let mut failures = self.lock_failures();
        if !failures.contains_key(user) && failures.len() >= self.config.failure_names_max {
            // Full: forget everyone's failures rather than grow. Guessing
            // that many names at once is slowed by the delay each pays.
            failures.clear();
        }
        let count = failures.entry(user.to_string()).or_insert(0);
        *count = count.saturating_add(1);
        let doublings = (*count - 1).min(16);
        debug_assert!(failures.len() <= self.config.failure_names_max);
        let delay_ms = self.config.failure_delay_ms_min.saturating_mul(1 << doublings);
        Duration::from_millis(delay_ms.min(self.config.failure_delay_ms_max))
    }

    fn lock_failures(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        self.failures.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(user: &str, secret: &str) -> Auth {
        Auth { request_id: 1, method: AuthMethod::Password, user: user.into(), secret: secret.into() }
    }

    fn broker_with_alice() -> Access {
        let hash = sift_auth::password::hash("wonderland").expect("hashes");
        let text = format!(
            "[[user]]\nname = \"alice\"\npassword_hash = \"{hash}\"\npublish = [\"orders.>\"]\n\n[anonymous]\nsubscribe = [\"public.>\"]\n"
        );
        Access::with_users(AuthConfig::default(), UsersFile::parse(&text).expect("valid file"))
    }

    #[test]
    fn the_unknown_user_hash_is_a_well_formed_argon2id_hash() {
        sift_auth::password::check(UNKNOWN_USER_HASH).expect("argon2id");
    }

    #[test]
    fn a_user_signs_in_with_its_password_and_no_other() {
        let access = broker_with_alice();
        match access.sign_in(&auth("alice", "wonderland"), 0) {
            Ok(Standing::Limited { user: Some(user), permissions }) => {
                assert_eq!(&*user, "alice");
                assert_eq!(permissions.publish.len(), 1);
            }
            other => panic!("signed in, got {other:?}"),
        }
        assert_eq!(
            access.sign_in(&auth("alice", "looking glass"), 0).err(),
            Some(SignInError::Refused("alice".into()))
        );
        assert_eq!(access.sign_in(&auth("mallory", "x"), 0).err(), Some(SignInError::Refused("mallory".into())));
        assert!(matches!(access.initial(), Standing::Limited { user: None, .. }), "anonymous has its entry");
    }

    #[test]
    fn an_open_broker_lets_everyone_in_and_a_users_file_without_anonymous_does_not() {
        let open = Access::open(AuthConfig::default());
        assert!(matches!(open.initial(), Standing::Open { user: None }));
        assert!(matches!(open.sign_in(&auth("anyone", ""), 0), Ok(Standing::Open { user: Some(_) })));
        let closed = Access::with_users(AuthConfig::default(), UsersFile::default());
        assert!(matches!(closed.initial(), Standing::MustSignIn));
    }

    #[test]
    fn failures_wait_longer_each_time_up_to_the_maximum_and_the_table_is_bounded() {
        let config = AuthConfig {
            failure_delay_ms_min: 100,
            failure_delay_ms_max: 1_000,
            failure_names_max: 2,
            ..AuthConfig::default()
        };
        let access = Access::with_users(config, UsersFile::default());
        let delays: Vec<u128> = (0..6).map(|_| access.failed("eve").as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1_000, 1_000]);
        assert_eq!(access.failed("mallory").as_millis(), 100, "each name counts its own failures");
        assert_eq!(access.failed("trudy").as_millis(), 100);
        assert!(access.lock_failures().len() <= 2);
    }
}
