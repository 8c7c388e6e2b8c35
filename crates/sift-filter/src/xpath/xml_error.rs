//! Why a metadata document was refused.

/// Why bytes given as a metadata document are not one.
///
/// Every variant carries the 0-based byte offset into the input where the
/// problem was found. Reading never panics; every malformed input ends in
/// one of these.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum XmlError {
    /// The input is not UTF-8, the only encoding accepted.
    #[error("XML: at byte {position}: not UTF-8 (metadata documents must be UTF-8)")]
    NotUtf8 {
        /// Offset of the first byte that is not part of valid UTF-8.
        position: usize,
    },
    /// The XML reader found markup that breaks the XML grammar.
    #[error("XML: at byte {position}: {reason}")]
    Syntax {
        /// Offset of the markup.
        position: usize,
        /// What is wrong, in the reader's words.
        reason: String,
    },
    /// The input has no element at all (it is empty, or only text, comments
    /// or processing instructions).
    #[error("XML: at byte {position}: no root element: a document needs exactly one")]
    NoRootElement {
        /// Offset of the end of the input.
        position: usize,
    },
    /// A second element follows the root element.
    #[error("XML: at byte {position}: second root element `{name}`: a document has exactly one")]
    SecondRootElement {
        /// Offset of its start tag.
        position: usize,
        /// Its name.
        name: String,
    },
    /// Characters other than white space stand outside the root element.
    #[error("XML: at byte {position}: text outside the root element")]
    TextOutsideRoot {
        /// Offset of the text.
        position: usize,
    },
    /// The input ends inside an element.
    #[error("XML: at byte {position}: element `{name}` is not closed before the end of the input")]
    UnclosedElement {
        /// Offset of the end of the input.
        position: usize,
        /// The innermost open element.
        name: String,
    },
    /// An entity reference other than the five XML predefines (`&lt;`,
    /// `&gt;`, `&amp;`, `&apos;`, `&quot;`); documents cannot declare more,
    /// since DTDs are refused.
    #[error("XML: at byte {position}: undefined entity `&{name};`")]
    UndefinedEntity {
        /// Offset of the reference.
        position: usize,
        /// The entity's name.
        name: String,
    },
    /// A character reference that is malformed or names a character XML
    /// does not allow.
    #[error("XML: at byte {position}: invalid character reference `&{reference};`")]
    InvalidCharacterReference {
        /// Offset of the reference.
        position: usize,
        /// The reference between `&` and `;`.
        reference: String,
    },
    /// An element or attribute name that is not an XML name.
    #[error("XML: at byte {position}: `{name}` is not a valid XML name")]
    InvalidName {
        /// Offset of the tag holding the name.
        position: usize,
        /// The name as written.
        name: String,
    },
    /// An attribute value holds `<`, which XML forbids there.
    #[error("XML: at byte {position}: attribute `{name}` holds `<`, which XML does not allow in attribute values")]
    LessThanInAttribute {
        /// Offset of the tag holding the attribute.
        position: usize,
        /// The attribute's name.
        name: String,
    },
    /// A document type declaration; they are refused so that no document
    /// can declare entities (and with them, entity expansion attacks).
    #[error("XML: at byte {position}: document type declarations (`<!DOCTYPE`) are not supported")]
    DoctypeNotSupported {
        /// Offset of the declaration.
        position: usize,
    },
    /// An XML declaration (`<?xml …?>`) that is not at the very start.
    #[error("XML: at byte {position}: the XML declaration must come first in the document")]
    MisplacedDeclaration {
        /// Offset of the declaration.
        position: usize,
    },
    /// Elements nest deeper than [`crate::xpath::XML_DEPTH_MAX`].
    #[error("XML: at byte {position}: elements nest more than {limit} levels deep")]
    TooDeep {
        /// Offset of the start tag that crossed the limit.
        position: usize,
        /// The depth limit.
        limit: usize,
    },
    /// An element with more attributes than
    /// [`crate::xpath::XML_ELEMENT_ATTRIBUTES_MAX`], or a document with more
    /// than [`crate::xpath::XML_ATTRIBUTES_MAX`] in all.
    #[error("XML: at byte {position}: more than {limit} attributes {scope}")]
    TooManyAttributes {
        /// Offset of the start tag that crossed the limit.
        position: usize,
        /// The limit crossed.
        limit: usize,
        /// `on one element` or `in the document`.
        scope: &'static str,
    },
    /// An element names the same attribute twice.
    #[error("XML: at byte {position}: attribute {name:?} appears twice in one start tag")]
    DuplicateAttribute {
        /// Offset of the start tag.
        position: usize,
        /// The attribute's name.
        name: String,
    },
    /// More elements than [`crate::xpath::XML_ELEMENTS_MAX`].
    #[error("XML: at byte {position}: more than {limit} elements")]
    TooManyElements {
        /// Offset of the start tag that crossed the limit.
        position: usize,
        /// The element limit.
        limit: usize,
    },
}

impl XmlError {
    /// The 0-based byte offset into the input where the problem was found.
    pub fn position(&self) -> usize {
        match self {
            XmlError::NotUtf8 { position }
            | XmlError::Syntax { position, .. }
            | XmlError::NoRootElement { position }
            | XmlError::SecondRootElement { position, .. }
            | XmlError::TextOutsideRoot { position }
            | XmlError::UnclosedElement { position, .. }
            | XmlError::UndefinedEntity { position, .. }
            | XmlError::InvalidCharacterReference { position, .. }
            | XmlError::InvalidName { position, .. }
            | XmlError::LessThanInAttribute { position, .. }
            | XmlError::DoctypeNotSupported { position }
            | XmlError::MisplacedDeclaration { position }
            | XmlError::TooDeep { position, .. }
            | XmlError::TooManyElements { position, .. }
            | XmlError::TooManyAttributes { position, .. }
            | XmlError::DuplicateAttribute { position, .. } => *position,
        }
    }
}
