//! Entity and character references, names, and attribute-value
//! normalization: the parts of XML well-formedness that the XML reader
//! leaves to its caller.

use crate::xpath::lexer::{is_name_part, is_name_start, is_xml_whitespace};
use crate::xpath::xml_error::XmlError;

/// The character a reference stands for; `reference` is what lies between
/// `&` and `;`, and `position` is where the reference starts, for errors.
pub(crate) fn resolve_reference(reference: &str, position: usize) -> Result<char, XmlError> {
    match reference {
        "lt" => Ok('<'),
        "gt" => Ok('>'),
        "amp" => Ok('&'),
        "apos" => Ok('\''),
        "quot" => Ok('"'),
        _ => match reference.strip_prefix('#') {
            Some(number) => character_reference(number)
                .ok_or_else(|| XmlError::InvalidCharacterReference { position, reference: reference.to_string() }),
            None => Err(XmlError::UndefinedEntity { position, name: reference.to_string() }),
        },
    }
}

/// `#65` or `#x41` without the `#`, if it names a character XML allows.
fn character_reference(number: &str) -> Option<char> {
    let (digits, radix) = match number.strip_prefix('x') {
        Some(hex) => (hex, 16),
        None => (number, 10),
    };
    // from_str_radix would also take a leading `+`, which XML does not.
    if digits.is_empty() || !digits.chars().all(|character| character.is_digit(radix)) {
        return None;
    }
    let code = u32::from_str_radix(digits, radix).ok()?;
    char::from_u32(code).filter(|character| is_xml_char(*character))
}

/// XML 1.0's `Char` production: the characters a document may contain.
fn is_xml_char(character: char) -> bool {
    matches!(character as u32, 0x9 | 0xA | 0xD | 0x20..=0xD7FF | 0xE000..=0xFFFD | 0x10000..=0x10FFFF)
}

/// True when `name` is an XML name (namespace prefixes included). Letters
/// and digits are judged by Unicode's classes, a slight widening of XML's
/// own tables that keeps every name the XPath lexer can read.
pub(crate) fn is_xml_name(name: &str) -> bool {
    let mut characters = name.chars();
    characters.next().is_some_and(|first| is_name_start(first) || first == ':')
        && characters.all(|character| is_name_part(character) || character == ':')
}

/// Appends the value of an attribute to `out`, from its text as written
/// between the quotes: references resolved, and each white-space character
/// (a `\r\n` pair counting as one) turned into a space, as XML's
/// attribute-value normalization requires. `position` is where the tag
/// starts, for errors.
pub(crate) fn push_attribute_value(raw: &str, position: usize, out: &mut String) -> Result<(), XmlError> {
    let mut rest = raw;
    while let Some(character) = rest.chars().next() {
        rest = &rest[character.len_utf8()..];
        match character {
            '&' => {
                let Some(length) = rest.find(';') else {
                    let reason = "`&` in an attribute value without a closing `;`".to_string();
                    return Err(XmlError::Syntax { position, reason });
                };
                out.push(resolve_reference(&rest[..length], position)?);
                rest = &rest[length + 1..];
            }
            '\r' => {
                out.push(' ');
                rest = rest.strip_prefix('\n').unwrap_or(rest);
            }
            other if is_xml_whitespace(other) => out.push(' '),
            other => out.push(other),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_predefined_and_character_references() {
        assert_eq!(resolve_reference("amp", 0), Ok('&'));
        assert_eq!(resolve_reference("#65", 0), Ok('A'));
        assert_eq!(resolve_reference("#x263A", 0), Ok('☺'));
        assert!(matches!(resolve_reference("nbsp", 3), Err(XmlError::UndefinedEntity { position: 3, .. })));
        for bad in ["#", "#x", "#0", "#xD800", "#+5", "#x110000", "#99999999999"] {
            assert!(matches!(resolve_reference(bad, 0), Err(XmlError::InvalidCharacterReference { .. })), "{bad}");
        }
    }

    #[test]
    fn normalizes_attribute_values() {
        let mut value = String::new();
        push_attribute_value("a\r\nb\tc&lt;&#x20;d", 0, &mut value).expect("valid");
        assert_eq!(value, "a b c< d");
        assert!(push_attribute_value("a & b", 0, &mut String::new()).is_err());
    }

    #[test]
    fn names_follow_xml_rules() {
        assert!(is_xml_name("jbi:ATO"));
        assert!(is_xml_name("_x-1.y"));
        assert!(!is_xml_name("1x"));
        assert!(!is_xml_name("a b"));
        assert!(!is_xml_name(""));
    }
}
