//! Position logs: the last whole record wins, a torn tail gives the one
//! before, compaction keeps the last.

mod common;

use common::TempDir;
use sift_store::{Position, PositionLog, POSITION_LOG_BYTES_MAX};

fn position(floor: u64) -> Position {
    Position { ack_floor: floor, done_above: vec![(floor + 2, floor + 3), (floor + 7, floor + 7)] }
}

#[test]
fn the_last_position_written_wins_across_reopens_and_compactions() {
    let dir = TempDir::new("position");
    std::fs::create_dir_all(dir.path()).expect("dir");
    let path = dir.path().join("position.log");
    let (mut positions, start) = PositionLog::open(&path).expect("opens");
    assert_eq!(start, Position::default());
    for floor in 1..=5_000 {
        positions.write(&position(floor), floor % 100 == 0).expect("written");
        let length = std::fs::metadata(&path).expect("file").len();
        assert!(length <= POSITION_LOG_BYTES_MAX, "compacted: {length} bytes");
    }
    drop(positions);
    let (mut positions, last) = PositionLog::open(&path).expect("opens");
    assert_eq!(last, position(5_000));
    positions.write(&position(5_001), true).expect("written after a reopen");
    drop(positions);
    assert_eq!(PositionLog::open(&path).expect("opens").1, position(5_001));
}

#[test]
fn a_torn_tail_gives_the_position_before_and_is_cut() {
    let dir = TempDir::new("position-torn");
    std::fs::create_dir_all(dir.path()).expect("dir");
    let path = dir.path().join("position.log");
    let (mut positions, _) = PositionLog::open(&path).expect("opens");
    positions.write(&position(10), true).expect("written");
    let whole = std::fs::metadata(&path).expect("file").len();
    positions.write(&position(11), true).expect("written");
    drop(positions);
    for cut in [whole + 1, whole + 12, 2 * whole - 1] {
        let bytes = std::fs::read(&path).expect("read");
        std::fs::write(&path, &bytes[..cut as usize]).expect("torn");
        let (mut positions, last) = PositionLog::open(&path).expect("opens");
        assert_eq!(last, position(10), "cut at {cut}");
        assert_eq!(std::fs::metadata(&path).expect("file").len(), whole, "the tail is cut");
        positions.write(&position(11), true).expect("written");
    }
    let (_, last) = PositionLog::open(&path).expect("opens");
    assert_eq!(last, position(11), "a record after a cut tail is found");
}
