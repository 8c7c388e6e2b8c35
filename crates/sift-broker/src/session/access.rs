//! `AUTH`, and the permission check every other request passes: the one
//! place where the broker decides what a session may do, whatever door it
//! came by.
//!
//! A session starts with the broker's initial standing
//! ([`crate::access::Access::initial`]): everything on an open broker, the
//! `[anonymous]` entry's permissions, or nothing until it signs in. An
//! `AUTH` is checked off the async threads (argon2id costs tens of
//! milliseconds) while the session reads nothing else, so the frames that
//! follow it are judged by its outcome. A refusal answers in the
//! protocol's words (`ERROR permission_denied`, which every door
//! translates into its own), is counted in `permission_denials` and
//! written to the audit log (target `sift::audit`) with user, door, peer,
//! action and topic; it ends nothing but the request.

use std::sync::Arc;

use sift_auth::{StreamAction, SubscribeDecision};
use sift_core::{TopicFilter, TopicName};
use sift_filter::ContentFilter;
use sift_proto::{Auth, ErrorCode, Frame, ManageOp};

use crate::access::Standing;
use crate::conn::error_frame;
use crate::session::Session;
use crate::stats::bump;

/// Something a session asks to do, as the permission check and the audit
/// log name it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Action<'a> {
    /// Publish on a topic.
    Publish(&'a TopicName),
    /// Replay, query or read a stream durably.
    ReadStream(&'a str),
    /// Add, change or remove a stream or its durables.
    ManageStream(&'a str),
    /// Read the admin reports.
    Admin,
    /// Join a queue group.
    JoinGroup(&'a str),
}

impl Action<'_> {
    fn verb(&self) -> &'static str {
        match self {
            Action::Publish(_) => "publish on",
            Action::ReadStream(_) => "read stream",
            Action::ManageStream(_) => "manage stream",
            Action::Admin => "read",
            Action::JoinGroup(_) => "join queue group",
        }
    }

    fn target(&self) -> &str {
        match self {
            Action::Publish(topic) => topic.as_str(),
            Action::ReadStream(stream) | Action::ManageStream(stream) => stream,
            Action::Admin => "the admin reports",
            Action::JoinGroup(group) => group,
        }
    }
}

/// True for the frames a session may send before it signs in on a broker
/// that requires it: the sign-in itself and the connection's upkeep.
pub(crate) fn allowed_before_sign_in(frame: &Frame) -> bool {
    matches!(
        frame,
        Frame::Auth(_) | Frame::Ping { .. } | Frame::Pong { .. } | Frame::Time { .. } | Frame::Close | Frame::Error(_)
    )
}

impl Session {
    /// True when the session may do `action`; otherwise refuses it (a
    /// non-fatal `ERROR` with `reference`), counts and logs the denial.
    pub(crate) fn permits(&self, action: Action<'_>, reference: u64) -> bool {
        let allowed = self.allows(action);
        if !allowed {
            self.deny(action.verb(), action.target(), reference);
        }
        allowed
    }

    /// Whether the session may do `action`, refusing nothing.
    fn allows(&self, action: Action<'_>) -> bool {
        match &self.standing {
            Standing::Open { .. } => true,
            Standing::MustSignIn => false,
            Standing::Limited { permissions, .. } => match action {
                Action::Publish(topic) => permissions.may_publish(topic),
                Action::ReadStream(stream) => permissions.may_stream(stream, StreamAction::Read),
                Action::ManageStream(stream) => permissions.may_stream(stream, StreamAction::Manage),
                Action::Admin => permissions.may_admin(),
                Action::JoinGroup(group) => permissions.may_join_group(group),
            },
        }
    }

    /// Whether the session may read `stream`, without refusing anything:
    /// what the stream and durable lists show it.
    pub(crate) fn may_read_quietly(&self, stream: &str) -> bool {
        self.allows(Action::ReadStream(stream))
    }

    /// Whether a `MANAGE` request is allowed: adding or removing a stream
    /// or a durable manages the stream, describing one reads it, and the
    /// lists are cut to what the session may read. Refuses it otherwise.
    pub(crate) fn may_manage(&self, request_id: u64, op: ManageOp, body: &str) -> bool {
        if matches!(self.standing, Standing::Open { .. }) || matches!(op, ManageOp::StreamLs | ManageOp::DurableLs) {
            return true;
        }
        let name = serde_json::from_str::<serde_json::Value>(body)
            .ok()
            .and_then(|request| request.get("name").and_then(serde_json::Value::as_str).map(str::to_string));
        // A request without a name is refused by the request's own check.
        let Some(name) = name else { return true };
        let durable_stream = || self.shared.storage.durable(&name).map(|consumer| consumer.stream.name().to_string());
        match op {
            ManageOp::StreamAdd | ManageOp::StreamRm | ManageOp::StreamMembers => {
                self.permits(Action::ManageStream(&name), request_id)
            }
            ManageOp::StreamInfo => self.permits(Action::ReadStream(&name), request_id),
            ManageOp::DurableInfo | ManageOp::DurableRm => match durable_stream() {
                // An unknown durable is refused as unknown.
                None => true,
                Some(stream) if op == ManageOp::DurableInfo => self.permits(Action::ReadStream(&stream), request_id),
                Some(stream) => self.permits(Action::ManageStream(&stream), request_id),
            },
            ManageOp::StreamLs | ManageOp::DurableLs => true,
            ManageOp::QueueDeclare => self.may_declare_queue(&name, request_id),
        }
    }

    /// A queue may be declared by whoever may send to it or read it: its
    /// stream is the broker's, not the user's to manage.
    fn may_declare_queue(&self, name: &str, request_id: u64) -> bool {
        let Ok(topic) = sift_core::TopicName::new(name) else { return true }; // refused as a bad topic
        let readable = match &self.standing {
            Standing::Limited { permissions, .. } => TopicFilter::new(name).is_ok_and(|filter| {
                matches!(permissions.may_subscribe(&filter), SubscribeDecision::Allowed { restriction: None })
            }),
            _ => false,
        };
        readable || self.permits(Action::Publish(&topic), request_id)
    }

    /// Whether a subscription to `filter` is allowed: `Some(restriction)`
    /// when it is (the restriction its grant carries, if any), `None`
    /// after refusing it.
    pub(crate) fn subscribe_grant(&self, filter: &TopicFilter, reference: u64) -> Option<Option<Arc<ContentFilter>>> {
        let decision = match &self.standing {
            Standing::Open { .. } => SubscribeDecision::Allowed { restriction: None },
            Standing::MustSignIn => SubscribeDecision::Denied,
            Standing::Limited { permissions, .. } => permissions.may_subscribe(filter),
        };
        match decision {
            SubscribeDecision::Allowed { restriction } => Some(restriction),
            SubscribeDecision::Denied => {
                self.deny("subscribe to", filter.as_str(), reference);
                None
            }
        }
    }

    fn deny(&self, verb: &str, target: &str, reference: u64) {
        bump(&self.shared.stats.permission_denials);
        let user = self.standing.user().unwrap_or("anonymous");
        tracing::info!(
            target: "sift::audit",
            user,
            door = %self.conn.door,
            peer = %self.conn.peer,
            action = verb,
            on = target,
            "denied"
        );
        self.refuse(ErrorCode::PermissionDenied, reference, format!("{user} may not {verb} {target}"));
    }

    /// Closes a session that acted before signing in on a broker that
    /// requires it. Returns false: the reader stops.
    pub(crate) fn refuse_unsigned(&self, frame: &Frame) -> bool {
        bump(&self.shared.stats.auth_required_closes);
        let message = format!(
            "{} before AUTH: this broker admits only signed-in clients (give a user name and password)",
            frame.name()
        );
        tracing::info!(target: "sift::audit", door = %self.conn.door, peer = %self.conn.peer, "closed before sign-in");
        self.conn.close(Some(error_frame(ErrorCode::AuthRequired, 0, true, message)));
        false
    }

    /// Whether `publish` carries the signature its topic requires; if not,
    /// it is refused with `bad_signature` (counted, and written to the
    /// audit log), and the session goes on.
    pub(crate) fn signed_as_required(&self, publish: &sift_proto::Publish) -> bool {
        let Err(error) = self.shared.access.check_signature(&publish.message) else { return true };
        bump(&self.shared.stats.signature_refusals);
        let topic = publish.message.topic.as_str();
        let user = self.standing.user().unwrap_or("anonymous");
        tracing::info!(target: "sift::audit", user, door = %self.conn.door, peer = %self.conn.peer, topic, %error, "unsigned or forged message refused");
        self.refuse(ErrorCode::BadSignature, publish.request_id, format!("{topic}: {error}"));
        false
    }

    /// Counts the session against its user's limits (after the standing
    /// changed), giving back what an earlier standing held; past the
    /// user's `connections_max` the session is closed with a fatal
    /// `ERROR too_many_connections`. Returns false when the reader must stop.
    pub(crate) fn take_usage(&mut self) -> bool {
        self.usage = None;
        let Standing::Limited { user: Some(user), permissions } = &self.standing else { return true };
        match self.shared.usage.admit(user, permissions.limits) {
            Ok(guard) => {
                self.usage = guard;
                true
            }
            Err(refusal) => {
                bump(&self.shared.stats.user_limit_refusals);
                tracing::info!(target: "sift::audit", user = %user, door = %self.conn.door, peer = %self.conn.peer, %refusal, "session refused");
                self.conn.close(Some(error_frame(ErrorCode::TooManyConnections, 0, true, refusal.to_string())));
                false
            }
        }
    }

    /// Checks an `AUTH` and takes its standing, or refuses it: a refusal
    /// waits (longer for each recent failure on the name), then closes the
    /// session with a fatal `ERROR auth_failed`. Returns false when the
    /// reader must stop.
    pub(crate) async fn sign_in(&mut self, auth: Auth) -> bool {
        let request_id = auth.request_id;
        let user = auth.user.clone();
        if auth.method == sift_proto::AuthMethod::Certificate && self.conn.door == crate::door::Door::Native {
            // Only a front-end of this process, which checked the
            // certificate in its TLS handshake, may assert its name.
            bump(&self.shared.stats.auth_failures);
            let message = "sign-in by certificate is asserted by the broker's own front-ends, not by clients";
            self.conn.close(Some(error_frame(ErrorCode::AuthFailed, request_id, true, message.to_string())));
            return false;
        }
        match self.shared.check_sign_in(auth).await {
            Ok(standing) => {
                bump(&self.shared.stats.auth_sign_ins);
                let name = standing.user().unwrap_or_default().to_string();
                tracing::info!(target: "sift::audit", user = %name, door = %self.conn.door, peer = %self.conn.peer, "signed in");
                self.standing = standing;
                if !self.take_usage() {
                    return false;
                }
                self.conn.send_control(&Frame::AuthOk { request_id, user: name });
                true
            }
            Err(refusal) => {
                tracing::info!(target: "sift::audit", user = %user, door = %self.conn.door, peer = %self.conn.peer, "sign-in refused");
                self.conn.close(Some(error_frame(ErrorCode::AuthFailed, request_id, true, refusal.to_string())));
                false
            }
        }
    }
}
