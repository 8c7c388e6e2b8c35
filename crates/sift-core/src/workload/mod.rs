//! Seeded workload generators: the subscriptions and messages of the
//! experiments in the source documents, for the benchmarks and `sift bench`.
//!
//! - [`ges`]: the Grid Event Service matching-rate experiment (GES thesis
//!   §8.2.1): events of 6 tag=value pairs, profiles that share the first 3
//!   and choose the matching rate (100/50/25/10 %) with the 4th.
//! - [`jbi`]: the AFRL JBI content-based routing workload (JBI report §6,
//!   Fig. 11-12): `ato`, `basic` and `xmlxpath` objects whose XML metadata
//!   XPath subscriptions test with randomly chosen fields and values.
//! - [`selectors`]: JMS selectors `sym = 'S' AND price > N` over 1,000
//!   symbols, where a quote matches about 0.05 % of the subscriptions.
//!
//! Every generator is deterministic for a seed: subscription `i` and message
//! `i` are functions of the seed and `i` alone, so callers can generate them
//! in any order, in parallel, or again later and get the same ones. The
//! subscriptions and the messages come from different random streams of the
//! seed, as the JBI report's publishers and subscribers had different seeds
//! (§6), so that every match comes from the filters and not from a shared
//! sequence. The streams are `fastrand`'s generator, so a seed gives the same
//! workload for as long as the lock file keeps the same `fastrand`.
//!
//! Like the rest of this crate, nothing here does I/O.

pub mod ges;
pub mod jbi;
pub mod selectors;

mod seed;
mod text;

pub use ges::GesWorkload;
pub use jbi::{JbiWorkload, ObjectType};
pub use selectors::SelectorsWorkload;

use crate::message::Message;
use crate::topic::TopicError;

/// The name of the `tags` content-filter language, as the broker and the
/// command line spell it.
pub const LANGUAGE_TAGS: &str = "tags";

/// The name of the JMS selector (`sql`) content-filter language.
pub const LANGUAGE_SQL: &str = "sql";

/// The name of the XPath content-filter language.
pub const LANGUAGE_XPATH: &str = "xpath";

/// One generated subscription: `(topic_filter, language, filter_text)`.
///
/// A plain tuple rather than a subscription type of the broker or the
/// client, so that this crate stays independent of both: the topic filter is
/// text for [`crate::TopicFilter::new`], the language one of
/// [`LANGUAGE_TAGS`], [`LANGUAGE_SQL`] and [`LANGUAGE_XPATH`], and the filter
/// text is for the content-filter parser of that language.
pub type Subscription = (String, &'static str, String);

/// What every workload offers, so that a benchmark can run any of them:
/// subscription `index` and message `index`, each a function of the seed
/// and the index alone.
pub trait Workload {
    /// Subscription `index`.
    fn subscription(&self, index: u64) -> Subscription;

    /// Message `index`.
    fn message(&self, index: u64) -> Message;
}

/// Why a workload cannot be built with the parameters given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    /// GES matching rates are percentages from 1 to 100.
    #[error("matching rate {percent} % is outside 1-100 %")]
    MatchingRate {
        /// The rate asked for.
        percent: u32,
    },
    /// A topic the workload publishes on is invalid.
    #[error(transparent)]
    Topic(#[from] TopicError),
}
