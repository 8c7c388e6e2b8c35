//! The content-filter languages a subscription can be written in.

/// A content-filter language: tags, JMS SQL selectors, regular expressions
/// over the topic, or XPath over the metadata document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FilterLanguage {
    /// Comma-separated `name OP value` predicates that must all hold.
    Tags,
    /// Jakarta Messaging (JMS 2.0) message selectors.
    Sql,
    /// A regular expression over the message topic.
    Regex,
    /// XPath 1.0 over the message's XML metadata document.
    Xpath,
}

impl FilterLanguage {
    /// The name used on the command line, on the wire and in error messages.
    pub fn name(self) -> &'static str {
        match self {
            FilterLanguage::Tags => "tags",
            FilterLanguage::Sql => "sql",
            FilterLanguage::Regex => "regex",
            FilterLanguage::Xpath => "xpath",
        }
    }
}

impl std::fmt::Display for FilterLanguage {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.name())
    }
}

/// The name given is not one of the known filter languages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown filter language {0:?}: expected tags, sql, regex or xpath")]
pub struct UnknownLanguage(pub String);

impl std::str::FromStr for FilterLanguage {
    type Err = UnknownLanguage;

    /// Parses a language name; case does not matter, so `SQL` is `sql`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.eq_ignore_ascii_case("tags") {
            Ok(FilterLanguage::Tags)
        } else if text.eq_ignore_ascii_case("sql") {
            Ok(FilterLanguage::Sql)
        } else if text.eq_ignore_ascii_case("regex") {
            Ok(FilterLanguage::Regex)
        } else if text.eq_ignore_ascii_case("xpath") {
            Ok(FilterLanguage::Xpath)
        } else {
            Err(UnknownLanguage(text.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_from_str() {
        for language in [FilterLanguage::Tags, FilterLanguage::Sql, FilterLanguage::Regex, FilterLanguage::Xpath] {
            assert_eq!(language.name().parse::<FilterLanguage>(), Ok(language));
            assert_eq!(language.to_string(), language.name());
        }
        assert_eq!("SQL".parse::<FilterLanguage>(), Ok(FilterLanguage::Sql));
        assert_eq!("xquery".parse::<FilterLanguage>(), Err(UnknownLanguage("xquery".to_string())));
    }
}
