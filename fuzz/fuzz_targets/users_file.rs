//! Feeds arbitrary text to the users-file parser, as a mistyped or hostile
//! file would be: it must answer with an error or a file, never panic; and
//! every permission of a file it accepts must answer any topic, filter and
//! stream without panicking. The text is split at its first NUL: before it
//! the file, after it a topic name to ask about.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sift_auth::{StreamAction, UsersFile};
use sift_core::{TopicFilter, TopicName};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (file, question) = text.split_once('\0').unwrap_or((text, "orders.eu.new"));
    let Ok(users) = UsersFile::parse(file) else { return };
    let topic = TopicName::new(question).ok();
    let filter = TopicFilter::new(question).ok();
    let everyone = users.users.iter().map(|user| &user.permissions).chain(users.anonymous.as_ref());
    for permissions in everyone {
        if let Some(topic) = &topic {
            let _ = permissions.may_publish(topic);
        }
        if let Some(filter) = &filter {
            let _ = permissions.may_subscribe(filter);
        }
        let _ = permissions.may_stream(question, StreamAction::Read);
        let _ = permissions.may_stream(question, StreamAction::Manage);
    }
});
