//! Putting transfers back together on disk.
//!
//! Each fragment is written at its offset in `DIR/.NAME.ID.part` as it
//! arrives (so parallel streams need no reordering and memory holds only
//! the fragment in hand), its CRC checked, and its CRC kept. When the last
//! one is in, the kept CRCs are combined in index order and compared with
//! the publisher's CRC of the whole; only then is the file synced and
//! renamed to `DIR/NAME`. A transfer that cannot complete (a fragment
//! missing, a checksum wrong, a bound exceeded) is reported, its partial
//! file removed: a file under its final name is always whole and checked.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sift_core::Message;

use super::fragment::FragmentHeader;

/// How the reassembler works, and its bounds.
#[derive(Debug, Clone)]
pub struct ReassemblyConfig {
    /// Where finished transfers are saved.
    pub dir: PathBuf,
    /// Transfers in progress at once; a fragment of one more is refused.
    pub max_transfers: usize,
    /// Largest transfer accepted, in bytes.
    pub max_transfer_bytes: u64,
    /// A transfer with no fragment for this long has lost some: reported.
    pub idle_timeout: Duration,
    /// Each stream's fragments arrive in index order (true for one
    /// receiving connection and reliable delivery): a fragment that skips
    /// others of its stream proves them lost, reported at once.
    pub ordered_streams: bool,
    /// Sync a finished file before renaming it into place, so that a crash
    /// never leaves a final name over unwritten blocks.
    pub sync: bool,
}

impl ReassemblyConfig {
    /// Defaults for saving into `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> ReassemblyConfig {
        ReassemblyConfig {
            dir: dir.into(),
            max_transfers: 64,
            max_transfer_bytes: 64 * 1024 * 1024 * 1024,
            idle_timeout: Duration::from_secs(30),
            ordered_streams: true,
            sync: true,
        }
    }
}

/// What happened to a transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransferEvent {
    /// Every fragment arrived, the checksums agree, and the file is in place.
    Completed {
        /// The transfer.
        id: String,
        /// Where it was saved.
        path: PathBuf,
        /// Its size.
        total_bytes: u64,
        /// Its fragments.
        fragments: u64,
        /// From the first fragment to the last.
        elapsed: Duration,
    },
    /// The transfer cannot complete; nothing is left under its final name.
    Failed(TransferFailure),
}

/// Why a transfer failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferFailure {
    /// The transfer (empty when the fragment named none usable).
    pub id: String,
    /// The name it would have been saved under.
    pub name: String,
    /// What went wrong, where and why.
    pub reason: String,
    /// Fragments known to be missing (the first 32).
    pub missing: Vec<u64>,
}

/// What the reassembler has done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReassemblyCounters {
    /// Transfers saved.
    pub completed: u64,
    /// Transfers failed.
    pub failed: u64,
    /// Fragments written.
    pub fragments: u64,
    /// Fragments that arrived a second time (redeliveries), ignored.
    pub duplicates: u64,
    /// Payload bytes written.
    pub bytes_written: u64,
    /// Fragments of transfers already finished (completed or failed), dropped.
    pub after_finish: u64,
}

/// Missing fragments listed in a failure at most.
const MISSING_LISTED_MAX: usize = 32;

/// Finished transfers remembered, so that their late fragments (a
/// redelivery, the rest of a failed transfer) do not start them again.
pub const FINISHED_REMEMBERED: usize = 4096;

/// One transfer in progress.
#[derive(Debug)]
struct Transfer {
    layout: FragmentHeader,
    name: String,
    file: File,
    part_path: PathBuf,
    final_path: PathBuf,
    /// CRC of each fragment received, by index.
    crcs: Vec<Option<u32>>,
    received: u64,
    /// Per stream: the next index expected (ordered streams only).
    next_in_stream: Vec<u64>,
    file_crc: Option<u32>,
    started: Instant,
    last_activity: Instant,
}

/// Transfers in progress, by id.
#[derive(Debug)]
pub struct Reassembler {
    config: ReassemblyConfig,
    transfers: HashMap<String, Transfer>,
    /// Ids of the last [`FINISHED_REMEMBERED`] finished transfers, oldest first.
    finished: VecDeque<String>,
    finished_ids: HashSet<String>,
    counters: ReassemblyCounters,
}

impl Reassembler {
    /// A reassembler saving into `config.dir`, which is created if missing.
    pub fn new(config: ReassemblyConfig) -> std::io::Result<Reassembler> {
        std::fs::create_dir_all(&config.dir)?;
        Ok(Reassembler {
            config,
            transfers: HashMap::new(),
            finished: VecDeque::new(),
            finished_ids: HashSet::new(),
            counters: ReassemblyCounters::default(),
        })
    }

    /// What it has done so far.
    pub fn counters(&self) -> ReassemblyCounters {
        self.counters
    }

    /// Transfers in progress.
    pub fn in_progress(&self) -> usize {
        self.transfers.len()
    }

    /// Transfer `id` in progress: the name it will be saved under, its
    /// bytes and its fragments; `None` when it is not in progress.
    pub fn receiving(&self, id: &str) -> Option<(&str, u64, u64)> {
        let transfer = self.transfers.get(id)?;
        Some((transfer.name.as_str(), transfer.layout.total_bytes, transfer.layout.count))
    }

    /// Takes `message` if it is a fragment: `None` when it is not one,
    /// else the event it causes, if any.
    pub fn accept(&mut self, message: &Message, now: Instant) -> Option<Option<TransferEvent>> {
        let header = match FragmentHeader::of(message)? {
            Ok(header) => header,
            Err(error) => {
                let id = match message.property(super::CHUNK_ID) {
                    Some(sift_core::Value::Str(id)) => id.to_string(),
                    _ => String::new(),
                };
                return Some(Some(self.fail(&id, format!("invalid fragment: {error}"), Vec::new())));
            }
        };
        Some(self.take(header, message, now))
    }

    /// Fails the transfers idle for `idle_timeout` at `now`.
    pub fn expire(&mut self, now: Instant) -> Vec<TransferEvent> {
        let idle: Vec<String> = self
            .transfers
            .iter()
            .filter(|(_, transfer)| now.saturating_duration_since(transfer.last_activity) >= self.config.idle_timeout)
            .map(|(id, _)| id.clone())
            .collect();
        idle.into_iter()
            .map(|id| {
                let missing = self.transfers.get(&id).map(missing_fragments).unwrap_or_default();
                let reason = format!("no fragment for {:?}; {} never arrived", self.config.idle_timeout, missing.len());
                self.fail(&id, reason, missing)
            })
            .collect()
    }

    /// When the next idle transfer times out, if any is in progress.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.transfers.values().map(|transfer| transfer.last_activity + self.config.idle_timeout).min()
    }

    /// Gives up every transfer in progress (the receiver is stopping).
    pub fn abandon_all(&mut self) -> Vec<TransferEvent> {
        let ids: Vec<String> = self.transfers.keys().cloned().collect();
        ids.into_iter()
            .map(|id| {
                let missing = self.transfers.get(&id).map(missing_fragments).unwrap_or_default();
                self.fail(&id, "the receiver stopped before every fragment arrived".into(), missing)
            })
            .collect()
    }

    /// Writes one valid fragment; completes or fails its transfer when it
    /// decides it.
    fn take(&mut self, header: FragmentHeader, message: &Message, now: Instant) -> Option<TransferEvent> {
        if self.finished_ids.contains(&header.id) {
            self.counters.after_finish += 1;
            return None;
        }
        if !self.transfers.contains_key(&header.id) {
            if let Err(reason) = self.open(&header, now) {
                return Some(self.fail(&header.id, reason, Vec::new()));
            }
        }
        let transfer = self.transfers.get_mut(&header.id)?;
        if let Err(reason) = transfer.check_layout(&header) {
            return Some(self.fail(&header.id, reason, Vec::new()));
        }
        let index = header.index as usize;
        if transfer.crcs[index].is_some() {
            self.counters.duplicates += 1;
            return None;
        }
        let crc = crc32fast::hash(&message.payload);
        if crc != header.crc {
            let reason =
                format!("fragment {index}: CRC-32 {crc:08x} of its payload, the publisher's is {:08x}", header.crc);
            return Some(self.fail(&header.id, reason, Vec::new()));
        }
        if let Err(error) = transfer.file.write_all_at(&message.payload, header.offset()) {
            let reason = format!("writing {}: {error}", transfer.part_path.display());
            return Some(self.fail(&header.id, reason, Vec::new()));
        }
        transfer.crcs[index] = Some(crc);
        transfer.received += 1;
        transfer.last_activity = now;
        transfer.file_crc = transfer.file_crc.or(header.file_crc);
        self.counters.fragments += 1;
        self.counters.bytes_written += message.payload.len() as u64;
        if let Some(skipped) = transfer.skipped_in_stream(&header, self.config.ordered_streams) {
            let reason = format!("fragment {index} arrived while {} earlier of its stream never did", skipped.len());
            return Some(self.fail(&header.id, reason, skipped));
        }
        if transfer.received == transfer.layout.count {
            return Some(self.complete(&header.id, now));
        }
        None
    }

    /// Opens the partial file of a new transfer, within the bounds.
    fn open(&mut self, header: &FragmentHeader, now: Instant) -> Result<(), String> {
        if self.transfers.len() >= self.config.max_transfers {
            return Err(format!("{} transfers already in progress (max_transfers)", self.config.max_transfers));
        }
        if header.total_bytes > self.config.max_transfer_bytes {
            return Err(format!(
                "{} bytes is over max_transfer_bytes = {}",
                header.total_bytes, self.config.max_transfer_bytes
            ));
        }
        let name = safe_file_name(&header.name, &header.id);
        let part_path = self.config.dir.join(format!(".{name}.{}.part", safe_component(&header.id)));
        let file = File::options()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&part_path)
            .map_err(|error| format!("creating {}: {error}", part_path.display()))?;
        file.set_len(header.total_bytes).map_err(|error| format!("sizing {}: {error}", part_path.display()))?;
        let streams = header.streams.max(1);
        let transfer = Transfer {
            layout: header.clone(),
            final_path: self.config.dir.join(&name),
            name,
            file,
            part_path,
            crcs: vec![None; header.count as usize],
            received: 0,
            next_in_stream: (0..streams).collect(),
            file_crc: None,
            started: now,
            last_activity: now,
        };
        self.transfers.insert(header.id.clone(), transfer);
        Ok(())
    }

    /// Checks the whole's CRC, syncs and renames the file into place.
    fn complete(&mut self, id: &str, now: Instant) -> TransferEvent {
        let Some(transfer) = self.transfers.get(id) else {
            return self.fail(id, "completed twice".into(), Vec::new());
        };
        let mut combined = crc32fast::Hasher::new();
        for (index, crc) in transfer.crcs.iter().enumerate() {
            let length = transfer.layout.total_bytes.saturating_sub(index as u64 * transfer.layout.chunk_bytes);
            let length = length.min(transfer.layout.chunk_bytes);
            combined.combine(&crc32fast::Hasher::new_with_initial_len(crc.unwrap_or(0), length));
        }
        let whole_crc = combined.finalize();
        if transfer.file_crc != Some(whole_crc) {
            let reason =
                format!("the fragments' CRC-32 {whole_crc:08x} is not the publisher's {:08x?}", transfer.file_crc);
            return self.fail(id, reason, Vec::new());
        }
        if self.config.sync {
            if let Err(error) = transfer.file.sync_data() {
                return self.fail(id, format!("syncing {}: {error}", transfer.part_path.display()), Vec::new());
            }
        }
        if let Err(error) = std::fs::rename(&transfer.part_path, &transfer.final_path) {
            return self.fail(id, format!("renaming into {}: {error}", transfer.final_path.display()), Vec::new());
        }
        let Some(transfer) = self.transfers.remove(id) else { return self.fail(id, "vanished".into(), Vec::new()) };
        self.remember_finished(id);
        self.counters.completed += 1;
        TransferEvent::Completed {
            id: id.to_string(),
            path: transfer.final_path,
            total_bytes: transfer.layout.total_bytes,
            fragments: transfer.layout.count,
            elapsed: now.saturating_duration_since(transfer.started),
        }
    }

    /// Ends transfer `id` (if in progress) as failed and removes its partial file.
    fn fail(&mut self, id: &str, reason: String, missing: Vec<u64>) -> TransferEvent {
        self.counters.failed += 1;
        if !id.is_empty() {
            self.remember_finished(id);
        }
        let name = match self.transfers.remove(id) {
            Some(transfer) => {
                let _ = std::fs::remove_file(&transfer.part_path);
                transfer.name
            }
            None => String::new(),
        };
        TransferEvent::Failed(TransferFailure { id: id.to_string(), name, reason, missing })
    }
}

impl Reassembler {
    fn remember_finished(&mut self, id: &str) {
        if !self.finished_ids.insert(id.to_string()) {
            return;
        }
        self.finished.push_back(id.to_string());
        if self.finished.len() > FINISHED_REMEMBERED {
            if let Some(oldest) = self.finished.pop_front() {
                self.finished_ids.remove(&oldest);
            }
        }
        debug_assert_eq!(self.finished.len(), self.finished_ids.len());
    }
}

impl Transfer {
    /// A later fragment must describe the same transfer as the first.
    fn check_layout(&self, header: &FragmentHeader) -> Result<(), String> {
        let same = header.count == self.layout.count
            && header.chunk_bytes == self.layout.chunk_bytes
            && header.total_bytes == self.layout.total_bytes
            && header.streams == self.layout.streams;
        match same {
            true => Ok(()),
            false => Err(format!("fragment {} describes another layout than the first fragment", header.index)),
        }
    }

    /// With ordered streams: the indices of `header`'s stream that it
    /// skipped (lost), or `None`. Advances the stream's next expected index.
    fn skipped_in_stream(&mut self, header: &FragmentHeader, ordered: bool) -> Option<Vec<u64>> {
        let stream = (header.index % header.streams.max(1)) as usize;
        let next = self.next_in_stream.get_mut(stream)?;
        let step = header.streams.max(1);
        let expected = *next;
        *next = (*next).max(header.index + step);
        if !ordered || header.index <= expected {
            return None;
        }
        let skipped: Vec<u64> = (expected..header.index)
            .step_by(step as usize)
            .filter(|index| self.crcs[*index as usize].is_none())
            .take(MISSING_LISTED_MAX)
            .collect();
        (!skipped.is_empty()).then_some(skipped)
    }
}

/// The fragments of `transfer` not received (the first [`MISSING_LISTED_MAX`]).
fn missing_fragments(transfer: &Transfer) -> Vec<u64> {
    let missing = transfer.crcs.iter().enumerate().filter(|(_, crc)| crc.is_none()).map(|(index, _)| index as u64);
    missing.take(MISSING_LISTED_MAX).collect()
}

/// The last component of a publisher's file name, if it is a plain name;
/// else `transfer-ID`. A publisher never chooses where outside the
/// directory a file lands.
fn safe_file_name(name: &str, id: &str) -> String {
    let last = Path::new(name).file_name().and_then(|name| name.to_str()).unwrap_or("");
    let plain = !last.is_empty() && !last.starts_with('.') && !last.contains('\0');
    match plain {
        true => last.to_string(),
        false => format!("transfer-{}", safe_component(id)),
    }
}

/// `text` with everything but letters, digits, `-` and `_` replaced by `_`.
fn safe_component(text: &str) -> String {
    text.chars()
        .map(|char| if char.is_ascii_alphanumeric() || char == '-' || char == '_' { char } else { '_' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transfer::Fragmenter;
    use bytes::Bytes;
    use sift_core::TopicName;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sift-reassembly-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn fragments(data: &[u8], chunk_bytes: u64, streams: u64, name: &str) -> Vec<Message> {
        let template = Message::new(TopicName::new("files.x").expect("topic"), Bytes::new());
        let mut fragmenter = Fragmenter::new(template, "id-1".into(), name, data.len() as u64, chunk_bytes, streams);
        let mut offset = 0;
        let mut out = Vec::new();
        while let Some(length) = fragmenter.next_payload_bytes() {
            out.push(fragmenter.fragment(Bytes::copy_from_slice(&data[offset..offset + length as usize])));
            offset += length as usize;
        }
        out
    }

    fn events(reassembler: &mut Reassembler, messages: &[Message]) -> Vec<TransferEvent> {
        let now = Instant::now();
        messages.iter().filter_map(|message| reassembler.accept(message, now).expect("a fragment")).collect()
    }

    #[test]
    fn out_of_order_fragments_of_two_streams_make_the_file() {
        let dir = scratch("streams");
        let mut reassembler = Reassembler::new(ReassemblyConfig::new(&dir)).expect("dir");
        let data: Vec<u8> = (0..1000u32).map(|value| (value % 253) as u8).collect();
        let mut messages = fragments(&data, 64, 2, "data.bin");
        // Stream 1's fragments first, then stream 0's: each stream in order.
        let (even, odd): (Vec<_>, Vec<_>) = messages.drain(..).enumerate().partition(|(index, _)| index % 2 == 0);
        let reordered: Vec<Message> = odd.into_iter().chain(even).map(|(_, message)| message).collect();
        let got = events(&mut reassembler, &reordered);
        assert!(matches!(&got[..], [TransferEvent::Completed { total_bytes: 1000, fragments: 16, .. }]), "{got:?}");
        assert_eq!(std::fs::read(dir.join("data.bin")).expect("saved"), data);
        assert_eq!(std::fs::read_dir(&dir).expect("dir").count(), 1, "no partial file left");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_skipped_fragment_is_reported_and_no_file_is_left() {
        let dir = scratch("skipped");
        let mut reassembler = Reassembler::new(ReassemblyConfig::new(&dir)).expect("dir");
        let mut messages = fragments(&[7u8; 500], 100, 1, "gap.bin");
        messages.remove(2);
        let got = events(&mut reassembler, &messages);
        match &got[..] {
            [TransferEvent::Failed(failure)] => {
                assert_eq!(failure.missing, vec![2]);
                assert_eq!(failure.name, "gap.bin");
            }
            other => panic!("expected one failure, got {other:?}"),
        }
        assert_eq!(std::fs::read_dir(&dir).expect("dir").count(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_corrupted_fragment_fails_its_checksum() {
        let dir = scratch("corrupt");
        let mut reassembler = Reassembler::new(ReassemblyConfig::new(&dir)).expect("dir");
        let mut messages = fragments(&[1u8; 300], 100, 1, "bad.bin");
        let mut flipped = messages[1].payload.to_vec();
        flipped[10] ^= 0x40;
        messages[1].payload = Bytes::from(flipped);
        let got = events(&mut reassembler, &messages);
        assert!(
            matches!(&got[..], [TransferEvent::Failed(failure)] if failure.reason.contains("fragment 1: CRC-32")),
            "{got:?}"
        );
        assert!(!dir.join("bad.bin").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn duplicates_are_ignored_and_idle_transfers_expire() {
        let dir = scratch("idle");
        let mut config = ReassemblyConfig::new(&dir);
        config.ordered_streams = false;
        config.idle_timeout = Duration::from_secs(5);
        let mut reassembler = Reassembler::new(config).expect("dir");
        let messages = fragments(&[3u8; 300], 100, 1, "idle.bin");
        let start = Instant::now();
        assert_eq!(reassembler.accept(&messages[0], start), Some(None));
        assert_eq!(reassembler.accept(&messages[0], start), Some(None));
        assert_eq!(reassembler.counters().duplicates, 1);
        assert!(reassembler.expire(start + Duration::from_secs(4)).is_empty());
        let expired = reassembler.expire(start + Duration::from_secs(5));
        assert!(
            matches!(&expired[..], [TransferEvent::Failed(failure)] if failure.missing == vec![1, 2]),
            "{expired:?}"
        );
        assert_eq!(reassembler.in_progress(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn names_cannot_leave_the_directory() {
        assert_eq!(safe_file_name("../../etc/passwd", "x"), "passwd");
        assert_eq!(safe_file_name("..", "a/b"), "transfer-a_b");
        assert_eq!(safe_file_name("", "id"), "transfer-id");
        assert_eq!(safe_file_name(".hidden", "id"), "transfer-id");
        assert_eq!(safe_file_name("dir/video.mp4", "id"), "video.mp4");
    }
}
