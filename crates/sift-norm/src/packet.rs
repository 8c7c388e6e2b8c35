//! NORM's wire format (RFC 5740 §4), read as far as watching a group
//! needs: who sent a packet, what kind it is, and for data where in which
//! object it falls. Sans-IO: [`parse`] takes a datagram, [`Tally`] counts
//! what a stream of them shows.
//!
//! libnorm does not count its repairs (its report log is compiled out of
//! Debian's build, and it no longer sets the repair flag of RFC 5740 on a
//! retransmission), so a watcher infers them: a sender sends each object's
//! blocks and symbols in order, objects in increasing id, so a data packet
//! at or behind the furthest position already seen from that sender is a
//! retransmission. The common header's sequence number counts every packet
//! a sender builds, so a skip in it is a packet the watcher never saw:
//! dropped on the way, or by the sender's own loss hook.

use std::collections::BTreeMap;

/// The NORM protocol version this reads.
pub const NORM_VERSION: u8 = 1;
/// Senders a [`Tally`] tracks; packets from more are counted as untracked.
pub const TALLY_SENDERS_MAX: usize = 1024;

/// Bytes of the common header: version and type, header length, sequence, source id.
const COMMON_HEADER_BYTES: usize = 8;
/// Bytes of a data message's header before its FEC payload id.
const OBJECT_HEADER_BYTES: usize = 16;

/// The kinds of NORM message (RFC 5740 §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    /// An object's info (sender).
    Info,
    /// A segment of an object (sender).
    Data,
    /// A command: flush, GRTT probe, squelch (sender).
    Command,
    /// A repair request (receiver).
    Nack,
    /// A positive acknowledgement (receiver).
    Ack,
    /// A report (either).
    Report,
}

/// Where a data packet falls in its sender's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataPosition {
    /// The sender's instance (changes when it restarts).
    pub instance: u16,
    /// The object's transport id (wraps at 16 bits).
    pub object: u16,
    /// The source block number within the object.
    pub block: u32,
    /// The encoding symbol id within the block.
    pub symbol: u16,
}

/// One parsed packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// Its kind.
    pub kind: MessageKind,
    /// The sender's packet sequence number.
    pub sequence: u16,
    /// The node that sent it.
    pub source: u32,
    /// For data: its position. For a NACK or an ACK: `None`.
    pub position: Option<DataPosition>,
    /// For a NACK or an ACK: the sender it is addressed to.
    pub addressed_to: Option<u32>,
}

/// Why a datagram is not a NORM packet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    /// Shorter than the headers it announces.
    #[error("{bytes} bytes: shorter than the NORM header it needs ({needed})")]
    Short {
        /// The datagram's length.
        bytes: usize,
        /// The length its headers need.
        needed: usize,
    },
    /// A version other than [`NORM_VERSION`].
    #[error("NORM version {0}, expected {NORM_VERSION}")]
    Version(u8),
    /// An unknown message type.
    #[error("unknown NORM message type {0}")]
    Kind(u8),
    /// A data packet with an FEC encoding this does not know.
    #[error("unknown FEC encoding id {0}")]
    FecId(u8),
}

/// Reads the headers of one datagram.
pub fn parse(datagram: &[u8]) -> Result<Packet, PacketError> {
    let short = |needed| PacketError::Short { bytes: datagram.len(), needed };
    if datagram.len() < COMMON_HEADER_BYTES {
        return Err(short(COMMON_HEADER_BYTES));
    }
    let version = datagram[0] >> 4;
    if version != NORM_VERSION {
        return Err(PacketError::Version(version));
    }
    let header_bytes = usize::from(datagram[1]) * 4;
    if datagram.len() < header_bytes.max(COMMON_HEADER_BYTES) {
        return Err(short(header_bytes));
    }
    let kind = match datagram[0] & 0x0f {
        1 => MessageKind::Info,
        2 => MessageKind::Data,
        3 => MessageKind::Command,
        4 => MessageKind::Nack,
        5 => MessageKind::Ack,
        6 => MessageKind::Report,
        other => return Err(PacketError::Kind(other)),
    };
    let mut packet = Packet {
        kind,
        sequence: u16::from_be_bytes([datagram[2], datagram[3]]),
        source: be_u32(datagram, 4),
        position: None,
        addressed_to: None,
    };
    match kind {
        MessageKind::Data => packet.position = Some(data_position(datagram, header_bytes)?),
        MessageKind::Nack | MessageKind::Ack => {
            if header_bytes < COMMON_HEADER_BYTES + 4 {
                return Err(short(COMMON_HEADER_BYTES + 4));
            }
            packet.addressed_to = Some(be_u32(datagram, COMMON_HEADER_BYTES));
        }
        _ => {}
    }
    Ok(packet)
}

/// The position fields of a data message, whose header (`header_bytes`,
/// already checked present) holds the FEC payload id after 16 bytes.
fn data_position(datagram: &[u8], header_bytes: usize) -> Result<DataPosition, PacketError> {
    let fec_id = datagram.get(13).copied().unwrap_or(0);
    let payload_id_bytes = match fec_id {
        2 | 5 => 4,
        129 => 8,
        other => return Err(PacketError::FecId(other)),
    };
    let needed = OBJECT_HEADER_BYTES + payload_id_bytes;
    if header_bytes < needed {
        return Err(PacketError::Short { bytes: header_bytes, needed });
    }
    let id = &datagram[OBJECT_HEADER_BYTES..needed];
    let (block, symbol) = match fec_id {
        // RFC 5510 with m = 16 (libnorm's choice for fec id 2): 16-bit block, 16-bit symbol.
        2 => (u32::from(u16::from_be_bytes([id[0], id[1]])), u16::from_be_bytes([id[2], id[3]])),
        // RFC 5510 with m = 8: 24-bit block, 8-bit symbol.
        5 => (u32::from_be_bytes([0, id[0], id[1], id[2]]), u16::from(id[3])),
        // RFC 5740 §5.1.2 (small block, systematic): 32-bit block, 16-bit length, 16-bit symbol.
        _ => (be_u32(id, 0), u16::from_be_bytes([id[6], id[7]])),
    };
    Ok(DataPosition {
        instance: u16::from_be_bytes([datagram[8], datagram[9]]),
        object: u16::from_be_bytes([datagram[14], datagram[15]]),
        block,
        symbol,
    })
}

fn be_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// What a watcher saw of one sender.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SenderTally {
    /// Packets from it, of every kind.
    pub packets: u64,
    /// Bytes of those packets.
    pub bytes: u64,
    /// Data packets.
    pub data: u64,
    /// Data packets at or behind its furthest position: retransmissions.
    pub repairs: u64,
    /// Info packets.
    pub info: u64,
    /// Command packets (flushes, GRTT probes, squelches).
    pub commands: u64,
    /// NACK packets from receivers addressed to it.
    pub nacks: u64,
    /// Packets its sequence numbers skipped: never seen here.
    pub unseen: u64,
    /// Times its instance id changed (a restart).
    pub restarts: u64,
    #[serde(skip)]
    furthest: Option<DataPosition>,
    #[serde(skip)]
    next_sequence: Option<u16>,
}

impl SenderTally {
    fn record_sender_packet(&mut self, packet: &Packet, bytes: usize) {
        self.packets += 1;
        self.bytes += bytes as u64;
        if let Some(expected) = self.next_sequence {
            let skipped = packet.sequence.wrapping_sub(expected);
            // A skip of more than half the space is a reordered packet, not a loss.
            if skipped < 0x8000 {
                self.unseen += u64::from(skipped);
            }
        }
        self.next_sequence = Some(packet.sequence.wrapping_add(1));
        match packet.kind {
            MessageKind::Info => self.info += 1,
            MessageKind::Command => self.commands += 1,
            MessageKind::Data => {
                if let Some(position) = packet.position {
                    self.record_data(position);
                }
            }
            _ => {}
        }
    }

    fn record_data(&mut self, position: DataPosition) {
        self.data += 1;
        match self.furthest {
            Some(furthest) if furthest.instance != position.instance => {
                self.restarts += 1;
                self.furthest = Some(position);
            }
            Some(furthest) if !is_ahead(position, furthest) => self.repairs += 1,
            _ => self.furthest = Some(position),
        }
    }
}

/// Whether `position` comes after `furthest` in a sender's stream (object
/// ids compared modulo 2^16, as RFC 5740 does).
fn is_ahead(position: DataPosition, furthest: DataPosition) -> bool {
    let object_step = position.object.wrapping_sub(furthest.object);
    match object_step {
        0 => (position.block, position.symbol) > (furthest.block, furthest.symbol),
        step => step < 0x8000,
    }
}

/// What a watcher saw on a group: per sender, plus what it could not read.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Tally {
    /// By sender node id.
    pub senders: BTreeMap<u32, SenderTally>,
    /// NACK packets in all.
    pub nacks: u64,
    /// ACK packets in all.
    pub acks: u64,
    /// Datagrams that were not NORM packets.
    pub malformed: u64,
    /// Packets from senders beyond [`TALLY_SENDERS_MAX`].
    pub untracked: u64,
}

impl Tally {
    /// Counts one datagram.
    pub fn record(&mut self, datagram: &[u8]) {
        let Ok(packet) = parse(datagram) else {
            self.malformed += 1;
            return;
        };
        match packet.kind {
            MessageKind::Nack => {
                self.nacks += 1;
                let addressed_to = packet.addressed_to.unwrap_or(0);
                if let Some(sender) = self.senders.get_mut(&addressed_to) {
                    sender.nacks += 1;
                }
            }
            MessageKind::Ack => self.acks += 1,
            MessageKind::Report => {}
            _ => match self.sender(packet.source) {
                Some(sender) => sender.record_sender_packet(&packet, datagram.len()),
                None => self.untracked += 1,
            },
        }
    }

    fn sender(&mut self, source: u32) -> Option<&mut SenderTally> {
        if !self.senders.contains_key(&source) && self.senders.len() >= TALLY_SENDERS_MAX {
            return None;
        }
        Some(self.senders.entry(source).or_default())
    }

    /// Repairs over every sender.
    pub fn repairs(&self) -> u64 {
        self.senders.values().map(|sender| sender.repairs).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A data packet of fec id 5 from `source` at `object`/`block`/`symbol`.
    fn data(source: u32, sequence: u16, object: u16, block: u32, symbol: u8) -> Vec<u8> {
        let mut packet = vec![0x12, 5, 0, 0];
        packet[2..4].copy_from_slice(&sequence.to_be_bytes());
        packet.extend_from_slice(&source.to_be_bytes());
        packet.extend_from_slice(&[0x00, 0x07, 1, 0, 0, 5]);
        packet.extend_from_slice(&object.to_be_bytes());
        packet.extend_from_slice(&block.to_be_bytes()[1..]);
        packet.push(symbol);
        packet.extend_from_slice(b"payload");
        packet
    }

    fn nack(source: u32, to: u32) -> Vec<u8> {
        let mut packet = vec![0x14, 4, 0, 1];
        packet.extend_from_slice(&source.to_be_bytes());
        packet.extend_from_slice(&to.to_be_bytes());
        packet.extend_from_slice(&[0; 4]);
        packet
    }

    #[test]
    fn reads_a_data_packet() {
        let packet = parse(&data(9, 3, 40, 2, 17)).expect("parses");
        assert_eq!(packet.kind, MessageKind::Data);
        assert_eq!((packet.source, packet.sequence), (9, 3));
        assert_eq!(packet.position, Some(DataPosition { instance: 7, object: 40, block: 2, symbol: 17 }));
    }

    #[test]
    fn a_position_seen_again_is_a_repair_and_a_sequence_skip_is_unseen() {
        let mut tally = Tally::default();
        for (sequence, object, block, symbol) in [(0, 1, 0, 0), (1, 1, 0, 1), (3, 2, 0, 0), (4, 1, 0, 1), (5, 2, 0, 1)]
        {
            tally.record(&data(9, sequence, object, block, symbol));
        }
        tally.record(&nack(4, 9));
        let sender = &tally.senders[&9];
        assert_eq!((sender.data, sender.repairs, sender.unseen, sender.nacks), (5, 1, 1, 1));
        assert_eq!(tally.nacks, 1);
    }

    #[test]
    fn object_ids_wrap() {
        let mut tally = Tally::default();
        tally.record(&data(9, 0, 0xffff, 0, 0));
        tally.record(&data(9, 1, 0, 0, 0));
        tally.record(&data(9, 2, 0xfffe, 0, 0));
        assert_eq!(tally.senders[&9].repairs, 1);
    }

    #[test]
    fn garbage_is_counted_not_read() {
        let mut tally = Tally::default();
        for garbage in [&b""[..], b"\x12", b"\x22\x02\0\0\0\0\0\0", b"\x1f\x02\0\0\0\0\0\0", b"\x12\x40\0\0\0\0\0\0"] {
            tally.record(garbage);
        }
        assert_eq!(tally.malformed, 5);
        assert!(tally.senders.is_empty());
    }

    proptest::proptest! {
        /// Any datagram parses or is refused; none panics.
        #[test]
        fn never_panics(datagram in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            let mut tally = Tally::default();
            tally.record(&datagram);
            let _ = parse(&datagram);
        }

        /// Any valid data header with a type nibble of data keeps its fields.
        #[test]
        fn data_fields_round_trip(source: u32, sequence: u16, object: u16, block in 0u32..0x00ff_ffff, symbol: u8) {
            let packet = parse(&data(source, sequence, object, block, symbol)).expect("parses");
            let position = packet.position.expect("data");
            proptest::prop_assert_eq!((packet.source, packet.sequence), (source, sequence));
            proptest::prop_assert_eq!((position.object, position.block, position.symbol), (object, block, u16::from(symbol)));
        }
    }
}
