//! The AFRL JBI content-based routing workload (JBI report §5.2-§6,
//! Fig. 5-12).
//!
//! Three object types, `ato`, `basic` and `xmlxpath` (Fig. 7-10), are
//! published on one topic each (`jbi.ato`, `jbi.basic`, `jbi.xmlxpath`; the
//! report's subscribe request names the object type as its topic, §5.2.1).
//! An object is an XML metadata document of about 2 KB (a descriptive
//! header, the Fig. 11 fields, a description) and a textual payload (§5.3),
//! 2 KB by default as in the base case of §7.3. A subscription names its
//! object type's topic and tests that type's Fig. 11 fields ([`fields`])
//! with XPath: each field with its Fig. 11 probability, against a Fig. 12
//! value ([`values`]).
//!
//! Objects and subscriptions draw from different random streams of the
//! seed, as the report's publishers and subscribers used different seeds "so
//! all matches came from the Boolean operations in the XPATH being
//! satisfied" (§6). Every object carries every Fig. 11 field: the report's
//! "probability of a field being present in an XPATH expression or included
//! in the published object" is read as the subscriptions' choice of fields,
//! since Fig. 8-10 give each schema a fixed set of fields.
//!
//! With the default ranges an object matches a random subscription of its
//! type with probability about 0.32 % (`ato`), 0.77 % (`basic`) and 0.70 %
//! (`xmlxpath`); for `ato` and `xmlxpath` almost only through the
//! subscriptions that do not test the serial number (20 and 30 % of them).
//! With 2,000 subscriptions of a type an object reaches
//! about 6, 15 and 14 subscribers, the order of the 1.5, 11 and 18 copies
//! per object of the report's heaviest run (Table 8).

pub mod fields;
mod metadata;
pub mod values;
mod xpath;

use crate::message::Message;
use crate::topic::TopicName;
use crate::workload::seed::{item_rng, Stream};
use crate::workload::{text, Subscription, Workload, WorkloadError, LANGUAGE_XPATH};

pub use fields::{Comparison, Field, ATO_FIELDS, BASIC_FIELDS, XMLXPATH_FIELDS};
pub use values::{FieldValue, ValueKind};

use xpath::Spelling;

/// Default size of an object's metadata document, in bytes ("~2 KB").
pub const METADATA_BYTES_DEFAULT: usize = 2048;

/// Default payload size: the 2 KB base case of the payload experiment
/// (§7.3, which also uses 25 KB and 50 KB).
pub const PAYLOAD_BYTES_DEFAULT: usize = 2048;

/// Base of the subscription streams, one per object type.
const SUBSCRIPTION_STREAM_BASE: u64 = 0x6a62_6900;

/// Base of the object streams, one per object type.
const OBJECT_STREAM_BASE: u64 = 0x6a62_6980;

/// The three JBI object types of Fig. 7-10.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectType {
    /// `jbi.rl.af.mil.ato`: an air tasking order (Fig. 8).
    Ato,
    /// `jbi.rl.af.mil.basic`: a period between two date-time groups (Fig. 9).
    Basic,
    /// `jbi.rl.af.mil.xmlxpath`: an object described by its origin (Fig. 10).
    XmlXpath,
}

impl ObjectType {
    /// All three, in the order [`JbiWorkload::object`] cycles through them.
    pub const ALL: [ObjectType; 3] = [ObjectType::Ato, ObjectType::Basic, ObjectType::XmlXpath];

    /// The short name, `ato`, `basic` or `xmlxpath`.
    pub fn name(self) -> &'static str {
        match self {
            ObjectType::Ato => "ato",
            ObjectType::Basic => "basic",
            ObjectType::XmlXpath => "xmlxpath",
        }
    }

    /// The topic objects of this type are published on, and the topic
    /// filter of its subscriptions.
    pub fn topic(self) -> &'static str {
        match self {
            ObjectType::Ato => "jbi.ato",
            ObjectType::Basic => "jbi.basic",
            ObjectType::XmlXpath => "jbi.xmlxpath",
        }
    }

    /// The schema name of Fig. 7, written in the metadata header.
    pub fn schema(self) -> &'static str {
        match self {
            ObjectType::Ato => "mil.af.rl.jbi.training.ato",
            ObjectType::Basic => "mil.af.rl.jbi.training.basic",
            ObjectType::XmlXpath => "mil.af.rl.jbi.training.xmlxpath",
        }
    }

    /// The randomized fields of the type (Fig. 11).
    pub fn fields(self) -> &'static [Field] {
        match self {
            ObjectType::Ato => &ATO_FIELDS,
            ObjectType::Basic => &BASIC_FIELDS,
            ObjectType::XmlXpath => &XMLXPATH_FIELDS,
        }
    }

    /// The element below `/metadata` that every object of the type has.
    fn root_element(self) -> &'static str {
        match self {
            ObjectType::Ato => "ATO",
            ObjectType::Basic => "BasicTemporal",
            ObjectType::XmlXpath => "Orig",
        }
    }

    /// How its subscriptions are spelled: `basic` as Fig. 6, the others
    /// with one predicate per element.
    fn spelling(self) -> Spelling {
        match self {
            ObjectType::Basic => Spelling::AbsolutePaths,
            ObjectType::Ato | ObjectType::XmlXpath => Spelling::ElementPredicates,
        }
    }

    /// The type's place in [`ObjectType::ALL`].
    fn ordinal(self) -> usize {
        match self {
            ObjectType::Ato => 0,
            ObjectType::Basic => 1,
            ObjectType::XmlXpath => 2,
        }
    }
}

/// A seeded JBI workload.
#[derive(Debug, Clone)]
pub struct JbiWorkload {
    seed: u64,
    topics: [TopicName; 3],
    metadata_bytes: usize,
    payload_bytes: usize,
}

impl JbiWorkload {
    /// The workload of `seed`, with 2 KB metadata and 2 KB payloads.
    pub fn new(seed: u64) -> Result<JbiWorkload, WorkloadError> {
        let [ato, basic, xmlxpath] = ObjectType::ALL.map(|object_type| TopicName::new(object_type.topic()));
        Ok(JbiWorkload {
            seed,
            topics: [ato?, basic?, xmlxpath?],
            metadata_bytes: METADATA_BYTES_DEFAULT,
            payload_bytes: PAYLOAD_BYTES_DEFAULT,
        })
    }

    /// The same workload with payloads of `bytes` bytes (§7.3: 2, 25, 50 KB).
    pub fn with_payload_bytes(mut self, bytes: usize) -> JbiWorkload {
        self.payload_bytes = bytes;
        self
    }

    /// The same workload with metadata documents of about `bytes` bytes
    /// (at least, and less than a word more); §8 asks for larger documents.
    pub fn with_metadata_bytes(mut self, bytes: usize) -> JbiWorkload {
        self.metadata_bytes = bytes;
        self
    }

    /// Subscription `index`: the types take turns, `ato`, `basic`,
    /// `xmlxpath`, so any three consecutive subscriptions cover them all.
    pub fn subscription(&self, index: u64) -> Subscription {
        let (object_type, type_index) = split_index(index);
        self.subscription_of(object_type, type_index)
    }

    /// Subscription `index` of one object type.
    pub fn subscription_of(&self, object_type: ObjectType, index: u64) -> Subscription {
        let stream = Stream(SUBSCRIPTION_STREAM_BASE + object_type.ordinal() as u64);
        let mut rng = item_rng(self.seed, stream, index);
        let tests = xpath::draw_tests(object_type.fields(), &mut rng);
        let filter = xpath::filter_text(&tests, object_type.spelling(), object_type.root_element());
        (object_type.topic().to_string(), LANGUAGE_XPATH, filter)
    }

    /// Object `index`: the types take turns as in [`JbiWorkload::subscription`].
    pub fn object(&self, index: u64) -> Message {
        let (object_type, type_index) = split_index(index);
        self.object_of(object_type, type_index)
    }

    /// Object `index` of one object type: every Fig. 11 field with a Fig. 12
    /// value, in a metadata document, and a textual payload.
    pub fn object_of(&self, object_type: ObjectType, index: u64) -> Message {
        let stream = Stream(OBJECT_STREAM_BASE + object_type.ordinal() as u64);
        let mut rng = item_rng(self.seed, stream, index);
        let fields = object_type.fields();
        let values: Vec<FieldValue> = fields.iter().map(|field| field.kind.draw(&mut rng)).collect();
        let document = metadata::document(object_type.schema(), fields, &values, &mut rng, self.metadata_bytes);
        let payload = text::payload(&mut rng, self.payload_bytes);
        let mut message = Message::new(self.topics[object_type.ordinal()].clone(), payload);
        message.metadata = Some(document.into());
        message
    }
}

impl Workload for JbiWorkload {
    fn subscription(&self, index: u64) -> Subscription {
        JbiWorkload::subscription(self, index)
    }

    fn message(&self, index: u64) -> Message {
        self.object(index)
    }
}

/// The object type of item `index` when types take turns, and the item's
/// index among those of its type.
fn split_index(index: u64) -> (ObjectType, u64) {
    let count = ObjectType::ALL.len() as u64;
    // The remainder is below 3.
    (ObjectType::ALL[(index % count) as usize], index / count)
}

#[cfg(test)]
mod tests;
