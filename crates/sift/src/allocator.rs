//! The allocator's one setting that a broker needs changed.
//!
//! A broker allocates a message on one thread (the publisher's reader, or a
//! front-end's connection) and frees it on another (the subscriber's
//! writer). mimalloc returns memory freed this way to the operating system
//! 10 ms after it is free by default, so at a steady few hundred thousand
//! messages a second the same memory is returned and faulted back in
//! continuously: profiles of the MQTT and STOMP doors spent 15 to 23 % of
//! the broker's time in the kernel zeroing those pages (`clear_page_erms`).
//! Delaying the return to 250 ms measured 15 to 20 % more MQTT throughput
//! (docs/BENCHMARKS.md); memory still goes back within a second of the
//! load ending.
//!
//! mimalloc reads the setting from the environment when the process
//! starts, before `main`, and this crate has no unsafe code to call its
//! option API, so the long-running commands (`broker`, `bench`, `gateway`,
//! `registry`) re-execute themselves once with `MIMALLOC_PURGE_DELAY` set,
//! keeping their process id. A value the user set is left alone.

use std::os::unix::process::CommandExt;

/// The variable mimalloc reads its purge delay from, in milliseconds.
const PURGE_DELAY_VARIABLE: &str = "MIMALLOC_PURGE_DELAY";
/// The purge delay the broker runs with.
const PURGE_DELAY_MS: &str = "250";

/// Replaces this process with itself under the broker's allocator
/// setting, unless the setting is already there; returns (and the process
/// goes on with mimalloc's defaults) only when the re-execution fails.
pub fn settle() {
    if std::env::var_os(PURGE_DELAY_VARIABLE).is_some() {
        return;
    }
    let Ok(program) = std::env::current_exe() else { return };
    let mut arguments = std::env::args_os();
    let mut command = std::process::Command::new(program);
    if let Some(name) = arguments.next() {
        command.arg0(name);
    }
    let error = command.args(arguments).env(PURGE_DELAY_VARIABLE, PURGE_DELAY_MS).exec();
    tracing::debug!(%error, "running with the allocator's default purge delay");
}
