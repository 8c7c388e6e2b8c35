//! The queries an `ADMIN` frame can ask.

/// What an `ADMIN` frame asks the broker to describe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AdminQuery {
    /// The broker's links to other brokers and their traffic.
    Links,
    /// The brokers reachable from this one, and everyone's interest.
    Routes,
    /// Every broker-wide counter.
    Stats,
    /// Every client connection with its subscriptions, filters and queues.
    Subscriptions,
}

impl AdminQuery {
    /// Every query, in wire-code order.
    pub const ALL: [AdminQuery; 4] =
        [AdminQuery::Links, AdminQuery::Routes, AdminQuery::Stats, AdminQuery::Subscriptions];

    /// Wire code.
    pub fn code(self) -> u8 {
        match self {
            AdminQuery::Links => 1,
            AdminQuery::Routes => 2,
            AdminQuery::Stats => 3,
            AdminQuery::Subscriptions => 4,
        }
    }

    /// Query for a wire code.
    pub fn from_code(code: u8) -> Option<AdminQuery> {
        AdminQuery::ALL.into_iter().find(|query| query.code() == code)
    }

    /// Name as used on the command line and in replies.
    pub fn name(self) -> &'static str {
        match self {
            AdminQuery::Links => "links",
            AdminQuery::Routes => "routes",
            AdminQuery::Stats => "stats",
            AdminQuery::Subscriptions => "subscriptions",
        }
    }
}

impl std::str::FromStr for AdminQuery {
    type Err = String;

    /// Parses `links`, `routes`, `stats` or `subscriptions`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        AdminQuery::ALL
            .into_iter()
            .find(|query| query.name() == text)
            .ok_or_else(|| format!("unknown admin query {text:?}: expected links, routes, stats or subscriptions"))
    }
}

impl std::fmt::Display for AdminQuery {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.name())
    }
}
