//! Reads a metadata document as a stream of element and text events.
//!
//! quick-xml does the tokenizing; this layer adds what it leaves to its
//! caller, so that every consumer (the document tree and the shared
//! automaton alike) accepts and refuses exactly the same inputs: UTF-8 only,
//! one root element, no text outside it, XML names, the five predefined
//! entities and valid character references, no DTD, unique attribute names,
//! and the limits [`XML_DEPTH_MAX`], [`XML_ELEMENTS_MAX`],
//! [`XML_ELEMENT_ATTRIBUTES_MAX`] and [`XML_ATTRIBUTES_MAX`]. Adjacent text,
//! CDATA and references are merged into one text event, as XPath sees one
//! text node.
//!
//! Metadata comes from any client, so the cost of reading a document must
//! stay linear in its size: quick-xml's own duplicate-attribute check
//! compares each attribute with every one before it, so it is off, and
//! duplicates are found here by sorting the names of each start tag.

use quick_xml::events::{BytesStart, BytesText, Event};
use quick_xml::Reader;

use crate::xpath::entities::{is_xml_name, push_attribute_value, resolve_reference};
use crate::xpath::lexer::is_xml_whitespace;
use crate::xpath::xml_error::XmlError;
use crate::xpath::{XML_ATTRIBUTES_MAX, XML_DEPTH_MAX, XML_ELEMENTS_MAX, XML_ELEMENT_ATTRIBUTES_MAX};

/// Receives the events of a document, in document order. Events arrive
/// only while the document is well-formed so far; the caller of
/// [`read_xml`] learns of a problem from its result.
pub(crate) trait XmlSink {
    /// A start tag (or an empty-element tag, followed by its end at once).
    fn start_element(&mut self, name: &str, attributes: &AttributeList);
    /// A text node's whole text; never empty, never outside the root.
    fn text(&mut self, text: &str);
    /// The end of the innermost open element.
    fn end_element(&mut self);
}

/// The attributes of one start tag, names and normalized values, kept in
/// one buffer that is reused from tag to tag.
#[derive(Debug, Default)]
pub(crate) struct AttributeList {
    text: String,
    /// For each attribute, where its name ends and where its value ends in
    /// `text`; its name starts where the previous value ends.
    ends: Vec<(usize, usize)>,
}

impl AttributeList {
    fn clear(&mut self) {
        self.text.clear();
        self.ends.clear();
    }

    /// Fails on the first name that appears twice: O(n log n) in the
    /// attributes of the tag, which are at most
    /// [`XML_ELEMENT_ATTRIBUTES_MAX`].
    fn check_unique(&self, position: usize) -> Result<(), XmlError> {
        if self.ends.len() < 2 {
            return Ok(());
        }
        let mut names: Vec<&str> = self.iter().map(|(name, _)| name).collect();
        names.sort_unstable();
        match names.windows(2).find(|pair| pair[0] == pair[1]) {
            Some(pair) => Err(XmlError::DuplicateAttribute { position, name: pair[0].to_string() }),
            None => Ok(()),
        }
    }

    /// The attributes in the order written, as `(name, value)`.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        let mut start = 0;
        self.ends.iter().map(move |&(name_end, value_end)| {
            let pair = (&self.text[start..name_end], &self.text[name_end..value_end]);
            start = value_end;
            pair
        })
    }
}

/// Reads `input` to the end, handing its events to `sink`.
pub(crate) fn read_xml(input: &[u8], sink: &mut impl XmlSink) -> Result<(), XmlError> {
    let text = std::str::from_utf8(input).map_err(|error| XmlError::NotUtf8 { position: error.valid_up_to() })?;
    let mut reader = Reader::from_str(text);
    let mut state = ReadState { text, ..ReadState::default() };
    loop {
        let position = offset(reader.buffer_position());
        let event = reader.read_event().map_err(|error| XmlError::Syntax {
            position: offset(reader.error_position()),
            reason: error.to_string(),
        })?;
        if !state.handle(event, position, sink)? {
            return Ok(());
        }
    }
}

/// A reader position as an offset; positions never exceed the input's length.
fn offset(position: u64) -> usize {
    usize::try_from(position).unwrap_or(usize::MAX)
}

fn utf8(bytes: &[u8], position: usize) -> Result<&str, XmlError> {
    std::str::from_utf8(bytes).map_err(|_| XmlError::NotUtf8 { position })
}

#[derive(Default)]
struct ReadState<'t> {
    text: &'t str,
    /// Where the start tag of each open element begins, outermost first.
    open: Vec<usize>,
    elements: usize,
    /// Attributes read so far in the whole document.
    attributes_total: usize,
    root_seen: bool,
    events_seen: bool,
    /// Text read since the last markup that ends a text node.
    pending: String,
    attributes: AttributeList,
}

impl ReadState<'_> {
    /// Handles one event; false once the input has ended well.
    fn handle(&mut self, event: Event<'_>, position: usize, sink: &mut impl XmlSink) -> Result<bool, XmlError> {
        let first = !self.events_seen;
        self.events_seen = true;
        match event {
            Event::Start(tag) => {
                self.start(&tag, position, sink)?;
                self.open.push(position);
            }
            Event::Empty(tag) => {
                self.start(&tag, position, sink)?;
                sink.end_element();
            }
            Event::End(_) => {
                self.flush(sink);
                self.open.pop();
                sink.end_element();
            }
            Event::Text(text) => self.text(&text, position)?,
            Event::CData(data) => {
                self.require_inside_root(position)?;
                let content = data.xml10_content().map_err(|_| XmlError::NotUtf8 { position })?;
                self.pending.push_str(&content);
            }
            Event::GeneralRef(reference) => {
                self.require_inside_root(position)?;
                let name = reference.decode().map_err(|_| XmlError::NotUtf8 { position })?;
                self.pending.push(resolve_reference(&name, position)?);
            }
            // Comments and processing instructions are nodes in XPath's
            // model, so they end the text node before them.
            Event::Comment(_) | Event::PI(_) => self.flush(sink),
            Event::Decl(_) if !first => return Err(XmlError::MisplacedDeclaration { position }),
            Event::Decl(_) => {}
            Event::DocType(_) => return Err(XmlError::DoctypeNotSupported { position }),
            Event::Eof => {
                self.finish(sink)?;
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn start(&mut self, tag: &BytesStart<'_>, position: usize, sink: &mut impl XmlSink) -> Result<(), XmlError> {
        let name = utf8(tag.name().into_inner(), position)?;
        if self.open.is_empty() && self.root_seen {
            return Err(XmlError::SecondRootElement { position, name: name.to_string() });
        }
        if !is_xml_name(name) {
            return Err(XmlError::InvalidName { position, name: name.to_string() });
        }
        self.elements += 1;
        if self.elements > XML_ELEMENTS_MAX {
            return Err(XmlError::TooManyElements { position, limit: XML_ELEMENTS_MAX });
        }
        if self.open.len() >= XML_DEPTH_MAX {
            return Err(XmlError::TooDeep { position, limit: XML_DEPTH_MAX });
        }
        self.read_attributes(tag, position)?;
        self.flush(sink);
        self.root_seen = true;
        sink.start_element(name, &self.attributes);
        Ok(())
    }

    fn read_attributes(&mut self, tag: &BytesStart<'_>, position: usize) -> Result<(), XmlError> {
        self.attributes.clear();
        for attribute in tag.attributes().with_checks(false) {
            let attribute =
                attribute.map_err(|error| XmlError::Syntax { position, reason: format!("in a start tag: {error}") })?;
            self.count_attribute(position)?;
            let name = utf8(attribute.key.into_inner(), position)?;
            if !is_xml_name(name) {
                return Err(XmlError::InvalidName { position, name: name.to_string() });
            }
            let raw = utf8(&attribute.value, position)?;
            if raw.contains('<') {
                return Err(XmlError::LessThanInAttribute { position, name: name.to_string() });
            }
            self.attributes.text.push_str(name);
            let name_end = self.attributes.text.len();
            push_attribute_value(raw, position, &mut self.attributes.text)?;
            self.attributes.ends.push((name_end, self.attributes.text.len()));
        }
        self.attributes.check_unique(position)
    }

    /// Counts one more attribute against the per-element and the document
    /// limits.
    fn count_attribute(&mut self, position: usize) -> Result<(), XmlError> {
        self.attributes_total += 1;
        if self.attributes.ends.len() >= XML_ELEMENT_ATTRIBUTES_MAX {
            let limit = XML_ELEMENT_ATTRIBUTES_MAX;
            return Err(XmlError::TooManyAttributes { position, limit, scope: "on one element" });
        }
        if self.attributes_total > XML_ATTRIBUTES_MAX {
            return Err(XmlError::TooManyAttributes { position, limit: XML_ATTRIBUTES_MAX, scope: "in the document" });
        }
        Ok(())
    }

    fn text(&mut self, text: &BytesText<'_>, position: usize) -> Result<(), XmlError> {
        let content = text.xml10_content().map_err(|_| XmlError::NotUtf8 { position })?;
        if self.open.is_empty() {
            // White space around the root element is not part of the document's tree.
            if content.chars().all(is_xml_whitespace) {
                return Ok(());
            }
            return Err(XmlError::TextOutsideRoot { position });
        }
        self.pending.push_str(&content);
        Ok(())
    }

    fn require_inside_root(&self, position: usize) -> Result<(), XmlError> {
        if self.open.is_empty() {
            return Err(XmlError::TextOutsideRoot { position });
        }
        Ok(())
    }

    fn flush(&mut self, sink: &mut impl XmlSink) {
        if !self.pending.is_empty() {
            sink.text(&self.pending);
            self.pending.clear();
        }
    }

    fn finish(&mut self, sink: &mut impl XmlSink) -> Result<(), XmlError> {
        let end = self.text.len();
        if let Some(&start) = self.open.last() {
            let tag = self.text.get(start + 1..).unwrap_or_default();
            let name_length =
                tag.find(|character: char| is_xml_whitespace(character) || character == '>' || character == '/');
            let name = tag[..name_length.unwrap_or(tag.len())].to_string();
            return Err(XmlError::UnclosedElement { position: end, name });
        }
        if !self.root_seen {
            return Err(XmlError::NoRootElement { position: end });
        }
        self.flush(sink);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records events as text, to check what a sink sees.
    #[derive(Default)]
    struct Recorder(Vec<String>);

    impl XmlSink for Recorder {
        fn start_element(&mut self, name: &str, attributes: &AttributeList) {
            let attributes: Vec<String> = attributes.iter().map(|(name, value)| format!(" {name}={value:?}")).collect();
            self.0.push(format!("<{name}{}>", attributes.concat()));
        }

        fn text(&mut self, text: &str) {
            self.0.push(format!("{text:?}"));
        }

        fn end_element(&mut self) {
            self.0.push("</>".to_string());
        }
    }

    fn events(input: &str) -> Result<Vec<String>, XmlError> {
        let mut recorder = Recorder::default();
        read_xml(input.as_bytes(), &mut recorder).map(|()| recorder.0)
    }

    #[test]
    fn merges_text_and_resolves_references() {
        let events = events("<?xml version='1.0'?>\n<a x='1 &amp; 2'>t&lt;<![CDATA[<c>]]>&#33;<b/><!-- c -->u</a>\n")
            .expect("well-formed");
        assert_eq!(events, ["<a x=\"1 & 2\">", "\"t<<c>!\"", "<b>", "</>", "\"u\"", "</>"]);
    }

    /// An input, a test of the error it must give, and the error's position.
    type Case = (&'static str, fn(&XmlError) -> bool, usize);

    #[test]
    fn refuses_malformed_documents_with_positions() {
        let cases: [Case; 12] = [
            ("", |error| matches!(error, XmlError::NoRootElement { .. }), 0),
            ("just text", |error| matches!(error, XmlError::TextOutsideRoot { .. }), 0),
            ("<a><b></a>", |error| matches!(error, XmlError::Syntax { .. }), 6),
            ("<a>", |error| matches!(error, XmlError::UnclosedElement { name, .. } if name == "a"), 3),
            ("<a/><b/>", |error| matches!(error, XmlError::SecondRootElement { .. }), 4),
            ("<a>&nbsp;</a>", |error| matches!(error, XmlError::UndefinedEntity { .. }), 3),
            ("<a>&#0;</a>", |error| matches!(error, XmlError::InvalidCharacterReference { .. }), 3),
            ("<a x='<'/>", |error| matches!(error, XmlError::LessThanInAttribute { .. }), 0),
            ("<!DOCTYPE a><a/>", |error| matches!(error, XmlError::DoctypeNotSupported { .. }), 0),
            (" <?xml version='1.0'?><a/>", |error| matches!(error, XmlError::MisplacedDeclaration { .. }), 1),
            (
                "<a x='1' y='0' x='2'/>",
                |error| matches!(error, XmlError::DuplicateAttribute { name, .. } if name == "x"),
                0,
            ),
            ("<a>b</a>tail", |error| matches!(error, XmlError::TextOutsideRoot { .. }), 8),
        ];
        for (input, expected, position) in cases {
            let error = events(input).expect_err(input);
            assert!(expected(&error), "{input}: {error}");
            assert_eq!(error.position(), position, "{input}: {error}");
        }
        let not_utf8 = read_xml(b"<a>\xff</a>", &mut Recorder::default()).expect_err("not UTF-8");
        assert_eq!(not_utf8, XmlError::NotUtf8 { position: 3 });
    }

    #[test]
    fn accepts_a_byte_order_mark_and_markup_around_the_root() {
        let events =
            events("\u{FEFF}<?xml version='1.0'?><!-- c --><?pi x?>\n<a/>\n<!-- after -->").expect("well-formed");
        assert_eq!(events, ["<a>", "</>"]);
    }

    #[test]
    fn limits_depth_and_element_count() {
        let deep = format!("{}{}", "<a>".repeat(XML_DEPTH_MAX + 1), "</a>".repeat(XML_DEPTH_MAX + 1));
        assert!(matches!(events(&deep), Err(XmlError::TooDeep { limit: XML_DEPTH_MAX, .. })));
        let fine = format!("{}{}", "<a>".repeat(XML_DEPTH_MAX), "</a>".repeat(XML_DEPTH_MAX));
        assert!(events(&fine).is_ok());
        let many = format!("<r>{}</r>", "<a/>".repeat(XML_ELEMENTS_MAX));
        assert!(matches!(events(&many), Err(XmlError::TooManyElements { .. })));
    }

    /// A start tag with `count` distinct attributes.
    fn element_with_attributes(count: usize) -> String {
        let attributes: String = (0..count).map(|index| format!(" a{index}='1'")).collect();
        format!("<e{attributes}/>")
    }

    #[test]
    fn limits_attributes_per_element_and_per_document() {
        let fine = element_with_attributes(XML_ELEMENT_ATTRIBUTES_MAX);
        assert!(events(&fine).is_ok());
        // The hostile case: tens of thousands of attributes on one element
        // are refused at the limit, after reading no more than it.
        let hostile = element_with_attributes(40_000);
        let error = events(&hostile).expect_err("too many on one element");
        assert!(matches!(error, XmlError::TooManyAttributes { limit: XML_ELEMENT_ATTRIBUTES_MAX, .. }), "{error}");
        let per_element = XML_ELEMENT_ATTRIBUTES_MAX;
        let elements = XML_ATTRIBUTES_MAX / per_element + 1;
        let spread = format!("<r>{}</r>", element_with_attributes(per_element).repeat(elements));
        let error = events(&spread).expect_err("too many in the document");
        assert!(matches!(error, XmlError::TooManyAttributes { limit: XML_ATTRIBUTES_MAX, .. }), "{error}");
        assert!(error.to_string().contains("in the document"), "{error}");
    }

    #[test]
    fn errors_say_what_where_and_why() {
        let error = events("<metadata><ATO></metadata>").expect_err("mismatched");
        let message = error.to_string();
        assert!(message.starts_with("XML: at byte 15: "), "{message}");
        assert!(message.contains("ATO") && message.contains("metadata"), "{message}");
    }
}
