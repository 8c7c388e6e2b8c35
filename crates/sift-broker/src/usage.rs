//! What each user holds and sends across all its sessions, against the
//! limits its entry of the users file sets (`connections_max`,
//! `subscriptions_max`, `publish_msgs_per_s_max`,
//! `publish_bytes_per_s_max`).
//!
//! A session signed in as a limited user holds a [`UsageGuard`]: it counts
//! the session and its subscriptions while it lives, and gives them back
//! when dropped. Publishing rates are token buckets shared by the user's
//! sessions, each holding one second's worth: a publish past the rate
//! reserves its tokens and is told how long to wait, and the session waits
//! before it reads on, so that the publisher is slowed by its own socket
//! and nothing it sent is lost.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sift_auth::UserLimits;

/// A limit a user reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LimitRefusal {
    /// `connections_max` sessions are signed in already.
    #[error("the user already has connections_max = {0} sessions")]
    Connections(u32),
    /// `subscriptions_max` subscriptions are open already.
    #[error("the user already holds subscriptions_max = {0} subscriptions")]
    Subscriptions(u32),
}

/// The users with limits and what each holds; one entry per such user of
/// the users file, so bounded by its size.
#[derive(Debug, Default)]
pub struct Usage {
    users: Mutex<HashMap<Arc<str>, Arc<Mutex<UserUsage>>>>,
}

/// One user's counts and buckets.
#[derive(Debug)]
struct UserUsage {
    limits: UserLimits,
    connections: u32,
    subscriptions: u32,
    messages: Bucket,
    bytes: Bucket,
}

/// A token bucket of one second's worth of a rate.
#[derive(Debug)]
struct Bucket {
    /// May go below zero: publishes that had to wait reserved ahead.
    tokens: f64,
    refreshed: Instant,
}

impl Bucket {
    fn full(rate_per_s: f64, now: Instant) -> Bucket {
        Bucket { tokens: rate_per_s, refreshed: now }
    }

    /// Takes `amount` at `rate_per_s`; the wait until the bucket would
    /// have held it, if it did not.
    fn take(&mut self, amount: f64, rate_per_s: f64, now: Instant) -> Option<Duration> {
        let elapsed_s = now.saturating_duration_since(self.refreshed).as_secs_f64();
        self.tokens = (self.tokens + elapsed_s * rate_per_s).min(rate_per_s);
        self.refreshed = now;
        self.tokens -= amount;
        (self.tokens < 0.0).then(|| Duration::from_secs_f64(-self.tokens / rate_per_s))
    }
}

impl Usage {
    /// Counts a session signed in as `user` under `limits`; `None` when the
    /// user has no limits (nothing to count).
    pub fn admit(&self, user: &Arc<str>, limits: UserLimits) -> Result<Option<UsageGuard>, LimitRefusal> {
        if !limits.any() {
            return Ok(None);
        }
        let now = Instant::now();
        let entry = {
            let mut users = self.users.lock().unwrap_or_else(PoisonError::into_inner);
            users
                .entry(user.clone())
                .or_insert_with(|| {
                    Arc::new(Mutex::new(UserUsage {
                        limits,
                        connections: 0,
                        subscriptions: 0,
                        messages: Bucket::full(limits.publish_msgs_per_s_max.map_or(f64::MAX, f64::from), now),
                        bytes: Bucket::full(limits.publish_bytes_per_s_max.map_or(f64::MAX, |limit| limit as f64), now),
                    }))
                })
                .clone()
        };
        let mut usage = entry.lock().unwrap_or_else(PoisonError::into_inner);
        // A reloaded users file may have changed the limits.
        usage.limits = limits;
        if let Some(limit) = limits.connections_max.filter(|&limit| usage.connections >= limit) {
            return Err(LimitRefusal::Connections(limit));
        }
        usage.connections += 1;
        drop(usage);
        Ok(Some(UsageGuard { usage: entry, subscriptions: 0 }))
    }
}

/// One session's share of its user's usage; gives it back when dropped.
#[derive(Debug)]
pub struct UsageGuard {
    usage: Arc<Mutex<UserUsage>>,
    /// Subscriptions this session counted.
    subscriptions: u32,
}

impl UsageGuard {
    fn lock(&self) -> std::sync::MutexGuard<'_, UserUsage> {
        self.usage.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts one more subscription, or refuses it past `subscriptions_max`.
    pub fn add_subscription(&mut self) -> Result<(), LimitRefusal> {
        let mut usage = self.lock();
        if let Some(limit) = usage.limits.subscriptions_max.filter(|&limit| usage.subscriptions >= limit) {
            return Err(LimitRefusal::Subscriptions(limit));
        }
        usage.subscriptions += 1;
        drop(usage);
        self.subscriptions += 1;
        Ok(())
    }

    /// Gives back one subscription (none if this guard counted none: the
    /// session opened it under an earlier sign-in).
    pub fn remove_subscription(&mut self) {
        if self.subscriptions > 0 {
            self.subscriptions -= 1;
            let mut usage = self.lock();
            usage.subscriptions = usage.subscriptions.saturating_sub(1);
        }
    }

    /// Takes one message of `payload_bytes` from the user's rates; how long
    /// the session must wait before it reads on, if the rate is spent.
    pub fn publish(&self, payload_bytes: usize, now: Instant) -> Option<Duration> {
        let mut usage = self.lock();
        let limits = usage.limits;
        let by_count = limits.publish_msgs_per_s_max.and_then(|limit| usage.messages.take(1.0, f64::from(limit), now));
        let by_bytes =
            limits.publish_bytes_per_s_max.and_then(|limit| usage.bytes.take(payload_bytes as f64, limit as f64, now));
        by_count.max(by_bytes)
    }
}

impl Drop for UsageGuard {
    fn drop(&mut self) {
        let mut usage = self.lock();
        debug_assert!(usage.connections > 0 && usage.subscriptions >= self.subscriptions);
        usage.connections = usage.connections.saturating_sub(1);
        usage.subscriptions = usage.subscriptions.saturating_sub(self.subscriptions);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(connections: u32, subscriptions: u32, messages_per_s: u32) -> UserLimits {
        UserLimits {
            connections_max: Some(connections),
            subscriptions_max: Some(subscriptions),
            publish_msgs_per_s_max: Some(messages_per_s),
            publish_bytes_per_s_max: None,
        }
    }

    #[test]
    fn sessions_and_subscriptions_are_counted_across_a_users_sessions_and_given_back() {
        let usage = Usage::default();
        let alice: Arc<str> = Arc::from("alice");
        let mut first = usage.admit(&alice, limits(2, 3, 100)).expect("first").expect("limited");
        let mut second = usage.admit(&alice, limits(2, 3, 100)).expect("second").expect("limited");
        assert_eq!(usage.admit(&alice, limits(2, 3, 100)).err(), Some(LimitRefusal::Connections(2)));
        first.add_subscription().expect("1");
        second.add_subscription().expect("2");
        second.add_subscription().expect("3");
        assert_eq!(first.add_subscription(), Err(LimitRefusal::Subscriptions(3)));
        drop(second);
        first.add_subscription().expect("the closed session's subscriptions were given back");
        assert!(usage.admit(&alice, limits(2, 3, 100)).expect("a place is free").is_some());
        assert!(usage.admit(&Arc::from("bob"), UserLimits::default()).expect("unlimited").is_none());
    }

    #[test]
    fn a_spent_rate_tells_how_long_to_wait_and_refills_with_time() {
        let usage = Usage::default();
        let guard = usage.admit(&Arc::from("alice"), limits(1, 1, 10)).expect("admitted").expect("limited");
        let start = Instant::now();
        for _ in 0..10 {
            assert_eq!(guard.publish(100, start), None, "one second's worth goes at once");
        }
        let wait = guard.publish(100, start).expect("the eleventh waits");
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "{wait:?}");
        assert_eq!(guard.publish(100, start + Duration::from_millis(1_300)), None, "refilled");
    }
}
