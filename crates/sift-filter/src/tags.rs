//! The `tags` filter language: a conjunction of `name OP value` predicates.
//!
//! ```text
//! a=1, b>2, sym="IBM", flag=true
//! ```
//!
//! Predicates are separated by commas (there is no `AND`, `OR` or nesting);
//! whitespace around names, operators, values and commas is ignored. The
//! operators are `= != < <= > >=`. A bare value is typed by its form with
//! [`Value::parse_typed`] (`true`/`false`, integers, decimals, otherwise a
//! string); a value in double quotes is always a string and may contain
//! commas, spaces and, escaped with a backslash, `"` and `\`.
//!
//! A message matches when every predicate holds. A predicate on a property the
//! message lacks does not hold, whatever the operator (so `x!=1` needs `x`).
//! Numbers compare across integers and floats; strings compare with strings,
//! ordered by code point; booleans only support `=` and `!=`; comparing
//! different types (string against number, boolean against number) is false.

use sift_core::{Message, Value};

use crate::compare::{compare, Comparison, ComparisonOp, Scalar};
use crate::error::{quote_fragment, FilterError};
use crate::language::FilterLanguage;

/// A parsed tags filter: predicates that must all hold.
#[derive(Debug, Clone, PartialEq)]
pub struct TagFilter {
    /// The predicates, in the order written; never empty when parsed.
    pub predicates: Vec<TagPredicate>,
}

/// One `name OP value` predicate of a tags filter.
#[derive(Debug, Clone, PartialEq)]
pub struct TagPredicate {
    /// The property name, case-sensitive.
    pub name: String,
    /// The comparison.
    pub op: ComparisonOp,
    /// The value the property is compared with.
    pub value: Value,
}

impl TagFilter {
    /// Parses a tags filter, or says where and why it is malformed.
    pub fn parse(text: &str) -> Result<TagFilter, FilterError> {
        let mut parser = TagParser { text, position: 0 };
        let mut predicates = Vec::new();
        loop {
            predicates.push(parser.predicate()?);
            parser.skip_whitespace();
            match parser.peek() {
                None => return Ok(TagFilter { predicates }),
                Some(',') => parser.position += 1,
                Some(_) => return Err(parser.unexpected("`,` or end of input")),
            }
        }
    }

    /// True when the message satisfies every predicate.
    pub fn matches(&self, message: &Message) -> bool {
        self.predicates.iter().all(|predicate| predicate.matches(message))
    }
}

impl TagPredicate {
    /// True when the message has the property and it compares as required.
    pub fn matches(&self, message: &Message) -> bool {
        let Some(property) = message.property(&self.name) else {
            return false;
        };
        match compare(&Scalar::from_value(property), &Scalar::from_value(&self.value)) {
            Comparison::Numeric(Some(ordering)) | Comparison::Text(ordering) => self.op.holds(ordering),
            // NaN is unordered: it differs from everything and orders with
            // nothing, as in IEEE 754.
            Comparison::Numeric(None) => self.op == ComparisonOp::NotEqual,
            Comparison::Boolean { equal } => self.op.holds_for_equality(equal).unwrap_or(false),
            Comparison::Incompatible => false,
        }
    }
}

impl std::fmt::Display for TagPredicate {
    /// Writes the predicate so that [`TagFilter::parse`] reads it back; strings
    /// are always quoted so that they stay strings.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}{}", self.name, self.op.tags_symbol())?;
        match &self.value {
            Value::Str(text) => {
                let escaped = text.replace('\\', "\\\\").replace('"', "\\\"");
                write!(formatter, "\"{escaped}\"")
            }
            other => write!(formatter, "{other}"),
        }
    }
}

impl std::fmt::Display for TagFilter {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (index, predicate) in self.predicates.iter().enumerate() {
            if index > 0 {
                formatter.write_str(",")?;
            }
            write!(formatter, "{predicate}")?;
        }
        Ok(())
    }
}

/// Characters that end a name or a bare value.
fn is_delimiter(character: char) -> bool {
    character.is_whitespace() || matches!(character, ',' | '"')
}

/// Characters that start a comparison operator.
fn is_operator_character(character: char) -> bool {
    matches!(character, '=' | '!' | '<' | '>')
}

/// A cursor over the text of a tags filter.
struct TagParser<'t> {
    text: &'t str,
    position: usize,
}

impl TagParser<'_> {
    fn peek(&self) -> Option<char> {
        self.text[self.position..].chars().next()
    }

    fn skip_whitespace(&mut self) {
        let rest = &self.text[self.position..];
        self.position += rest.len() - rest.trim_start().len();
    }

    /// Consumes characters while `accept` holds and returns them.
    fn take_while(&mut self, accept: impl Fn(char) -> bool) -> &str {
        let start = self.position;
        let rest = &self.text[start..];
        let length = rest.find(|character| !accept(character)).unwrap_or(rest.len());
        self.position += length;
        &self.text[start..self.position]
    }

    /// An error saying what was expected at the current position.
    fn unexpected(&self, expected: &'static str) -> FilterError {
        let found = match self.peek() {
            None => "end of input".to_string(),
            Some(character) => quote_fragment(character.encode_utf8(&mut [0; 4])),
        };
        FilterError::Unexpected { language: FilterLanguage::Tags, position: self.position, expected, found }
    }

    fn predicate(&mut self) -> Result<TagPredicate, FilterError> {
        self.skip_whitespace();
        let name = self.take_while(|character| !is_delimiter(character) && !is_operator_character(character));
        if name.is_empty() {
            return Err(self.unexpected("a tag name"));
        }
        let name = name.to_string();
        self.skip_whitespace();
        let op = self.operator()?;
        self.skip_whitespace();
        let value = self.value()?;
        Ok(TagPredicate { name, op, value })
    }

    fn operator(&mut self) -> Result<ComparisonOp, FilterError> {
        let rest = &self.text[self.position..];
        // Two-character operators first, so that `<=` is not read as `<`.
        let candidates = [
            ("!=", ComparisonOp::NotEqual),
            ("<=", ComparisonOp::LessOrEqual),
            (">=", ComparisonOp::GreaterOrEqual),
            ("=", ComparisonOp::Equal),
            ("<", ComparisonOp::Less),
            (">", ComparisonOp::Greater),
        ];
        for (symbol, op) in candidates {
            if rest.starts_with(symbol) {
                self.position += symbol.len();
                return Ok(op);
            }
        }
        Err(self.unexpected("a comparison operator (=, !=, <, <=, >, >=)"))
    }

    fn value(&mut self) -> Result<Value, FilterError> {
        if self.peek() == Some('"') {
            return self.quoted_string();
        }
        // A value that starts like an operator is almost surely a typo such
        // as `a==1`, so it is refused rather than read as the string `=1`.
        if self.peek().is_none_or(is_operator_character) {
            return Err(self.unexpected("a value"));
        }
        let bare = self.take_while(|character| !is_delimiter(character));
        if bare.is_empty() {
            return Err(self.unexpected("a value"));
        }
        Ok(Value::parse_typed(bare))
    }

    fn quoted_string(&mut self) -> Result<Value, FilterError> {
        let start = self.position;
        self.position += 1;
        let mut content = String::new();
        loop {
            match self.peek() {
                None => {
                    return Err(FilterError::Unexpected {
                        language: FilterLanguage::Tags,
                        position: start,
                        expected: "a closing `\"` for the string that starts here",
                        found: "end of input".to_string(),
                    });
                }
                Some('"') => {
                    self.position += 1;
                    return Ok(Value::Str(content.into()));
                }
                Some('\\') => {
                    self.position += 1;
                    match self.peek() {
                        Some(escaped @ ('"' | '\\')) => {
                            content.push(escaped);
                            self.position += 1;
                        }
                        _ => return Err(self.unexpected("`\"` or `\\` after `\\`")),
                    }
                }
                Some(character) => {
                    content.push(character);
                    self.position += character.len_utf8();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sift_core::TopicName;

    fn message(properties: &[(&str, Value)]) -> Message {
        let mut message = Message::new(TopicName::new("t").expect("valid topic"), "");
        message.properties = properties.iter().map(|(name, value)| (name.to_string(), value.clone())).collect();
        message
    }

    fn matches(filter: &str, message: &Message) -> bool {
        TagFilter::parse(filter).expect("filter parses").matches(message)
    }

    fn error_at(filter: &str) -> (usize, String) {
        let error = TagFilter::parse(filter).expect_err("filter is malformed");
        assert_eq!(error.language(), FilterLanguage::Tags);
        (error.position(), error.to_string())
    }

    #[test]
    fn parses_predicates_with_typed_values() {
        let filter = TagFilter::parse(r#"a=1, b > 2.5 ,sym="IBM",flag=true, name=KTJR, q="4 2""#).expect("parses");
        let expected = [
            ("a", ComparisonOp::Equal, Value::Int(1)),
            ("b", ComparisonOp::Greater, Value::Float(2.5)),
            ("sym", ComparisonOp::Equal, Value::Str("IBM".into())),
            ("flag", ComparisonOp::Equal, Value::Bool(true)),
            ("name", ComparisonOp::Equal, Value::Str("KTJR".into())),
            ("q", ComparisonOp::Equal, Value::Str("4 2".into())),
        ];
        assert_eq!(filter.predicates.len(), expected.len());
        for (predicate, (name, op, value)) in filter.predicates.iter().zip(expected) {
            assert_eq!(predicate.name, name);
            assert_eq!(predicate.op, op);
            assert_eq!(predicate.value, value);
        }
    }

    #[test]
    fn each_operator_compares_numbers() {
        let five = message(&[("x", Value::Int(5))]);
        let cases = [
            ("x=5", true),
            ("x=4", false),
            ("x!=4", true),
            ("x!=5", false),
            ("x<6", true),
            ("x<5", false),
            ("x<=5", true),
            ("x<=4", false),
            ("x>4", true),
            ("x>5", false),
            ("x>=5", true),
            ("x>=6", false),
        ];
        for (filter, expected) in cases {
            assert_eq!(matches(filter, &five), expected, "{filter}");
        }
    }

    #[test]
    fn numbers_promote_between_integer_and_float() {
        assert!(matches("x=1.0", &message(&[("x", Value::Int(1))])));
        assert!(matches("x=1", &message(&[("x", Value::Float(1.0))])));
        assert!(matches("x<1.5", &message(&[("x", Value::Int(1))])));
        assert!(!matches("x>1", &message(&[("x", Value::Float(1.0))])));
    }

    #[test]
    fn strings_compare_as_strings_and_order_lexicographically() {
        let ibm = message(&[("sym", Value::Str("IBM".into()))]);
        assert!(matches("sym=IBM", &ibm));
        assert!(matches(r#"sym="IBM""#, &ibm));
        assert!(!matches("sym=ibm", &ibm));
        assert!(matches("sym!=HP", &ibm));
        assert!(matches("sym>HP", &ibm));
        assert!(matches("sym<=IBM", &ibm));
        let digits = message(&[("code", Value::Str("42".into()))]);
        assert!(!matches("code=42", &digits), "string against int");
        assert!(matches(r#"code="42""#, &digits));
    }

    #[test]
    fn booleans_support_only_equality() {
        let flagged = message(&[("flag", Value::Bool(true))]);
        assert!(matches("flag=true", &flagged));
        assert!(matches("flag!=false", &flagged));
        assert!(!matches("flag>false", &flagged));
        assert!(!matches("flag=1", &flagged), "boolean against number");
        assert!(!matches("flag!=1", &flagged), "incompatible types never hold");
    }

    #[test]
    fn missing_properties_make_every_predicate_false() {
        let empty = message(&[]);
        for filter in ["x=1", "x!=1", "x<1", "x>=1", "x=abc"] {
            assert!(!matches(filter, &empty), "{filter}");
        }
    }

    #[test]
    fn all_predicates_must_hold() {
        let quote = message(&[
            ("a", Value::Int(1)),
            ("b", Value::Int(3)),
            ("sym", Value::Str("IBM".into())),
            ("flag", Value::Bool(true)),
        ]);
        assert!(matches(r#"a=1,b>2,sym="IBM",flag=true"#, &quote));
        assert!(!matches(r#"a=1,b>3,sym="IBM",flag=true"#, &quote));
    }

    #[test]
    fn quoted_strings_keep_commas_spaces_and_escapes() {
        let filter = TagFilter::parse(r#"s="a, b \"c\" \\""#).expect("parses");
        assert_eq!(filter.predicates[0].value, Value::Str(r#"a, b "c" \"#.into()));
        assert!(filter.matches(&message(&[("s", Value::Str(r#"a, b "c" \"#.into()))])));
    }

    #[test]
    fn parse_errors_name_the_position() {
        let cases = [
            ("", 0, "expected a tag name, found end of input"),
            ("a=1,", 4, "expected a tag name"),
            ("=1", 0, "expected a tag name, found `=`"),
            ("a", 1, "expected a comparison operator"),
            ("a 1", 2, "expected a comparison operator"),
            ("a=", 2, "expected a value, found end of input"),
            ("a==1", 2, "expected a value, found `=`"),
            ("a=1 b=2", 4, "expected `,` or end of input, found `b`"),
            ("a=hello world", 8, "expected `,` or end of input"),
            ("a=\"open", 2, "closing `\"`"),
            (r#"a="\n""#, 4, "after `\\`"),
            ("a=1,,b=2", 4, "expected a tag name, found `,`"),
        ];
        for (filter, position, message) in cases {
            let (actual_position, text) = error_at(filter);
            assert_eq!(actual_position, position, "{filter}: {text}");
            assert!(text.contains(message), "{filter}: {text}");
            assert!(text.starts_with("tags: at byte "), "{text}");
        }
    }

    #[test]
    fn display_reads_back_as_the_same_filter() {
        let text = r#"a=1,b>2.5,sym="I,B M",flag!=true,q<="4\"2""#;
        let filter = TagFilter::parse(text).expect("parses");
        assert_eq!(filter.to_string(), text);
        assert_eq!(TagFilter::parse(&filter.to_string()), Ok(filter));
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,40}") {
            let _ = TagFilter::parse(&text);
        }

        #[test]
        fn filter_like_text_never_panics(text in "[a-z=!<>,\" \\\\0-9.]{0,30}") {
            if let Ok(filter) = TagFilter::parse(&text) {
                // A value such as 1e999 types as an infinite float, which
                // prints as `inf` and so reads back as a string.
                prop_assume!(filter.predicates.iter().all(|predicate| {
                    !matches!(predicate.value, Value::Float(float) if !float.is_finite())
                }));
                let reparsed = TagFilter::parse(&filter.to_string());
                prop_assert_eq!(reparsed.as_ref().ok(), Some(&filter));
            }
        }
    }
}
