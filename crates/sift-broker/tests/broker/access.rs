//! Sign-in and permissions through real sockets: a users file, `AUTH`,
//! and each action refused or allowed, with nothing outside a user's
//! grants ever arriving (sentinels, not quiet periods).

use sift_client::{Client, ClientError, ClientOptions, Credentials, FilterKind, PublishOptions, SubscribeOptions};
use sift_core::Value;
use sift_proto::{AdminQuery, ErrorCode, Frame};

use crate::common::*;

const ALICE_PASSWORD: &str = "wonderland";
const BOB_PASSWORD: &str = "builder";

/// A users file: alice publishes and reads `orders.>`; bob reads
/// `orders.>` only where `region = 'EU'`; anonymous reads `public.>`.
fn users_file() -> std::path::PathBuf {
    let alice = sift_auth::password::hash(ALICE_PASSWORD).expect("hash");
    let bob = sift_auth::password::hash(BOB_PASSWORD).expect("hash");
    let text = format!(
        r#"
[[user]]
name = "alice"
password_hash = "{alice}"
publish = ["orders.>", "public.>"]
subscribe = ["orders.>"]
streams = ["orders"]
admin = true

[[user]]
name = "bob"
password_hash = "{bob}"
subscribe = [{{ topic = "orders.>", where = "region = 'EU'" }}]

[anonymous]
subscribe = ["public.>"]
"#
    );
    let path =
        std::env::temp_dir().join(format!("sift-users-{}-{}.toml", std::process::id(), sift_core::system_now_ns()));
    std::fs::write(&path, text).expect("users file written");
    path
}

async fn locked_broker() -> sift_broker::RunningBroker {
    let users = users_file();
    broker_with(|config| {
        config.auth.users_file = Some(users);
        config.auth.failure_delay_ms_min = 0;
        config.auth.failure_delay_ms_max = 0;
    })
    .await
}

async fn signed_in(broker: &sift_broker::RunningBroker, user: &str, password: &str) -> Result<Client, ClientError> {
    let options = ClientOptions {
        name: user.into(),
        reconnect: false,
        credentials: Some(Credentials::password(user, password)),
        ..ClientOptions::default()
    };
    Client::connect(broker.local_addr().to_string(), options).await
}

fn order(payload: &str, region: &str) -> sift_core::Message {
    let mut message = message("orders.new", payload);
    message.properties = vec![("region".to_string(), Value::Str(region.into()))];
    message
}

fn refused_with(result: Result<impl std::fmt::Debug, ClientError>, expected: ErrorCode) {
    match result {
        Err(ClientError::Refused { code, .. }) => assert_eq!(code, expected),
        other => panic!("refused with {expected}, got {other:?}"),
    }
}

#[tokio::test]
async fn a_wrong_password_or_unknown_user_is_refused_and_counted() {
    let broker = locked_broker().await;
    refused_with(signed_in(&broker, "alice", "looking glass").await, ErrorCode::AuthFailed);
    refused_with(signed_in(&broker, "mallory", ALICE_PASSWORD).await, ErrorCode::AuthFailed);
    let alice = signed_in(&broker, "alice", ALICE_PASSWORD).await.expect("alice signs in");
    alice.close().await;
    let stats = broker.stats();
    assert_eq!((stats.auth_failures, stats.auth_sign_ins), (2, 1));
}

#[tokio::test]
async fn a_client_that_does_not_sign_in_gets_the_anonymous_grants_only() {
    let broker = locked_broker().await;
    let anonymous = client(&broker, "anonymous").await;
    refused_with(anonymous.subscribe(SubscribeOptions::new("orders.>")).await, ErrorCode::PermissionDenied);
    let mut public = anonymous.subscribe(SubscribeOptions::new("public.>")).await.expect("public is open");
    let confirmed = anonymous.publish_confirmed(message("public.news", "x"), PublishOptions::default()).await;
    refused_with(confirmed, ErrorCode::PermissionDenied);
    refused_with(anonymous.admin(AdminQuery::Stats).await, ErrorCode::PermissionDenied);
    let alice = signed_in(&broker, "alice", ALICE_PASSWORD).await.expect("alice signs in");
    alice.publish_confirmed(message("public.news", "from alice"), PublishOptions::default()).await.expect("allowed");
    assert_next_is(&mut public, "from alice", "anonymous reads public.>").await;
    assert!(broker.stats().permission_denials >= 3);
}

#[tokio::test]
async fn a_broker_without_anonymous_access_closes_a_session_that_acts_before_signing_in() {
    let users = users_file();
    let text = std::fs::read_to_string(&users).expect("read");
    let without_anonymous = text.split("[anonymous]").next().expect("users part").to_string();
    std::fs::write(&users, without_anonymous).expect("rewritten");
    let broker = broker_with(|config| config.auth.users_file = Some(users)).await;
    let mut raw = Raw::handshake(&broker).await;
    raw.send(&Frame::Ping { nonce: 7 }).await;
    assert!(matches!(raw.recv().await, Some(Frame::Pong { nonce: 7 })), "upkeep is allowed before AUTH");
    raw.send(&Frame::Unsubscribe { sub_id: 1 }).await;
    let errors = errors(&raw.recv_until_closed().await);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].fatal && errors[0].code == ErrorCode::AuthRequired, "{errors:?}");
    assert_eq!(broker.stats().auth_required_closes, 1);
}

#[tokio::test]
async fn a_restricted_grant_is_anded_with_every_subscription_of_the_user() {
    let broker = locked_broker().await;
    let alice = signed_in(&broker, "alice", ALICE_PASSWORD).await.expect("alice signs in");
    let bob = signed_in(&broker, "bob", BOB_PASSWORD).await.expect("bob signs in");
    refused_with(bob.subscribe(SubscribeOptions::new(">")).await, ErrorCode::PermissionDenied);
    let mut everything = bob.subscribe(SubscribeOptions::new("orders.>")).await.expect("covered");
    let mut own_filter = bob
        .subscribe(SubscribeOptions::new("orders.new").filter(FilterKind::Sql, "amount > 10"))
        .await
        .expect("covered");
    let mut amounts = Vec::new();
    for (payload, region, amount) in [("us-big", "US", 50), ("eu-small", "EU", 5), ("eu-big", "EU", 50)] {
        let mut message = order(payload, region);
        message.properties.push(("amount".to_string(), Value::Int(amount)));
        amounts.push(message);
    }
    for message in amounts {
        alice.publish_confirmed(message, PublishOptions::default()).await.expect("alice may publish");
    }
    let mut sentinel = order(SENTINEL, "EU");
    sentinel.properties.push(("amount".to_string(), Value::Int(99)));
    alice.publish_confirmed(sentinel, PublishOptions::default()).await.expect("sentinel");
    assert_eq!(texts_until(&mut everything, SENTINEL).await, ["eu-small", "eu-big"], "only the EU orders");
    assert_eq!(texts_until(&mut own_filter, SENTINEL).await, ["eu-big"], "EU and bob's own filter");
    refused_with(
        bob.publish_confirmed(order("forged", "EU"), PublishOptions::default()).await,
        ErrorCode::PermissionDenied,
    );
}

/// A users file whose alice may also sign in with tokens of issuer "ops".
fn users_file_with_issuer(public_key: &str) -> std::path::PathBuf {
    users_file_plus(&format!("[[token_issuer]]\nname = \"ops\"\npublic_key = \"{public_key}\"\n"))
}

/// [`users_file`] with `extra` TOML after it.
fn users_file_plus(extra: &str) -> std::path::PathBuf {
    let users = users_file();
    let mut text = std::fs::read_to_string(&users).expect("read");
    text.push('\n');
    text.push_str(extra);
    std::fs::write(&users, text).expect("rewritten");
    users
}

/// A user `name` whose password is its name, with `grants` (TOML lines).
fn user_entry(name: &str, grants: &str) -> String {
    let hash = sift_auth::password::hash(name).expect("hash");
    format!("[[user]]\nname = \"{name}\"\npassword_hash = \"{hash}\"\n{grants}")
}

fn token(private: &str, issuer: &str, user: &str, exp_from_now_s: i64) -> Credentials {
    let now_s = sift_core::system_now_ns() / 1_000_000_000;
    let exp = now_s.saturating_add_signed(exp_from_now_s);
    let claims = sift_auth::tokens::Claims { iss: issuer.into(), sub: user.into(), exp, nbf: None, iat: Some(now_s) };
    Credentials::token(sift_auth::tokens::issue(&claims, private).expect("signed"))
}

#[tokio::test]
async fn a_bearer_token_of_a_trusted_issuer_signs_its_user_in_and_others_are_refused() {
    let (private, public) = sift_auth::tokens::generate_key().expect("key pair");
    let (forger, _) = sift_auth::tokens::generate_key().expect("key pair");
    let users = users_file_with_issuer(&public);
    let broker = broker_with(|config| {
        config.auth.users_file = Some(users);
        config.auth.failure_delay_ms_min = 0;
        config.auth.failure_delay_ms_max = 0;
    })
    .await;
    let with = |credentials: Credentials| ClientOptions {
        reconnect: false,
        credentials: Some(credentials),
        ..ClientOptions::default()
    };
    let address = broker.local_addr().to_string();
    let alice = Client::connect(address.as_str(), with(token(&private, "ops", "alice", 60))).await.expect("token");
    let mut orders = alice.subscribe(SubscribeOptions::new("orders.>")).await.expect("alice reads orders");
    refused_with(alice.subscribe(SubscribeOptions::new("payroll.>")).await, ErrorCode::PermissionDenied);
    alice.publish(message("orders.new", "by token")).await.expect("publish");
    assert_next_is(&mut orders, "by token", "alice's grants come with her token").await;
    for (credentials, why) in [
        (token(&private, "ops", "alice", -1), "expired"),
        (token(&forger, "ops", "alice", 60), "signature does not verify"),
        (token(&private, "elsewhere", "alice", 60), "not trusted"),
        (token(&private, "ops", "mallory", 60), "no user"),
    ] {
        match Client::connect(address.as_str(), with(credentials)).await {
            Err(ClientError::Refused { code, message }) => {
                assert_eq!(code, ErrorCode::AuthFailed);
                assert!(message.contains(why), "{why} missing from {message}");
            }
            other => panic!("a token that is {why} must be refused, got {other:?}"),
        }
    }
    assert_eq!(broker.stats().auth_failures, 4);
    alice.close().await;
}

#[tokio::test]
async fn a_users_limits_count_across_its_sessions_and_a_spent_rate_slows_without_losing() {
    let grants = "publish = [\"orders.>\"]\nsubscribe = [\"orders.>\"]\n\
                  connections_max = 1\nsubscriptions_max = 2\npublish_msgs_per_s_max = 50\n";
    let users = users_file_plus(&user_entry("carol", grants));
    let broker = broker_with(|config| config.auth.users_file = Some(users)).await;
    let first = signed_in(&broker, "carol", "carol").await.expect("carol's first session");
    let second = signed_in(&broker, "carol", "carol").await;
    assert!(second.is_err(), "connections_max = 1: {second:?}");
    let one = first.subscribe(SubscribeOptions::new("orders.a")).await.expect("first subscription");
    let _two = first.subscribe(SubscribeOptions::new("orders.b")).await.expect("second subscription");
    refused_with(first.subscribe(SubscribeOptions::new("orders.c")).await, ErrorCode::TooManySubscriptions);
    // Frames of one connection are handled in order: the UNSUBSCRIBE gives
    // the place back before the next SUBSCRIBE asks for it.
    one.unsubscribe().await.expect("unsubscribe");
    first.subscribe(SubscribeOptions::new("orders.c")).await.expect("the place was given back");
    assert!(broker.stats().user_limit_refusals >= 2);

    let alice = signed_in(&broker, "alice", ALICE_PASSWORD).await.expect("alice signs in");
    let mut orders = alice.subscribe(SubscribeOptions::new("orders.rate")).await.expect("subscribe");
    let expected: Vec<String> = (0..120).map(|index| format!("m{index}")).collect();
    for payload in &expected {
        first.publish(message("orders.rate", payload)).await.expect("publish");
    }
    assert_eq!(texts(&mut orders, expected.len()).await, expected, "slowed, nothing lost, in order");
    assert!(broker.stats().publishes_throttled > 0, "120 messages at 50/s must have waited");
}

#[tokio::test]
async fn a_user_joins_only_the_queue_groups_it_is_granted() {
    let users = users_file_plus(&user_entry("dora", "subscribe = [\"orders.>\"]\nqueue_groups = [\"workers\"]\n"));
    let broker = broker_with(|config| config.auth.users_file = Some(users)).await;
    let dora = signed_in(&broker, "dora", "dora").await.expect("dora signs in");
    dora.subscribe(SubscribeOptions::new("orders.>").queue_group("workers")).await.expect("granted group");
    refused_with(
        dora.subscribe(SubscribeOptions::new("orders.>").queue_group("payroll")).await,
        ErrorCode::PermissionDenied,
    );
    dora.subscribe(SubscribeOptions::new("orders.new")).await.expect("no group needs no group grant");
    let alice = signed_in(&broker, "alice", ALICE_PASSWORD).await.expect("alice signs in");
    alice.subscribe(SubscribeOptions::new("orders.>").queue_group("payroll")).await.expect("no list: any group");
}
