//! Telling a broker that lost its files from one that never had any.
//!
//! A replica's Raft node must never come back as the node it was without
//! the files that node held: it would vote again in terms it voted in, and
//! count towards quorums for entries it no longer has, and a committed
//! message could be lost. A fresh replica directory looks the same whether
//! the group is new or the broker's directory was wiped, so the broker
//! asks the others:
//!
//! - each broker's data directory holds a random **data id**, made when the
//!   directory is first used ([`DATA_ID_FILE`]);
//! - a broker starting a replica with no files introduces itself (its name
//!   and data id) to the group's other members in a `RAFT` call of kind
//!   [`INTRODUCE_KIND`]; each remembers the data id it last heard from each
//!   broker ([`PEER_DATA_IDS_FILE`]) and answers whether it is new to it,
//!   the one it knew, or another;
//! - a broker told "another" lost its files: its replica takes a new
//!   incarnation (a new node id) and asks the group to put it in place of
//!   the node its name had ([`super::rejoin`]). Otherwise it forms or joins
//!   the group as a new member would.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The file in the data directory that holds its data id.
pub const DATA_ID_FILE: &str = "data-id";
/// The file in the data directory that holds the data ids heard from the
/// other brokers.
pub const PEER_DATA_IDS_FILE: &str = "peer-data-ids.json";
/// The kind of a `RAFT` call that introduces a broker's data id.
pub const INTRODUCE_KIND: u8 = 21;

/// What a broker answers an introduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Introduction {
    /// It had not heard from the broker before.
    New,
    /// The data id it heard before.
    Known,
    /// Another data id than it heard before: the broker's directory is not
    /// the one it had.
    Changed,
}

impl Introduction {
    /// The answer's bytes.
    pub fn as_bytes(self) -> &'static [u8] {
        match self {
            Introduction::New => b"new",
            Introduction::Known => b"known",
            Introduction::Changed => b"changed",
        }
    }

    /// The answer in `bytes`, if it is one.
    pub fn parse(bytes: &[u8]) -> Option<Introduction> {
        match bytes {
            b"new" => Some(Introduction::New),
            b"known" => Some(Introduction::Known),
            b"changed" => Some(Introduction::Changed),
            _ => None,
        }
    }
}

/// This broker's data id and the ones it heard from the others.
#[derive(Debug)]
pub struct DataIds {
    own: u64,
    peers_file: PathBuf,
    peers: Mutex<BTreeMap<String, u64>>,
}

impl DataIds {
    /// Reads the data ids under `data_dir`, making this broker's when it
    /// has none.
    pub fn open(data_dir: &Path) -> Result<DataIds, std::io::Error> {
        std::fs::create_dir_all(data_dir)?;
        let own_file = data_dir.join(DATA_ID_FILE);
        let own = match read_id(&own_file)? {
            Some(own) => own,
            None => {
                let own = random_nonzero();
                write_id(&own_file, own)?;
                own
            }
        };
        let peers_file = data_dir.join(PEER_DATA_IDS_FILE);
        let peers = match std::fs::read(&peers_file) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|error| invalid(&peers_file, error))?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(error) => return Err(error),
        };
        Ok(DataIds { own, peers_file, peers: Mutex::new(peers) })
    }

    /// This broker's data id.
    pub fn own(&self) -> u64 {
        self.own
    }

    /// Takes in `broker`'s introduction of `data_id`: what it is to this
    /// broker, remembered (on disk before the answer) when new or changed.
    pub fn introduce(&self, broker: &str, data_id: u64) -> Result<Introduction, std::io::Error> {
        let mut peers = self.peers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let introduction = match peers.get(broker) {
            None => Introduction::New,
            Some(known) if *known == data_id => return Ok(Introduction::Known),
            Some(_) => Introduction::Changed,
        };
        peers.insert(broker.to_string(), data_id);
        let bytes = serde_json::to_vec_pretty(&*peers).map_err(std::io::Error::other)?;
        sift_store::write_file_atomically(&self.peers_file, &bytes)
            .map_err(|error| std::io::Error::other(error.to_string()))?;
        Ok(introduction)
    }
}

/// The id (hex) the file at `path` holds; `None` when there is no file.
/// An error names the file.
pub fn read_id(path: &Path) -> Result<Option<u64>, std::io::Error> {
    match std::fs::read_to_string(path) {
        Ok(text) => u64::from_str_radix(text.trim(), 16).map(Some).map_err(|error| invalid(path, error)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(std::io::Error::new(error.kind(), format!("{}: {error}", path.display()))),
    }
}

/// Writes `id` (hex) to the file at `path`, atomically.
pub fn write_id(path: &Path, id: u64) -> Result<(), std::io::Error> {
    sift_store::write_file_atomically(path, format!("{id:016x}\n").as_bytes())
        .map_err(|error| std::io::Error::other(error.to_string()))
}

fn invalid(path: &Path, error: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {error}", path.display()))
}

/// A random id, never 0 (0 is the incarnation of a group's founders): the
/// standard library's randomly keyed hasher (keys from the OS) over the
/// time and the process id, which is random enough for ids that only need
/// to differ from the few before them.
pub fn random_nonzero() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(sift_core::system_now_ns());
    hasher.write_u32(std::process::id());
    hasher.finish().max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broker_is_new_then_known_and_changed_once_its_data_id_is_another_across_restarts() {
        let dir = std::env::temp_dir().join(format!("sift-data-ids-{}", random_nonzero()));
        let ids = DataIds::open(&dir).expect("opens");
        let own = ids.own();
        assert_ne!(own, 0);
        assert_eq!(ids.introduce("b", 7).expect("taken"), Introduction::New);
        assert_eq!(ids.introduce("b", 7).expect("taken"), Introduction::Known);
        drop(ids);
        let again = DataIds::open(&dir).expect("opens again");
        assert_eq!(again.own(), own, "the data id stays with the directory");
        assert_eq!(again.introduce("b", 7).expect("taken"), Introduction::Known, "remembered on disk");
        assert_eq!(again.introduce("b", 8).expect("taken"), Introduction::Changed);
        assert_eq!(again.introduce("b", 8).expect("taken"), Introduction::Known);
        for answer in [Introduction::New, Introduction::Known, Introduction::Changed] {
            assert_eq!(Introduction::parse(answer.as_bytes()), Some(answer));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
