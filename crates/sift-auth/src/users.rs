//! The users file: each user's name, password hash and permissions, and
//! the permissions of anonymous access.
//!
//! ```toml
//! [[user]]
//! name = "alice"
//! password_hash = "$argon2id$..."        # `sift passwd` prints one
//! publish = ["orders.>"]
//! subscribe = ["orders.>"]
//! streams = ["orders"]                   # may replay, query, read durably
//!
//! [[user]]
//! name = "bob"
//! password_hash = "$argon2id$..."
//! subscribe = [{ topic = "orders.>", where = "region = 'EU'" }]
//!
//! [anonymous]                            # only when anonymous access is allowed
//! subscribe = ["public.>"]
//!
//! [[token_issuer]]                       # bearer tokens (JWT, Ed25519) it signs are taken
//! name = "ops"                           # the tokens' `iss`
//! public_key = "base64 of 32 bytes"      # `sift token keygen` prints one
//!
//! [[signing_key]]                        # keys that sign messages
//! name = "plant-7"
//! public_key = "base64 of 32 bytes"
//!
//! [[signed_topic]]                       # the broker refuses unsigned or forged messages here
//! topic = "orders.>"
//! keys = ["plant-7"]
//!
//! [[broker]]                             # what a linked broker may send here and be sent
//! name = "edge-1"
//! forward_in = ["telemetry.>"]
//! forward_out = ["commands.edge-1.>"]
//! ```
//!
//! A `where` is a JMS selector unless `language` says `tags`, `regex` or
//! `xpath`. Every name, filter, restriction and hash is checked when the
//! file is read; the first fault is reported with the user and the field.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::Deserialize;
use sift_core::TopicFilter;
use sift_filter::{ContentFilter, FilterLanguage};

use crate::permissions::{Permissions, SubscribeGrant, UserLimits};

/// Longest user name.
pub const USER_NAME_BYTES_MAX: usize = 128;
/// Most users one file may hold.
pub const USERS_MAX: usize = 100_000;

/// Why a users file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum UsersError {
    /// Not TOML of this schema; the parser's message has the line.
    #[error("users file: {0}")]
    Parse(Box<toml::de::Error>),
    /// A value is wrong.
    #[error("users file, {whom}, {field}: {reason}")]
    Invalid {
        /// `user "alice"` or `[anonymous]`.
        whom: String,
        /// The field.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
}

/// A user as the file gives it, checked.
#[derive(Debug, Clone)]
pub struct User {
    /// Its name.
    pub name: String,
    /// Its argon2id password hash, if it signs in with a password.
    pub password_hash: Option<String>,
    /// What it may do.
    pub permissions: Permissions,
}

/// A users file, checked.
#[derive(Debug, Clone, Default)]
pub struct UsersFile {
    /// The users, in the file's order.
    pub users: Vec<User>,
    /// Issuers whose bearer tokens sign users in.
    pub token_issuers: Vec<crate::tokens::TokenIssuer>,
    /// Keys that sign messages (`[[signing_key]]`).
    pub signing_keys: Vec<crate::signing::VerifyingKey>,
    /// Topics whose messages must be signed, each with the keys it takes,
    /// in the file's order (the first that matches a topic applies).
    pub signed_topics: Vec<SignedTopic>,
    /// What an unauthenticated client may do, when anonymous access is
    /// allowed; `None`: nothing.
    pub anonymous: Option<Permissions>,
    /// What each linked broker named here may forward in and be forwarded;
    /// a broker not named is limited only by its certificate.
    pub brokers: Vec<BrokerGrant>,
}

/// What one neighbouring broker may forward to this one, and what this
/// one forwards to it, by topic.
#[derive(Debug, Clone)]
pub struct BrokerGrant {
    /// The neighbour's broker name (the name its certificate proves).
    pub name: String,
    /// Topics it may forward here; anything else is dropped on arrival.
    pub forward_in: Vec<TopicFilter>,
    /// Topics forwarded to it; anything else is not sent.
    pub forward_out: Vec<TopicFilter>,
}

impl BrokerGrant {
    /// Whether a message on `topic` may arrive from the neighbour.
    pub fn may_forward_in(&self, topic: &sift_core::TopicName) -> bool {
        self.forward_in.iter().any(|grant| grant.matches(topic))
    }

    /// Whether a message on `topic` may be sent to the neighbour.
    pub fn may_forward_out(&self, topic: &sift_core::TopicName) -> bool {
        self.forward_out.iter().any(|grant| grant.matches(topic))
    }
}

impl UsersFile {
    /// Reads and checks a users file's text.
    pub fn parse(text: &str) -> Result<UsersFile, UsersError> {
        let raw: RawFile = toml::from_str(text).map_err(|error| UsersError::Parse(Box::new(error)))?;
        if raw.user.len() > USERS_MAX {
            let reason = format!("{} users; at most {USERS_MAX}", raw.user.len());
            return Err(UsersError::Invalid { whom: "the file".into(), field: "user", reason });
        }
        let mut names = BTreeSet::new();
        let mut users = Vec::with_capacity(raw.user.len());
        for entry in raw.user {
            let user = entry.user()?;
            if !names.insert(user.name.clone()) {
                let whom = format!("user {:?}", user.name);
                return Err(UsersError::Invalid { whom, field: "name", reason: "named twice".into() });
            }
            users.push(user);
        }
        let anonymous = raw.anonymous.map(RawEntry::anonymous).transpose()?;
        let token_issuers = raw.token_issuer.iter().map(RawKey::issuer).collect::<Result<Vec<_>, _>>()?;
        let signing_keys = signing_keys(&raw.signing_key)?;
        let signed_topics = signed_topics(&signing_keys, &raw.signed_topic)?;
        let brokers = raw.broker.iter().map(RawBroker::grant).collect::<Result<Vec<_>, _>>()?;
        Ok(UsersFile { users, anonymous, token_issuers, signing_keys, signed_topics, brokers })
    }

    /// The user named `name`.
    pub fn user(&self, name: &str) -> Option<&User> {
        self.users.iter().find(|user| user.name == name)
    }
}

/// A topic filter whose messages must be signed by one of `keys`.
#[derive(Debug, Clone)]
pub struct SignedTopic {
    /// The topics it covers.
    pub topic: TopicFilter,
    /// The keys whose signatures it takes.
    pub keys: Vec<crate::signing::VerifyingKey>,
}

/// The `[[signing_key]]`s, checked.
fn signing_keys(keys: &[RawKey]) -> Result<Vec<crate::signing::VerifyingKey>, UsersError> {
    let mut verifying = Vec::with_capacity(keys.len());
    for key in keys {
        let whom = format!("signing key {:?}", key.name);
        let parsed = crate::signing::VerifyingKey::new(&key.name, &key.public_key)
            .map_err(|reason| UsersError::Invalid { whom, field: "public_key", reason })?;
        verifying.push(parsed);
    }
    Ok(verifying)
}

/// The `[[signed_topic]]`s, each with the `verifying` keys it names.
fn signed_topics(
    verifying: &[crate::signing::VerifyingKey],
    topics: &[RawSignedTopic],
) -> Result<Vec<SignedTopic>, UsersError> {
    let mut signed = Vec::with_capacity(topics.len());
    for entry in topics {
        let whom = format!("signed topic {:?}", entry.topic);
        let invalid = |field: &'static str, reason: String| UsersError::Invalid { whom: whom.clone(), field, reason };
        let topic = TopicFilter::new(&entry.topic).map_err(|error| invalid("topic", error.to_string()))?;
        if entry.keys.is_empty() {
            return Err(invalid("keys", "names no key: no message could be published there".into()));
        }
        let mut keys = Vec::with_capacity(entry.keys.len());
        for name in &entry.keys {
            let key = verifying.iter().find(|key| key.name == *name);
            keys.push(key.cloned().ok_or_else(|| invalid("keys", format!("no [[signing_key]] named {name:?}")))?);
        }
        signed.push(SignedTopic { topic, keys });
    }
    Ok(signed)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    user: Vec<RawEntry>,
    anonymous: Option<RawEntry>,
    #[serde(default)]
    token_issuer: Vec<RawKey>,
    #[serde(default)]
    signing_key: Vec<RawKey>,
    #[serde(default)]
    signed_topic: Vec<RawSignedTopic>,
    #[serde(default)]
    broker: Vec<RawBroker>,
}

/// A `[[broker]]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBroker {
    name: String,
    #[serde(default)]
    forward_in: Vec<String>,
    #[serde(default)]
    forward_out: Vec<String>,
}

impl RawBroker {
    fn grant(&self) -> Result<BrokerGrant, UsersError> {
        let whom = format!("broker {:?}", self.name);
        let invalid = |field: &'static str, reason: String| UsersError::Invalid { whom: whom.clone(), field, reason };
        if self.name.is_empty() || self.name.len() > USER_NAME_BYTES_MAX {
            return Err(invalid("name", format!("must be 1 to {USER_NAME_BYTES_MAX} bytes")));
        }
        let filters = |field: &'static str, texts: &[String]| {
            texts
                .iter()
                .map(|text| {
                    TopicFilter::new(text).map_err(|error| invalid(field, format!("topic filter {text:?}: {error}")))
                })
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(BrokerGrant {
            name: self.name.clone(),
            forward_in: filters("forward_in", &self.forward_in)?,
            forward_out: filters("forward_out", &self.forward_out)?,
        })
    }
}

/// A `[[token_issuer]]` or `[[signing_key]]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKey {
    name: String,
    public_key: String,
}

/// A `[[signed_topic]]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSignedTopic {
    topic: String,
    keys: Vec<String>,
}

impl RawKey {
    fn issuer(&self) -> Result<crate::tokens::TokenIssuer, UsersError> {
        let whom = format!("token issuer {:?}", self.name);
        if self.name.is_empty() || self.name.len() > USER_NAME_BYTES_MAX {
            let reason = format!("must be 1 to {USER_NAME_BYTES_MAX} bytes");
            return Err(UsersError::Invalid { whom, field: "name", reason });
        }
        crate::tokens::TokenIssuer::new(&self.name, &self.public_key).map_err(|error| UsersError::Invalid {
            whom,
            field: "public_key",
            reason: error.to_string(),
        })
    }
}

/// A `[[user]]` or the `[anonymous]` entry, as written: the same grants,
/// and for a user its name and hash.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    name: Option<String>,
    password_hash: Option<String>,
    #[serde(default)]
    publish: Vec<String>,
    #[serde(default)]
    subscribe: Vec<RawSubscribe>,
    #[serde(default)]
    streams: Vec<String>,
    #[serde(default)]
    manage_streams: Vec<String>,
    #[serde(default)]
    admin: bool,
    queue_groups: Option<Vec<String>>,
    connections_max: Option<u32>,
    subscriptions_max: Option<u32>,
    publish_msgs_per_s_max: Option<u32>,
    publish_bytes_per_s_max: Option<u64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawSubscribe {
    Topic(String),
    Restricted {
        topic: String,
        #[serde(rename = "where")]
        restriction: String,
        language: Option<String>,
    },
}

impl RawEntry {
    /// The entry as a user: it must have a name.
    fn user(self) -> Result<User, UsersError> {
        let name = self.name.clone().unwrap_or_default();
        let whom = format!("user {name:?}");
        let invalid = |field: &'static str, reason: String| UsersError::Invalid { whom: whom.clone(), field, reason };
        if name.is_empty() || name.len() > USER_NAME_BYTES_MAX {
            return Err(invalid("name", format!("must be 1 to {USER_NAME_BYTES_MAX} bytes")));
        }
        if let Some(hash) = &self.password_hash {
            crate::password::check(hash).map_err(|error| invalid("password_hash", error.to_string()))?;
        }
        let password_hash = self.password_hash.clone();
        let permissions = self.permissions(&whom)?;
        Ok(User { name, password_hash, permissions })
    }

    /// The entry as anonymous access: grants only.
    fn anonymous(self) -> Result<Permissions, UsersError> {
        const WHOM: &str = "[anonymous]";
        if self.name.is_some() || self.password_hash.is_some() {
            let reason = "anonymous access has no name or password".to_string();
            return Err(UsersError::Invalid { whom: WHOM.into(), field: "name", reason });
        }
        if self.limits().any() {
            let reason = "limits count per user; anonymous clients have none to count against".to_string();
            return Err(UsersError::Invalid { whom: WHOM.into(), field: "connections_max", reason });
        }
        self.permissions(WHOM)
    }

    /// The entry's grants, checked: filters, restrictions in their
    /// languages. `whom` names the entry in errors.
    fn permissions(self, whom: &str) -> Result<Permissions, UsersError> {
        let invalid =
            |field: &'static str, reason: String| UsersError::Invalid { whom: whom.to_string(), field, reason };
        let topic = |field: &'static str, text: &str| {
            TopicFilter::new(text).map_err(|error| invalid(field, format!("topic filter {text:?}: {error}")))
        };
        let publish = self.publish.iter().map(|text| topic("publish", text)).collect::<Result<Vec<_>, _>>()?;
        let mut subscribe = Vec::with_capacity(self.subscribe.len());
        for entry in &self.subscribe {
            let grant = match entry {
                RawSubscribe::Topic(text) => SubscribeGrant { topic: topic("subscribe", text)?, restriction: None },
                RawSubscribe::Restricted { topic: text, restriction, language } => {
                    let language = match language.as_deref() {
                        None => FilterLanguage::Sql,
                        Some(name) => name.parse().map_err(|error| invalid("subscribe", format!("{error}")))?,
                    };
                    let parsed = ContentFilter::parse(language, restriction)
                        .map_err(|error| invalid("subscribe", format!("where {restriction:?}: {error}")))?;
                    SubscribeGrant { topic: topic("subscribe", text)?, restriction: Some(Arc::new(parsed)) }
                }
            };
            subscribe.push(grant);
        }
        let limits = self.limits();
        if limits.publish_msgs_per_s_max == Some(0) || limits.publish_bytes_per_s_max == Some(0) {
            let reason = "0 would stop every publish; leave out `publish` grants instead".to_string();
            return Err(invalid("publish_msgs_per_s_max", reason));
        }
        Ok(Permissions {
            publish,
            subscribe,
            read_streams: self.streams,
            manage_streams: self.manage_streams,
            admin: self.admin,
            limits,
            queue_groups: self.queue_groups,
        })
    }

    fn limits(&self) -> UserLimits {
        UserLimits {
            connections_max: self.connections_max,
            subscriptions_max: self.subscriptions_max,
            publish_msgs_per_s_max: self.publish_msgs_per_s_max,
            publish_bytes_per_s_max: self.publish_bytes_per_s_max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permissions::{StreamAction, SubscribeDecision};
    use sift_core::TopicName;

    fn hash() -> String {
        crate::password::hash("secret").expect("hashes")
    }

    #[test]
    fn the_example_of_the_issue_reads_and_decides() {
        let text = format!(
            "[[user]]\nname = \"alice\"\npassword_hash = \"{0}\"\npublish = [\"orders.>\"]\nsubscribe = [\"orders.>\"]\n\n\
             [[user]]\nname = \"bob\"\npassword_hash = \"{0}\"\nsubscribe = [{{ topic = \"orders.>\", where = \"region = 'EU'\" }}]\nstreams = [\"orders\"]\n\n\
             [anonymous]\nsubscribe = [\"public.>\"]\n",
            hash()
        );
        let file = UsersFile::parse(&text).expect("valid");
        let alice = file.user("alice").expect("alice");
        assert!(alice.permissions.may_publish(&TopicName::new("orders.eu").expect("topic")));
        let bob = file.user("bob").expect("bob");
        assert!(!bob.permissions.may_publish(&TopicName::new("orders.eu").expect("topic")));
        let filter = TopicFilter::new("orders.*").expect("filter");
        assert!(matches!(bob.permissions.may_subscribe(&filter), SubscribeDecision::Allowed { restriction: Some(_) }));
        assert!(bob.permissions.may_stream("orders", StreamAction::Read));
        assert!(crate::password::verify("secret", bob.password_hash.as_deref().expect("hash")));
        let anonymous = file.anonymous.expect("anonymous");
        assert!(matches!(
            anonymous.may_subscribe(&TopicFilter::new("public.x").expect("f")),
            SubscribeDecision::Allowed { .. }
        ));
    }

    #[test]
    fn each_fault_names_the_user_and_the_field() {
        let cases = [
            ("[[user]]\nname = \"a\"\npublish = [\"orders..x\"]\n", "user \"a\", publish"),
            (
                "[[user]]\nname = \"a\"\nsubscribe = [{ topic = \"o\", where = \"region = \" }]\n",
                "user \"a\", subscribe",
            ),
            (
                "[[user]]\nname = \"a\"\nsubscribe = [{ topic = \"o\", where = \"x\", language = \"cobol\" }]\n",
                "subscribe",
            ),
            ("[[user]]\nname = \"a\"\npassword_hash = \"hunter2\"\n", "password_hash"),
            ("[[user]]\nname = \"a\"\n[[user]]\nname = \"a\"\n", "named twice"),
            ("[[user]]\nname = \"\"\n", "user \"\", name"),
            ("[anonymous]\nname = \"x\"\n", "[anonymous], name"),
        ];
        for (text, expected) in cases {
            let error = UsersFile::parse(text).expect_err(text).to_string();
            assert!(error.contains(expected), "{text:?} gave {error}");
        }
    }

    #[test]
    fn a_misspelt_key_is_refused_with_its_line() {
        let error =
            UsersFile::parse("[[user]]\nname = \"a\"\npublsh = [\"x\"]\n").expect_err("unknown key").to_string();
        assert!(error.contains("publsh") && error.contains("line 3"), "{error}");
    }
}
