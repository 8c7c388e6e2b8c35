//! The seam between the MQTT codec crate and the front-end.
//!
//! `mqtt-protocol-core` parses, validates and encodes both protocol
//! versions and keeps each connection's protocol state (packet ids, the
//! QoS 2 handshake, topic aliases, keep-alive). It gives one Rust type
//! per packet and version; this module turns a received packet into one
//! version-neutral [`Inbound`] and builds outgoing packets of either
//! version, so that the session speaks in MQTT's terms once.

use bytes::Bytes;
use mqtt_protocol_core::mqtt::packet::{
    v3_1_1, v5_0, AssignedClientIdentifier, ContentType, CorrelationData, GenericPacket, MaximumPacketSize,
    MessageExpiryInterval, PayloadFormat, PayloadFormatIndicator, Property, Qos, ReasonString, ReceiveMaximum,
    ResponseTopic, RetainAvailable, RetainHandling, ServerKeepAlive, SessionExpiryInterval,
    SharedSubscriptionAvailable, SubscriptionIdentifier, SubscriptionIdentifierAvailable, TopicAliasMaximum,
    UserProperty, WildcardSubscriptionAvailable,
};
use mqtt_protocol_core::mqtt::result_code::{
    ConnectReasonCode, ConnectReturnCode, DisconnectReasonCode, PubackReasonCode, PubrecReasonCode, SubackReasonCode,
    SubackReturnCode, UnsubackReasonCode,
};

/// A packet as the codec crate types it, with u16 packet ids.
pub type Packet = GenericPacket<u16>;

/// The protocol version a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// MQTT 3.1.1 (protocol level 4).
    V3,
    /// MQTT 5.0 (protocol level 5).
    V5,
}

/// The properties a PUBLISH (or a will) carries, MQTT 5 only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PublishProperties {
    /// Message Expiry Interval, seconds.
    pub expiry_s: Option<u32>,
    /// Payload Format Indicator (1 = UTF-8 text).
    pub payload_utf8: bool,
    /// Content Type.
    pub content_type: Option<String>,
    /// Response Topic.
    pub response_topic: Option<String>,
    /// Correlation Data.
    pub correlation_data: Option<Bytes>,
    /// User properties, in order, names may repeat.
    pub user: Vec<(String, String)>,
    /// Subscription identifiers (outgoing only).
    pub subscription_ids: Vec<u32>,
}

/// A PUBLISH from the client (topic aliases already resolved).
#[derive(Debug, Clone)]
pub struct InboundPublish {
    /// The topic name.
    pub topic: String,
    /// The payload.
    pub payload: Bytes,
    /// 0, 1 or 2.
    pub qos: u8,
    /// The retain flag.
    pub retain: bool,
    /// The packet id (QoS 1 and 2).
    pub packet_id: Option<u16>,
    /// MQTT 5 properties.
    pub properties: PublishProperties,
}

/// A will message, from CONNECT.
#[derive(Debug, Clone)]
pub struct Will {
    /// The will as a publish.
    pub publish: InboundPublish,
    /// MQTT 5 Will Delay Interval, seconds.
    pub delay_s: u32,
}

/// What CONNECT asks for.
#[derive(Debug, Clone)]
pub struct ConnectRequest {
    /// The version spoken.
    pub version: Version,
    /// The client identifier, possibly empty.
    pub client_id: String,
    /// Clean start (3.1.1: clean session).
    pub clean_start: bool,
    /// Keep alive, seconds; 0 = none.
    pub keep_alive_s: u16,
    /// MQTT 5 Session Expiry Interval; `None` when absent (3.1.1: from
    /// clean session).
    pub session_expiry_s: Option<u32>,
    /// The will.
    pub will: Option<Will>,
    /// The user name, when given.
    pub user_name: Option<String>,
    /// The password, when given (not printed by `Debug`).
    pub password: Option<Password>,
    /// MQTT 5 Maximum Packet Size: the largest packet the client takes.
    pub max_packet_bytes: Option<u32>,
}

/// A CONNECT's password. MQTT passwords are bytes; the broker's users
/// file holds hashes of text, so bytes that are not UTF-8 are taken as
/// their lossy text, which matches no hash made from a real password.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(pub String);

impl Password {
    fn of(bytes: &[u8]) -> Password {
        Password(String::from_utf8_lossy(bytes).into_owned())
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("<hidden>")
    }
}

/// One SUBSCRIBE entry.
#[derive(Debug, Clone)]
pub struct SubscribeEntry {
    /// The filter, as sent.
    pub filter: String,
    /// Maximum QoS asked for.
    pub qos: u8,
    /// MQTT 5 No Local.
    pub no_local: bool,
    /// MQTT 5 Retain As Published.
    pub retain_as_published: bool,
    /// MQTT 5 Retain Handling: 0 send, 1 send if new, 2 never.
    pub retain_handling: u8,
}

/// A SUBSCRIBE.
#[derive(Debug, Clone)]
pub struct SubscribeRequest {
    /// Its packet id.
    pub packet_id: u16,
    /// Its entries, in order.
    pub entries: Vec<SubscribeEntry>,
    /// MQTT 5 Subscription Identifier.
    pub subscription_id: Option<u32>,
    /// MQTT 5 user properties (where `sift-sql` and friends live).
    pub user: Vec<(String, String)>,
}

/// A received packet, version-neutral.
#[derive(Debug, Clone)]
pub enum Inbound {
    /// CONNECT.
    Connect(ConnectRequest),
    /// PUBLISH.
    Publish(InboundPublish),
    /// PUBACK of a QoS 1 delivery.
    Puback(u16),
    /// PUBREC of a QoS 2 delivery.
    Pubrec(u16),
    /// PUBREL of a QoS 2 publish.
    Pubrel(u16),
    /// PUBCOMP of a QoS 2 delivery.
    Pubcomp(u16),
    /// SUBSCRIBE.
    Subscribe(SubscribeRequest),
    /// UNSUBSCRIBE: packet id and filters.
    Unsubscribe(u16, Vec<String>),
    /// PINGREQ (answered by the codec).
    Pingreq,
    /// DISCONNECT: reason code (0 for 3.1.1) and MQTT 5 Session Expiry.
    Disconnect {
        /// The reason code.
        reason: u8,
        /// A new session expiry interval, when given.
        session_expiry_s: Option<u32>,
    },
    /// Something a server does not take (CONNACK, SUBACK, AUTH...).
    Unexpected(&'static str),
}

fn qos_level(qos: Qos) -> u8 {
    match qos {
        Qos::AtMostOnce => 0,
        Qos::AtLeastOnce => 1,
        Qos::ExactlyOnce => 2,
    }
}

fn qos_of(level: u8) -> Qos {
    match level {
        0 => Qos::AtMostOnce,
        1 => Qos::AtLeastOnce,
        _ => Qos::ExactlyOnce,
    }
}

/// The publish properties among `props`.
fn publish_properties(props: &[Property]) -> PublishProperties {
    let mut properties = PublishProperties::default();
    for prop in props {
        match prop {
            Property::MessageExpiryInterval(value) => properties.expiry_s = Some(value.val()),
            Property::PayloadFormatIndicator(value) => properties.payload_utf8 = value.val() == 1,
            Property::ContentType(value) => properties.content_type = Some(value.val().to_string()),
            Property::ResponseTopic(value) => properties.response_topic = Some(value.val().to_string()),
            Property::CorrelationData(value) => properties.correlation_data = Some(Bytes::copy_from_slice(value.val())),
            Property::UserProperty(value) => properties.user.push((value.key().to_string(), value.val().to_string())),
            _ => {}
        }
    }
    properties
}

fn user_properties(props: &[Property]) -> Vec<(String, String)> {
    props
        .iter()
        .filter_map(|prop| match prop {
            Property::UserProperty(value) => Some((value.key().to_string(), value.val().to_string())),
            _ => None,
        })
        .collect()
}

fn session_expiry(props: &[Property]) -> Option<u32> {
    props.iter().find_map(|prop| match prop {
        Property::SessionExpiryInterval(value) => Some(value.val()),
        _ => None,
    })
}

/// The version-neutral form of a received packet.
pub fn inbound(packet: Packet) -> Inbound {
    match packet {
        GenericPacket::V3_1_1Connect(connect) => Inbound::Connect(connect_v3(&connect)),
        GenericPacket::V5_0Connect(connect) => Inbound::Connect(connect_v5(&connect)),
        GenericPacket::V3_1_1Publish(publish) => Inbound::Publish(InboundPublish {
            topic: publish.topic_name().to_string(),
            payload: Bytes::copy_from_slice(publish.payload().as_slice()),
            qos: qos_level(publish.qos()),
            retain: publish.retain(),
            packet_id: publish.packet_id(),
            properties: PublishProperties::default(),
        }),
        GenericPacket::V5_0Publish(publish) => Inbound::Publish(InboundPublish {
            topic: publish.topic_name().to_string(),
            payload: Bytes::copy_from_slice(publish.payload().as_slice()),
            qos: qos_level(publish.qos()),
            retain: publish.retain(),
            packet_id: publish.packet_id(),
            properties: publish_properties(publish.props()),
        }),
        GenericPacket::V3_1_1Puback(ack) => Inbound::Puback(ack.packet_id()),
        GenericPacket::V5_0Puback(ack) => Inbound::Puback(ack.packet_id()),
        GenericPacket::V3_1_1Pubrec(ack) => Inbound::Pubrec(ack.packet_id()),
        GenericPacket::V5_0Pubrec(ack) => Inbound::Pubrec(ack.packet_id()),
        GenericPacket::V3_1_1Pubrel(ack) => Inbound::Pubrel(ack.packet_id()),
        GenericPacket::V5_0Pubrel(ack) => Inbound::Pubrel(ack.packet_id()),
        GenericPacket::V3_1_1Pubcomp(ack) => Inbound::Pubcomp(ack.packet_id()),
        GenericPacket::V5_0Pubcomp(ack) => Inbound::Pubcomp(ack.packet_id()),
        GenericPacket::V3_1_1Subscribe(subscribe) => Inbound::Subscribe(SubscribeRequest {
            packet_id: subscribe.packet_id(),
            entries: subscribe.entries().iter().map(subscribe_entry).collect(),
            subscription_id: None,
            user: Vec::new(),
        }),
        GenericPacket::V5_0Subscribe(subscribe) => Inbound::Subscribe(SubscribeRequest {
            packet_id: subscribe.packet_id(),
            entries: subscribe.entries().iter().map(subscribe_entry).collect(),
            subscription_id: subscribe.props().iter().find_map(|prop| match prop {
                Property::SubscriptionIdentifier(value) => Some(value.val()),
                _ => None,
            }),
            user: user_properties(subscribe.props()),
        }),
        GenericPacket::V3_1_1Unsubscribe(unsubscribe) => Inbound::Unsubscribe(
            unsubscribe.packet_id(),
            unsubscribe.entries().iter().map(|entry| entry.as_str().to_string()).collect(),
        ),
        GenericPacket::V5_0Unsubscribe(unsubscribe) => Inbound::Unsubscribe(
            unsubscribe.packet_id(),
            unsubscribe.entries().iter().map(|entry| entry.as_str().to_string()).collect(),
        ),
        GenericPacket::V3_1_1Pingreq(_) | GenericPacket::V5_0Pingreq(_) => Inbound::Pingreq,
        GenericPacket::V3_1_1Disconnect(_) => Inbound::Disconnect { reason: 0, session_expiry_s: None },
        GenericPacket::V5_0Disconnect(disconnect) => Inbound::Disconnect {
            reason: disconnect.reason_code().map_or(0, |code| code as u8),
            session_expiry_s: disconnect.props().as_deref().and_then(session_expiry),
        },
        GenericPacket::V5_0Auth(_) => Inbound::Unexpected("AUTH"),
        _ => Inbound::Unexpected("a packet only a server sends"),
    }
}

fn subscribe_entry(entry: &mqtt_protocol_core::mqtt::packet::SubEntry) -> SubscribeEntry {
    let options = entry.sub_opts();
    SubscribeEntry {
        filter: entry.topic_filter().to_string(),
        qos: qos_level(options.qos()),
        no_local: options.nl(),
        retain_as_published: options.rap(),
        retain_handling: match options.rh() {
            RetainHandling::SendRetained => 0,
            RetainHandling::SendRetainedIfNotExists => 1,
            RetainHandling::DoNotSendRetained => 2,
        },
    }
}

fn connect_v3(connect: &v3_1_1::Connect) -> ConnectRequest {
    let will = connect.will_flag().then(|| Will {
        publish: InboundPublish {
            topic: connect.will_topic().unwrap_or_default().to_string(),
            payload: Bytes::copy_from_slice(connect.will_payload().unwrap_or_default()),
            qos: qos_level(connect.will_qos()),
            retain: connect.will_retain(),
            packet_id: None,
            properties: PublishProperties::default(),
        },
        delay_s: 0,
    });
    ConnectRequest {
        version: Version::V3,
        client_id: connect.client_id().to_string(),
        clean_start: connect.clean_session(),
        keep_alive_s: connect.keep_alive(),
        session_expiry_s: None,
        will,
        user_name: connect.user_name().map(str::to_string),
        password: connect.password().map(Password::of),
        max_packet_bytes: None,
    }
}

fn connect_v5(connect: &v5_0::Connect) -> ConnectRequest {
    let will = connect.will_flag().then(|| {
        let delay_s = connect
            .will_props()
            .iter()
            .find_map(|prop| match prop {
                Property::WillDelayInterval(value) => Some(value.val()),
                _ => None,
            })
            .unwrap_or(0);
        Will {
            publish: InboundPublish {
                topic: connect.will_topic().unwrap_or_default().to_string(),
                payload: Bytes::copy_from_slice(connect.will_payload().unwrap_or_default()),
                qos: qos_level(connect.will_qos()),
                retain: connect.will_retain(),
                packet_id: None,
                properties: publish_properties(connect.will_props()),
            },
            delay_s,
        }
    });
    ConnectRequest {
        version: Version::V5,
        client_id: connect.client_id().to_string(),
        clean_start: connect.clean_start(),
        keep_alive_s: connect.keep_alive(),
        session_expiry_s: Some(session_expiry(connect.props()).unwrap_or(0)),
        will,
        user_name: connect.user_name().map(str::to_string),
        password: connect.password().map(Password::of),
        max_packet_bytes: connect.props().iter().find_map(|prop| match prop {
            Property::MaximumPacketSize(value) => Some(value.val()),
            _ => None,
        }),
    }
}

/// Why a packet could not be built: a value the protocol cannot carry.
pub type BuildError = mqtt_protocol_core::mqtt::result_code::MqttError;

/// What CONNACK tells an MQTT 5 client about the server.
#[derive(Debug, Clone, Default)]
pub struct ConnackProperties {
    /// The client identifier the server assigned, when it sent none.
    pub assigned_client_id: Option<String>,
    /// Session expiry granted, when lower than asked.
    pub session_expiry_s: Option<u32>,
    /// The server's Receive Maximum.
    pub receive_maximum: u16,
    /// The server's Topic Alias Maximum.
    pub topic_alias_max: u16,
    /// The largest packet the server takes.
    pub max_packet_bytes: u32,
    /// A keep-alive the client must use instead of its own.
    pub server_keep_alive_s: Option<u16>,
    /// A reason string for a refusal.
    pub reason: Option<String>,
}

/// A successful or refused CONNACK. `code` is the MQTT 5 reason code;
/// for 3.1.1 it is translated to the nearest return code.
pub fn connack(
    version: Version,
    session_present: bool,
    code: ConnectReasonCode,
    properties: &ConnackProperties,
) -> Result<Packet, BuildError> {
    if version == Version::V3 {
        let return_code = match code {
            ConnectReasonCode::Success => ConnectReturnCode::Accepted,
            ConnectReasonCode::UnsupportedProtocolVersion => ConnectReturnCode::UnacceptableProtocolVersion,
            ConnectReasonCode::ClientIdentifierNotValid => ConnectReturnCode::IdentifierRejected,
            ConnectReasonCode::BadUserNameOrPassword => ConnectReturnCode::BadUserNameOrPassword,
            ConnectReasonCode::NotAuthorized => ConnectReturnCode::NotAuthorized,
            _ => ConnectReturnCode::ServerUnavailable,
        };
        return Ok(v3_1_1::Connack::builder()
            .session_present(session_present)
            .return_code(return_code)
            .build()?
            .into());
    }
    let mut props: Vec<Property> = Vec::new();
    if code == ConnectReasonCode::Success {
        props.push(ReceiveMaximum::new(properties.receive_maximum)?.into());
        props.push(TopicAliasMaximum::new(properties.topic_alias_max)?.into());
        props.push(MaximumPacketSize::new(properties.max_packet_bytes)?.into());
        props.push(RetainAvailable::new(1)?.into());
        props.push(WildcardSubscriptionAvailable::new(1)?.into());
        props.push(SubscriptionIdentifierAvailable::new(1)?.into());
        props.push(SharedSubscriptionAvailable::new(1)?.into());
        if let Some(id) = &properties.assigned_client_id {
            props.push(AssignedClientIdentifier::new(id.as_str())?.into());
        }
        if let Some(expiry) = properties.session_expiry_s {
            props.push(SessionExpiryInterval::new(expiry)?.into());
        }
        if let Some(keep_alive) = properties.server_keep_alive_s {
            props.push(ServerKeepAlive::new(keep_alive)?.into());
        }
    }
    if let Some(reason) = &properties.reason {
        props.push(ReasonString::new(reason.as_str())?.into());
    }
    Ok(v5_0::Connack::builder().session_present(session_present).reason_code(code).props(props).build()?.into())
}

/// Longest reason string a SUBACK carries: a client's Maximum Packet
/// Size must still hold the SUBACK, and a reason is for people to read.
pub const SUBACK_REASON_BYTES_MAX: usize = 256;

/// A SUBACK with one reason code per entry (granted QoS 0-2, or a
/// failure code; 3.1.1 clients see any failure as 0x80), and for MQTT 5 a
/// reason string saying why entries were refused (cut to
/// [`SUBACK_REASON_BYTES_MAX`]).
pub fn suback(
    version: Version,
    packet_id: u16,
    codes: &[SubackReasonCode],
    reason: Option<&str>,
) -> Result<Packet, BuildError> {
    if version == Version::V3 {
        let return_codes = codes
            .iter()
            .map(|code| match code {
                SubackReasonCode::GrantedQos0 => SubackReturnCode::SuccessMaximumQos0,
                SubackReasonCode::GrantedQos1 => SubackReturnCode::SuccessMaximumQos1,
                SubackReasonCode::GrantedQos2 => SubackReturnCode::SuccessMaximumQos2,
                _ => SubackReturnCode::Failure,
            })
            .collect();
        return Ok(v3_1_1::GenericSuback::builder().packet_id(packet_id).return_codes(return_codes).build()?.into());
    }
    let builder = v5_0::GenericSuback::builder().packet_id(packet_id).reason_codes(codes.to_vec());
    Ok(match reason {
        Some(reason) => builder.props(vec![ReasonString::new(cut_at_char(reason, SUBACK_REASON_BYTES_MAX))?.into()]),
        None => builder,
    }
    .build()?
    .into())
}

/// The longest prefix of `text` of at most `bytes_max` bytes that ends on a
/// character boundary.
fn cut_at_char(text: &str, bytes_max: usize) -> &str {
    let mut end = text.len().min(bytes_max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// An UNSUBACK (reason codes for MQTT 5 only).
pub fn unsuback(version: Version, packet_id: u16, codes: &[UnsubackReasonCode]) -> Result<Packet, BuildError> {
    if version == Version::V3 {
        return Ok(v3_1_1::GenericUnsuback::builder().packet_id(packet_id).build()?.into());
    }
    Ok(v5_0::GenericUnsuback::builder().packet_id(packet_id).reason_codes(codes.to_vec()).build()?.into())
}

/// A PUBACK; `failure` (MQTT 5) refuses the message.
pub fn puback(version: Version, packet_id: u16, failure: Option<PubackReasonCode>) -> Result<Packet, BuildError> {
    if version == Version::V3 {
        return Ok(v3_1_1::GenericPuback::builder().packet_id(packet_id).build()?.into());
    }
    let builder = v5_0::GenericPuback::builder().packet_id(packet_id);
    Ok(match failure {
        Some(code) => builder.reason_code(code).build()?,
        None => builder.build()?,
    }
    .into())
}

/// A PUBREC; `failure` (MQTT 5) refuses the message.
pub fn pubrec(version: Version, packet_id: u16, failure: Option<PubrecReasonCode>) -> Result<Packet, BuildError> {
    if version == Version::V3 {
        return Ok(v3_1_1::GenericPubrec::builder().packet_id(packet_id).build()?.into());
    }
    let builder = v5_0::GenericPubrec::builder().packet_id(packet_id);
    Ok(match failure {
        Some(code) => builder.reason_code(code).build()?,
        None => builder.build()?,
    }
    .into())
}

/// A PUBREL, second step of a QoS 2 delivery.
pub fn pubrel(version: Version, packet_id: u16) -> Result<Packet, BuildError> {
    if version == Version::V3 {
        return Ok(v3_1_1::GenericPubrel::builder().packet_id(packet_id).build()?.into());
    }
    Ok(v5_0::GenericPubrel::builder().packet_id(packet_id).build()?.into())
}

/// A PUBCOMP, last step of a QoS 2 publish.
pub fn pubcomp(version: Version, packet_id: u16) -> Result<Packet, BuildError> {
    if version == Version::V3 {
        return Ok(v3_1_1::GenericPubcomp::builder().packet_id(packet_id).build()?.into());
    }
    Ok(v5_0::GenericPubcomp::builder().packet_id(packet_id).build()?.into())
}

/// A PUBLISH towards the client.
#[derive(Debug, Clone)]
pub struct OutboundPublish<'a> {
    /// The topic name.
    pub topic: &'a str,
    /// The payload.
    pub payload: &'a [u8],
    /// 0, 1 or 2.
    pub qos: u8,
    /// The retain flag.
    pub retain: bool,
    /// Its packet id (QoS 1 and 2).
    pub packet_id: Option<u16>,
    /// MQTT 5 properties (ignored for 3.1.1).
    pub properties: &'a PublishProperties,
}

/// A PUBLISH of either version.
pub fn publish(version: Version, outbound: &OutboundPublish<'_>) -> Result<Packet, BuildError> {
    if version == Version::V3 {
        let mut builder = v3_1_1::GenericPublish::builder()
            .topic_name(outbound.topic)?
            .qos(qos_of(outbound.qos))
            .retain(outbound.retain)
            .payload(outbound.payload);
        if let Some(packet_id) = outbound.packet_id {
            builder = builder.packet_id(packet_id);
        }
        return Ok(builder.build()?.into());
    }
    let mut builder = v5_0::GenericPublish::builder()
        .topic_name(outbound.topic)?
        .qos(qos_of(outbound.qos))
        .retain(outbound.retain)
        .payload(outbound.payload);
    if let Some(packet_id) = outbound.packet_id {
        builder = builder.packet_id(packet_id);
    }
    let props = publish_props(outbound.properties)?;
    if !props.is_empty() {
        builder = builder.props(props);
    }
    Ok(builder.build()?.into())
}

fn publish_props(properties: &PublishProperties) -> Result<Vec<Property>, BuildError> {
    let mut props: Vec<Property> = Vec::new();
    if properties.payload_utf8 {
        props.push(PayloadFormatIndicator::new(PayloadFormat::String)?.into());
    }
    if let Some(expiry) = properties.expiry_s {
        props.push(MessageExpiryInterval::new(expiry)?.into());
    }
    if let Some(content_type) = &properties.content_type {
        props.push(ContentType::new(content_type.as_str())?.into());
    }
    if let Some(response_topic) = &properties.response_topic {
        props.push(ResponseTopic::new(response_topic.as_str())?.into());
    }
    if let Some(correlation) = &properties.correlation_data {
        props.push(CorrelationData::new(correlation.to_vec())?.into());
    }
    for (name, value) in &properties.user {
        props.push(UserProperty::new(name.as_str(), value.as_str())?.into());
    }
    for id in &properties.subscription_ids {
        props.push(SubscriptionIdentifier::new(*id)?.into());
    }
    Ok(props)
}

/// A server's DISCONNECT (MQTT 5 only; a 3.1.1 connection just closes).
pub fn disconnect(code: DisconnectReasonCode, reason: &str) -> Result<Packet, BuildError> {
    let mut props: Vec<Property> = Vec::new();
    if !reason.is_empty() {
        props.push(ReasonString::new(reason)?.into());
    }
    let builder = v5_0::Disconnect::builder().reason_code(code);
    Ok(match props.is_empty() {
        true => builder.build()?,
        false => builder.props(props).build()?,
    }
    .into())
}

/// MQTT 5's Topic Alias Maximum property id.
const TOPIC_ALIAS_MAXIMUM_ID: u8 = 0x22;

/// Reads a variable byte integer at `at`: its value and its length.
fn variable_int(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    let mut value = 0usize;
    for index in 0..4 {
        let byte = *bytes.get(at + index)?;
        value |= usize::from(byte & 0x7f) << (7 * index);
        if byte & 0x80 == 0 {
            return Some((value, index + 1));
        }
    }
    None
}

/// Bytes a CONNECT property's value takes at `at`, by its id; `None` for
/// an id CONNECT does not carry.
fn connect_property_len(bytes: &[u8], id: u8, at: usize) -> Option<usize> {
    let string_len = |at: usize| Some(2 + usize::from(u16::from_be_bytes([*bytes.get(at)?, *bytes.get(at + 1)?])));
    match id {
        0x11 | 0x27 => Some(4),
        0x21 | TOPIC_ALIAS_MAXIMUM_ID => Some(2),
        0x17 | 0x19 => Some(1),
        0x15 | 0x16 => string_len(at),
        0x26 => {
            let key = string_len(at)?;
            Some(key + string_len(at + key)?)
        }
        _ => None,
    }
}

/// Works around the codec crate (0.7.9), which panics on an MQTT 5
/// CONNECT whose Topic Alias Maximum is 0, a value the protocol allows
/// ("the client accepts no topic aliases"). When `bytes` starts with such
/// a CONNECT, its value is changed to 1 in place; the front-end never
/// sends topic aliases, so the client sees no difference. Returns whether
/// it changed anything.
pub fn patch_connect(bytes: &mut [u8]) -> bool {
    let Some((_, length_bytes)) = variable_int(bytes, 1) else { return false };
    let header = 1 + length_bytes;
    // Protocol name "MQTT", level 5, flags, keep-alive.
    if bytes.first() != Some(&0x10) || bytes.get(header..header + 7) != Some(&[0, 4, b'M', b'Q', b'T', b'T', 5]) {
        return false;
    }
    let properties_at = header + 10;
    let Some((properties_len, properties_len_bytes)) = variable_int(bytes, properties_at) else { return false };
    let mut at = properties_at + properties_len_bytes;
    let end = at + properties_len;
    while at < end {
        let Some(&id) = bytes.get(at) else { return false };
        let Some(value_len) = connect_property_len(bytes, id, at + 1) else { return false };
        if id == TOPIC_ALIAS_MAXIMUM_ID && bytes.get(at + 1..at + 3) == Some(&[0, 0]) {
            bytes[at + 2] = 1;
            return true;
        }
        at += 1 + value_len;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v5 CONNECT for client id "c" with the given properties.
    fn connect_with(properties: &[u8]) -> Vec<u8> {
        let mut body = vec![0, 4, b'M', b'Q', b'T', b'T', 5, 0x02, 0, 60, properties.len() as u8];
        body.extend_from_slice(properties);
        body.extend_from_slice(&[0, 1, b'c']);
        let mut packet = vec![0x10, body.len() as u8];
        packet.extend(body);
        packet
    }

    #[test]
    fn a_zero_topic_alias_maximum_becomes_one_and_nothing_else_changes() {
        // Session Expiry, a user property, then Topic Alias Maximum 0.
        let properties = [0x11, 0, 0, 0, 9, 0x26, 0, 1, b'k', 0, 1, b'v', 0x22, 0, 0];
        let mut packet = connect_with(&properties);
        let mut expected = packet.clone();
        let alias_value_at = expected.len() - 4;
        expected[alias_value_at] = 1;
        assert!(patch_connect(&mut packet));
        assert_eq!(packet, expected);
        let mut nonzero = connect_with(&[0x22, 0, 5]);
        assert!(!patch_connect(&mut nonzero));
        let mut none = connect_with(&[]);
        assert!(!patch_connect(&mut none));
        let mut truncated = connect_with(&properties);
        truncated.truncate(14);
        assert!(!patch_connect(&mut truncated));
        let mut v3 = vec![0x10, 0x0d, 0, 4, b'M', b'Q', b'T', b'T', 4, 0x02, 0, 0, 0, 1, b'f'];
        assert!(!patch_connect(&mut v3));
    }
}
