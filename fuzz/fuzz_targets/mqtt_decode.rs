//! Feeds arbitrary bytes, after a valid CONNECT or as one, to the MQTT server codec
//! as a hostile client would, and takes every packet it yields through the
//! front-end's seam: the version-neutral form, the topic and message
//! mapping, and filter parsing. A PUBLISH that maps is encoded again by
//! the front-end and decoded by a second codec: topic, payload and
//! properties must come back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mqtt_protocol_core::mqtt::connection::Event;
use mqtt_protocol_core::mqtt::packet::GenericPacketTrait;
use mqtt_protocol_core::mqtt::{common::Cursor, role, Connection, Version as CodecVersion};
use sift_mqtt::codec::{self, Inbound, OutboundPublish, Version};
use sift_mqtt::message::{message_of_publish, publish_properties};
use sift_mqtt::topic::{topic_to_mqtt, Filter};

/// MQTT 3.1.1 and 5.0 CONNECTs with client id "f" and clean start.
const CONNECT_V3: &[u8] = &[0x10, 0x0d, 0, 4, b'M', b'Q', b'T', b'T', 4, 0x02, 0, 0, 0, 1, b'f'];
const CONNECT_V5: &[u8] = &[0x10, 0x0e, 0, 4, b'M', b'Q', b'T', b'T', 5, 0x02, 0, 0, 0, 0, 1, b'f'];

fn packets(bytes: &[u8]) -> Vec<mqtt_protocol_core::mqtt::packet::GenericPacket<u16>> {
    let mut server = Connection::<role::Server>::new(CodecVersion::Undetermined);
    server.set_auto_pub_response(false);
    let mut cursor = Cursor::new(bytes);
    let mut received = Vec::new();
    while (cursor.position() as usize) < bytes.len() {
        let events = server.recv(&mut cursor);
        let closing = events.iter().any(|event| matches!(event, Event::RequestClose));
        received.extend(events.into_iter().filter_map(|event| match event {
            Event::NotifyPacketReceived(packet) => Some(packet),
            _ => None,
        }));
        if closing {
            break;
        }
    }
    received
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let (connect, version) = if selector & 1 == 0 { (CONNECT_V3, Version::V3) } else { (CONNECT_V5, Version::V5) };
    // Half the inputs bring their own CONNECT, patched as the server
    // patches it; the others follow a valid one.
    let mut stream = if selector & 2 == 0 { connect.to_vec() } else { Vec::new() };
    stream.extend_from_slice(rest);
    if selector & 2 != 0 {
        sift_mqtt::codec::patch_connect(&mut stream);
    }
    for packet in packets(&stream) {
        match codec::inbound(packet) {
            Inbound::Publish(publish) => {
                let Ok(message) = message_of_publish(&publish, 0) else { continue };
                let topic = topic_to_mqtt(message.topic.as_str());
                assert_eq!(topic, publish.topic, "the topic maps back");
                let properties = publish_properties(&message, 0);
                let outbound = OutboundPublish {
                    topic: &topic,
                    payload: &message.payload,
                    qos: 0,
                    retain: false,
                    packet_id: None,
                    properties: &properties,
                };
                let Ok(encoded) = codec::publish(version, &outbound) else { continue };
                let mut again = connect.to_vec();
                again.extend_from_slice(&encoded.to_continuous_buffer());
                let Some(Inbound::Publish(decoded)) = packets(&again).into_iter().skip(1).map(codec::inbound).next() else {
                    panic!("the front-end's PUBLISH decodes");
                };
                assert_eq!(decoded.topic, publish.topic);
                assert_eq!(decoded.payload, publish.payload);
                assert_eq!(decoded.properties.content_type, publish.properties.content_type);
                assert_eq!(decoded.properties.correlation_data, publish.properties.correlation_data);
            }
            Inbound::Subscribe(request) => {
                for entry in &request.entries {
                    let _ = Filter::parse(&entry.filter);
                }
            }
            _ => {}
        }
    }
});
