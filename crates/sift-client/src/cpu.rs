//! CPU time of one thread, and of the whole process, read from Linux's
//! `/proc` (the workspace forbids `unsafe`, so `clock_gettime` through
//! libc is not an option), and the calling thread's timer slack. The TDS
//! reports its thread's CPU time with it, and `sift bench` its clients'.
//!
//! `/proc/thread-self/schedstat` gives the time a thread ran in
//! nanoseconds (its first field, the scheduler's `sum_exec_runtime`); when
//! the kernel lacks it, `/proc/thread-self/stat` gives user plus system
//! time in clock ticks of 10 ms, coarse but still right over many
//! messages. Elsewhere than on Linux neither exists and the readings are
//! `None`: the run goes on without CPU figures.

use std::path::Path;

/// Clock ticks per second of `/proc/*/stat` (`USER_HZ`): 100 on every
/// Linux architecture, whatever the kernel's internal tick rate.
const USER_HZ: u64 = 100;
/// Nanoseconds per clock tick of `/proc/*/stat`.
const NANOS_PER_TICK: u64 = 1_000_000_000 / USER_HZ;
/// Index of `utime` among the fields after the command name of
/// `/proc/*/stat` (field 14 of proc(5), counting from 1; `stime` follows).
const STAT_UTIME_INDEX: usize = 11;

/// CPU time the calling thread has used, in nanoseconds; `None` when
/// `/proc` cannot tell.
pub fn thread_cpu_ns() -> Option<u64> {
    task_cpu_ns(Path::new("/proc/thread-self"))
}

/// CPU time every live thread of this process has used, in nanoseconds.
///
/// Threads that ended are not counted, so the difference of two readings
/// is the process's CPU time between them only when the threads that
/// worked in between are still alive at the second reading.
pub fn process_cpu_ns() -> Option<u64> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    // A thread that ends while the directory is read is skipped.
    Some(tasks.filter_map(Result::ok).filter_map(|task| task_cpu_ns(&task.path())).sum())
}

/// CPU time of the task whose `/proc` directory is `task`.
pub fn task_cpu_ns(task: &Path) -> Option<u64> {
    if let Some(nanos) = std::fs::read_to_string(task.join("schedstat")).ok().and_then(|text| schedstat_ns(&text)) {
        return Some(nanos);
    }
    std::fs::read_to_string(task.join("stat")).ok().and_then(|text| stat_ns(&text))
}

/// The running time in a `schedstat` line: its first field, nanoseconds.
fn schedstat_ns(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// User plus system time of a `stat` line, in nanoseconds. The command
/// name in parentheses may hold spaces and parentheses itself, so fields
/// are counted from the last `)`.
fn stat_ns(text: &str) -> Option<u64> {
    let (_, after_name) = text.rsplit_once(')')?;
    let mut fields = after_name.split_whitespace().skip(STAT_UTIME_INDEX);
    let user_ticks: u64 = fields.next()?.parse().ok()?;
    let system_ticks: u64 = fields.next()?.parse().ok()?;
    Some((user_ticks + system_ticks) * NANOS_PER_TICK)
}

/// User-mode CPU time of the whole process (threads ended included), in
/// nanoseconds at clock-tick resolution (10 ms); `None` without `/proc`.
/// Beside [`process_cpu_ns`] it tells the process's own work from the
/// kernel's on its behalf: a sender on a software bridge pays the bridge's
/// forwarding to every port in system time.
pub fn process_user_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    let (_, after_name) = text.rsplit_once(')')?;
    let user_ticks: u64 = after_name.split_whitespace().nth(STAT_UTIME_INDEX)?.parse().ok()?;
    Some(user_ticks * NANOS_PER_TICK)
}

/// The `/proc` directory of the calling thread, which other threads can
/// read its CPU time from ([`task_cpu_ns`]); `None` without `/proc`.
pub fn thread_task_dir() -> Option<std::path::PathBuf> {
    let target = std::fs::read_link("/proc/thread-self").ok()?;
    Some(Path::new("/proc").join(target))
}

/// Asks the kernel to end the calling thread's timed sleeps on time rather
/// than up to 50 µs late (the default timer slack, which batches wake-ups),
/// through `/proc/thread-self/timerslack_ns`. False when the kernel or the
/// process's privileges do not allow it: sleeps then end up to the default
/// slack late.
pub fn set_thread_timer_slack_ns(slack_ns: u64) -> bool {
    std::fs::write("/proc/thread-self/timerslack_ns", slack_ns.to_string()).is_ok()
}

/// CPU time between two readings, when both were taken.
pub fn elapsed_ns(before: Option<u64>, after: Option<u64>) -> Option<u64> {
    Some(after?.saturating_sub(before?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_gives_nanoseconds_on_the_cpu() {
        assert_eq!(schedstat_ns("123456789 2000 17\n"), Some(123_456_789));
        assert_eq!(schedstat_ns(""), None);
        assert_eq!(schedstat_ns("x 1 2"), None);
    }

    #[test]
    fn stat_adds_user_and_system_ticks_after_a_tricky_command_name() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime …
        let line = "42 (a (b) c) S 1 42 42 0 -1 4194304 100 0 0 0 7 3 0 0 20 0 1 0 5000";
        assert_eq!(stat_ns(line), Some(10 * NANOS_PER_TICK));
        assert_eq!(stat_ns("42 (short) S 1"), None);
    }

    #[test]
    fn a_busy_thread_reads_more_cpu_than_it_had() {
        let Some(before) = thread_cpu_ns() else {
            // No /proc here: nothing to check.
            return;
        };
        // Spin until the reading moves (at most 2 s, far more than one
        // 10 ms tick of the coarsest source).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        let mut after = before;
        while after == before && std::time::Instant::now() < deadline {
            std::hint::black_box((0..10_000u64).map(|value| value * value).sum::<u64>());
            after = thread_cpu_ns().expect("a second reading");
        }
        assert!(after > before, "2 s of spinning took no CPU time");
        assert!(process_cpu_ns().expect("process") >= after);
    }

    #[test]
    fn elapsed_needs_both_readings() {
        assert_eq!(elapsed_ns(Some(5), Some(12)), Some(7));
        assert_eq!(elapsed_ns(None, Some(12)), None);
        assert_eq!(elapsed_ns(Some(5), None), None);
    }
}
