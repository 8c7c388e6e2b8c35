//! What the command line tells a user beyond "it failed": a caret under
//! the spot of a filter error, a warning when a topic is written in
//! another broker's syntax, and client names a dashboard can tell apart.

use sift_client::{ClientError, FilterKind};

use crate::CliError;

/// The name a command's connection gives the broker: the user's `--name`,
/// else the command and this process's id (`sift-sub-4242`), so that the
/// admin reports and the dashboard tell two `sift sub`s apart.
pub fn client_name(command: &str, given: Option<&str>) -> String {
    match given {
        Some(name) => name.to_string(),
        None => format!("sift-{command}-{}", std::process::id()),
    }
}

/// A warning for a topic written as MQTT or AMQP write them: Sift
/// separates tokens with `.` and its wildcards are `*` and `>`, so
/// `quotes/#` is one literal token and matches nothing the user meant.
pub fn topic_warning(flag: &str, topic: &str) -> Option<String> {
    if !topic.contains(['/', '#', '+']) {
        return None;
    }
    let suggestion: String = topic
        .split('/')
        .map(|token| match token {
            "#" => ">",
            "+" => "*",
            other => other,
        })
        .collect::<Vec<_>>()
        .join(".");
    Some(format!(
        "warning: {flag} {topic:?}: Sift separates topic tokens with `.` and its wildcards are `*` (one token) \
         and `>` (the rest); did you mean {suggestion:?}?"
    ))
}

/// Prints [`topic_warning`]'s warning, if any, on standard error.
pub fn warn_about_topic(flag: &str, topic: &str) {
    if let Some(warning) = topic_warning(flag, topic) {
        eprintln!("{warning}");
    }
}

/// The command-line flag of a content filter language.
pub fn filter_flag(kind: FilterKind) -> &'static str {
    match kind {
        FilterKind::Tags => "--tags",
        FilterKind::Sql => "--where",
        FilterKind::Xpath => "--xpath",
        FilterKind::Regex => "--regex",
        FilterKind::None => "the filter",
    }
}

/// A broker's refusal of a content filter, with the filter printed under it
/// and a caret under the byte the broker named, as the dashboard shows it.
/// Any other error passes through unchanged.
pub fn with_caret(error: ClientError, filter: Option<&(FilterKind, String)>) -> CliError {
    let (Some(position), Some((kind, text))) = (error.position(), filter) else {
        return CliError::Client(error);
    };
    if position > text.len() || !text.is_char_boundary(position) {
        return CliError::Client(error);
    }
    let flag = filter_flag(*kind);
    // The caret sits under the character at `position`: count characters,
    // not bytes, before it.
    let indent = " ".repeat(flag.len() + 1 + text[..position].chars().count());
    CliError::Usage(format!("{error}\n  {flag} {text}\n  {indent}^"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_proto::ErrorCode;

    #[test]
    fn mqtt_style_topics_get_a_suggestion_and_sift_topics_none() {
        let warning = topic_warning("--topic", "quotes/#").expect("warned");
        assert!(warning.contains("did you mean \"quotes.>\""), "{warning}");
        assert!(topic_warning("--topic", "a/+/c").expect("warned").contains("\"a.*.c\""));
        assert_eq!(topic_warning("--topic", "quotes.>"), None);
    }

    #[test]
    fn a_filter_error_gets_a_caret_under_its_position() {
        let refusal = ClientError::Refused {
            code: ErrorCode::InvalidFilter,
            message: "content filter: sql: at byte 6: expected an operand".into(),
        };
        let filter = (FilterKind::Sql, "sym = \"IBM\"".to_string());
        let text = with_caret(refusal, Some(&filter)).to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "  --where sym = \"IBM\"");
        assert_eq!(lines[2].find('^'), lines[1].find('"'), "{text}");
    }

    #[test]
    fn names_default_to_the_command_and_pid() {
        assert_eq!(client_name("sub", Some("ticker")), "ticker");
        assert_eq!(client_name("sub", None), format!("sift-sub-{}", std::process::id()));
    }
}
