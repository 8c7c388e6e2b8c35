//! Why a topology file could not be read, is invalid, or its network could
//! not be started. Every message says what is wrong and where in the file.

use std::path::PathBuf;

use sift_net::{LinkStateError, BROKER_NAME_BYTES_MAX};

use crate::server::BrokerError;

/// What is wrong with the text of a topology.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// The text is not TOML, or does not have the shape of a topology.
    #[error("not a valid topology: {source}")]
    Parse {
        /// The parser's explanation, with line and column.
        source: Box<toml::de::Error>,
    },
    /// The `brokers` list is empty.
    #[error("the topology lists no brokers")]
    NoBrokers,
    /// A broker name is empty or too long to travel in link frames.
    #[error("{place}: broker name {name:?} must be 1 to {BROKER_NAME_BYTES_MAX} bytes long")]
    BadBrokerName {
        /// Where the name is, such as `brokers entry 3`.
        place: String,
        /// The name.
        name: String,
    },
    /// Two brokers have the same name.
    #[error("broker {name:?} is listed twice, at {first} and at {second}")]
    DuplicateBroker {
        /// The name.
        name: String,
        /// The first entry with it.
        first: String,
        /// The later entry with it.
        second: String,
    },
    /// A link names a broker that the `brokers` list does not hold.
    #[error("{place}: broker {name:?} is not among the topology's brokers")]
    UnknownBroker {
        /// Where the link is, such as `links entry 4`.
        place: String,
        /// The unknown name.
        name: String,
    },
    /// A link joins a broker to itself.
    #[error("{place}: links broker {name:?} to itself")]
    SelfLink {
        /// Where the link is.
        place: String,
        /// The broker.
        name: String,
    },
    /// The same pair of brokers is linked twice (in either order).
    #[error("{place}: the link {left} - {right} is already given at {first}")]
    DuplicateLink {
        /// Where the second link is.
        place: String,
        /// Where the first one is.
        first: String,
        /// One end.
        left: String,
        /// The other end.
        right: String,
    },
    /// A link has cost 0, which the broker refuses.
    #[error("{place}: the cost of link {left} - {right} must be at least 1")]
    ZeroCost {
        /// Where the link is.
        place: String,
        /// One end.
        left: String,
        /// The other end.
        right: String,
    },
    /// A variant removes a link that the base topology does not have.
    #[error("{place}: cannot remove {left} - {right}, which is not a link of the base topology")]
    NotALink {
        /// Where the removal is.
        place: String,
        /// One end.
        left: String,
        /// The other end.
        right: String,
    },
    /// A variant was asked for that the file does not define.
    #[error("no variant {name:?} in the topology (variants: {known})")]
    UnknownVariant {
        /// The name asked for.
        name: String,
        /// The variants defined, comma-separated, or `none`.
        known: String,
    },
    /// The routing core refused a broker's links (more than it accepts).
    #[error("the routing core refuses the topology: {0}")]
    Routing(#[from] LinkStateError),
}

/// Why a topology file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TopologyFileError {
    /// The file could not be read.
    #[error("cannot read topology file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file was read but its content is invalid.
    #[error("topology file {path}: {source}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        source: TopologyError,
    },
}

/// Why the brokers of a topology could not all be started.
#[derive(Debug, thiserror::Error)]
pub enum NetworkStartError {
    /// The variant asked for is unknown, or the links are refused.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// One broker failed to start; the ones started before it were shut down.
    #[error("cannot start broker {broker:?} of the topology: {source}")]
    Broker {
        /// The broker's name.
        broker: String,
        /// Why it did not start.
        source: BrokerError,
    },
}
