//! Property tests of the content index: after any history of insertions and
//! removals, `ContentIndex::matching` returns exactly the subscriptions of
//! the partitions asked for whose filter, evaluated alone, passes the
//! message. Filters come in every language; messages carry properties,
//! headers and, sometimes, a metadata document for the XPath filters, which
//! is sometimes malformed.
//!
//! Besides filters drawn at random, the generators make the shapes the
//! index clusters (see the index's module documentation): many conjunctions
//! sharing one equality with different ranges (`s = 'IBM' AND a > 1`, the
//! selectors workload) and sharing several equalities beside a selective
//! one (`s="IBM",flag=true,b=2`, the GES workload), with messages drawn
//! from the same few values so that such filters often match. A third
//! test fills the sorted runs of clusters (one equality and one range) with
//! bounds and values at the edges of the number comparison rules.

use std::collections::HashMap;

use proptest::prelude::*;
use sift_core::{DeliveryMode, Message, Priority, TopicName, Value};
use sift_filter::index::{ContentIndex, IndexScratch};
use sift_filter::{ComparisonOp, ContentFilter, FilterLanguage, TagFilter, TagPredicate};

/// Property names shared by filters and messages; `missing` is never sent.
const NAMES: [&str; 5] = ["a", "b", "s", "flag", "missing"];

/// Topics the messages are published on.
const TOPICS: [&str; 6] = ["a.b", "t.1", "t.22", "x", "orders.eu.7", "b.a"];

/// Partitions are drawn from 0 to this, exclusive.
const PARTITIONS: u32 = 4;

/// Subscription keys are drawn from 0 to this, exclusive.
const KEYS: u16 = 12;

/// Element names shared by metadata documents and XPath filters.
const XML_NAMES: [&str; 3] = ["a", "b", "c"];

/// Attribute values and text shared by metadata documents and XPath
/// filters: numbers, a padded number, a non-number.
const XML_VALUES: [&str; 5] = ["1", "2", "10", "x", " 3 "];

/// Most children an element of a generated document has.
const XML_CHILDREN_MAX: usize = 3;

fn any_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        (-3_i64..4).prop_map(Value::Int),
        any::<i64>().prop_map(Value::Int),
        prop::sample::select(vec![0.0, -0.0, 0.5, 1.0, -2.5, 2.0, 1e300, f64::INFINITY, f64::NAN])
            .prop_map(Value::Float),
        prop::sample::select(vec!["", "x", "IBM", "HP", "it's", "1"]).prop_map(|text| Value::Str(text.into())),
        any::<bool>().prop_map(Value::Bool),
    ]
}

/// A generated metadata document node.
#[derive(Debug, Clone)]
enum XmlNode {
    Element { name: &'static str, attributes: Vec<(&'static str, &'static str)>, children: Vec<XmlNode> },
    Text(&'static str),
}

impl XmlNode {
    fn write(&self, out: &mut String) {
        match self {
            XmlNode::Text(text) => out.push_str(text),
            XmlNode::Element { name, attributes, children } => {
                out.push_str(&format!("<{name}"));
                for (attribute, value) in attributes {
                    out.push_str(&format!(" {attribute}=\"{value}\""));
                }
                out.push('>');
                children.iter().for_each(|child| child.write(out));
                out.push_str(&format!("</{name}>"));
            }
        }
    }
}

fn xml_element(children: impl Strategy<Value = Vec<XmlNode>>) -> impl Strategy<Value = XmlNode> {
    let value = || prop::option::of(prop::sample::select(XML_VALUES.to_vec()));
    (prop::sample::select(XML_NAMES.to_vec()), value(), value(), children).prop_map(
        |(name, x_value, y_value, children)| {
            let attributes =
                x_value.map(|value| ("x", value)).into_iter().chain(y_value.map(|value| ("y", value))).collect();
            XmlNode::Element { name, attributes, children }
        },
    )
}

/// Well-formed documents over the small vocabulary.
fn well_formed_metadata() -> impl Strategy<Value = Vec<u8>> {
    let leaf =
        prop_oneof![prop::sample::select(XML_VALUES.to_vec()).prop_map(XmlNode::Text), xml_element(Just(Vec::new()))];
    let node = leaf.prop_recursive(3, 24, 3, |inner| xml_element(prop::collection::vec(inner, 0..=XML_CHILDREN_MAX)));
    xml_element(prop::collection::vec(node, 0..=XML_CHILDREN_MAX)).prop_map(|root| {
        let mut text = String::new();
        root.write(&mut text);
        text.into_bytes()
    })
}

/// Documents the XPath filters must all refuse: cut short, badly nested,
/// several roots, not UTF-8, or not XML at all.
fn malformed_metadata() -> impl Strategy<Value = Vec<u8>> {
    let fixed = prop::sample::select(vec![
        &b""[..],
        b"x",
        b"<a>",
        b"<a><b></a></b>",
        b"<a/><b/>",
        b"<a x=1/>",
        b"<a>\xff</a>",
        b"<a>&nope;</a>",
    ])
    .prop_map(<[u8]>::to_vec);
    let cut = well_formed_metadata().prop_map(|mut bytes| {
        bytes.pop();
        bytes
    });
    prop_oneof![fixed, cut]
}

fn any_metadata() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![2 => Just(None), 5 => well_formed_metadata().prop_map(Some), 1 => malformed_metadata().prop_map(Some)]
}

fn any_message() -> impl Strategy<Value = Message> {
    let properties = prop::collection::vec(prop::option::of(any_value()), NAMES.len() - 1);
    let repeat = prop::option::of((0..NAMES.len() - 1, any_value()));
    let headers = (0_u8..10, any::<bool>());
    (prop::sample::select(TOPICS.to_vec()), properties, repeat, headers, any_metadata()).prop_map(
        |(topic, values, repeat, (priority, persistent), metadata)| {
            let mut message = Message::new(TopicName::new(topic).expect("valid topic"), "");
            message.metadata = metadata.map(Into::into);
            message.properties =
                NAMES.iter().zip(values).filter_map(|(name, value)| Some((name.to_string(), value?))).collect();
            // A repeated name: filters must see only the first.
            if let Some((index, value)) = repeat {
                message.properties.push((NAMES[index].to_string(), value));
            }
            message.priority = Priority::new(priority).expect("priority in range");
            message.delivery_mode = if persistent { DeliveryMode::Persistent } else { DeliveryMode::Reliable };
            message
        },
    )
}

/// A property value from the few the shaped filters test, so that they
/// often match; sometimes absent.
fn shaped_value(values: Vec<Value>) -> impl Strategy<Value = Option<Value>> {
    prop::option::weighted(0.85, prop::sample::select(values))
}

/// Messages in the shapes' vocabulary: a symbol, small numbers (integer,
/// float and NaN), and a flag.
fn shaped_message() -> impl Strategy<Value = Message> {
    let symbols = ["IBM", "HP", "x"].map(|text| Value::Str(text.into())).to_vec();
    let numbers =
        vec![Value::Int(-1), Value::Int(0), Value::Int(1), Value::Int(2), Value::Float(1.5), Value::Float(f64::NAN)];
    let small = vec![Value::Int(0), Value::Int(1), Value::Int(2), Value::Float(2.0)];
    let flags = vec![Value::Bool(true), Value::Bool(false)];
    let values = (shaped_value(symbols), shaped_value(numbers), shaped_value(small), shaped_value(flags));
    (prop::sample::select(TOPICS.to_vec()), values, any::<bool>()).prop_map(|(topic, (s, a, b, flag), repeat)| {
        let mut message = Message::new(TopicName::new(topic).expect("valid topic"), "");
        let named = [("s", s), ("a", a), ("b", b), ("flag", flag)];
        message.properties = named.into_iter().filter_map(|(name, value)| Some((name.to_string(), value?))).collect();
        // A repeated name, which filters must ignore.
        if repeat {
            message.properties.push(("a".to_string(), Value::Int(2)));
        }
        message
    })
}

/// Number bounds and values where integer and float comparison differ or
/// meet: whole floats, 2^53 + 1 and its float neighbour, negative zero,
/// the largest integer, infinities.
fn edge_number() -> impl Strategy<Value = Value> {
    prop::sample::select(vec![
        Value::Int(-1),
        Value::Int(0),
        Value::Int(1),
        Value::Int(2),
        Value::Int(i64::MAX),
        Value::Int(9_007_199_254_740_993),
        Value::Float(9_007_199_254_740_992.0),
        Value::Float(-0.0),
        Value::Float(0.5),
        Value::Float(1.0),
        Value::Float(1e300),
        Value::Float(f64::INFINITY),
        Value::Float(f64::NEG_INFINITY),
    ])
}

/// A value of `a` in the sorted-run messages: an edge number, NaN, a
/// string (which orders only with string bounds) or a boolean.
fn sorted_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => edge_number(),
        1 => Just(Value::Float(f64::NAN)),
        1 => prop::sample::select(vec!["", "HP", "HZ", "IBM"]).prop_map(|text| Value::Str(text.into())),
        1 => any::<bool>().prop_map(Value::Bool),
    ]
}

/// The sorted-run shape: `s = SYMBOL AND a OP bound`, as a tags filter
/// (number or string bounds) or a selector, sometimes OR'ed with a second
/// one (so that the subscription's key can be found twice), sometimes with
/// a residual test (which keeps it on the checked path).
fn sorted_filter() -> impl Strategy<Value = ContentFilter> {
    let op = prop::sample::select(vec![
        ComparisonOp::Less,
        ComparisonOp::LessOrEqual,
        ComparisonOp::Greater,
        ComparisonOp::GreaterOrEqual,
    ]);
    let symbol = prop::sample::select(vec!["IBM", "HP"]);
    let text = prop::sample::select(vec!["", "HP", "IBM"]).prop_map(|text| Value::Str(text.into()));
    let bound = prop_oneof![3 => edge_number(), 1 => text];
    let tags = (symbol.clone(), op, bound).prop_map(|(symbol, op, bound)| {
        let tag = |name: &str, op, value| TagPredicate { name: name.to_string(), op, value };
        ContentFilter::Tags(TagFilter {
            predicates: vec![tag("s", ComparisonOp::Equal, Value::Str(symbol.into())), tag("a", op, bound)],
        })
    });
    let literal = prop::sample::select(vec![
        "-1",
        "0",
        "1",
        "2",
        "0.5",
        "1.0",
        "9007199254740993",
        "9007199254740992.0",
        "1e300",
    ]);
    let sql_op = prop::sample::select(vec!["<", "<=", ">", ">="]);
    let conjunction = (symbol, prop::sample::select(vec!["a", "a", "JMSPriority"]), sql_op, literal)
        .prop_map(|(symbol, operand, op, bound)| format!("s = '{symbol}' AND {operand} {op} {bound}"));
    let residual = prop::sample::select(vec!["", "", "", " AND a <> 1"]);
    let sql = prop_oneof![
        3 => (conjunction.clone(), residual).prop_map(|(conjunction, residual)| format!("{conjunction}{residual}")),
        1 => (conjunction.clone(), conjunction).prop_map(|(left, right)| format!("({left}) OR ({right})")),
    ]
    .prop_map(|text| {
        ContentFilter::parse(FilterLanguage::Sql, &text).unwrap_or_else(|error| panic!("{text}: {error}"))
    });
    prop_oneof![tags, sql]
}

/// A message for the sorted runs: a symbol, a value of `a`, a priority.
fn sorted_message() -> impl Strategy<Value = Message> {
    let symbol = prop::option::weighted(0.9, prop::sample::select(vec!["IBM", "HP"]));
    (symbol, prop::option::weighted(0.9, sorted_value()), 0_u8..10).prop_map(|(symbol, value, priority)| {
        let mut message = Message::new(TopicName::new("x").expect("valid topic"), "");
        let named = [("s", symbol.map(|symbol| Value::Str(symbol.into()))), ("a", value)];
        message.properties = named.into_iter().filter_map(|(name, value)| Some((name.to_string(), value?))).collect();
        message.priority = Priority::new(priority).expect("priority in range");
        message
    })
}

fn any_op() -> impl Strategy<Value = ComparisonOp> {
    prop::sample::select(vec![
        ComparisonOp::Equal,
        ComparisonOp::NotEqual,
        ComparisonOp::Less,
        ComparisonOp::LessOrEqual,
        ComparisonOp::Greater,
        ComparisonOp::GreaterOrEqual,
    ])
}

fn any_name() -> impl Strategy<Value = &'static str> {
    prop::sample::select(NAMES.to_vec())
}

/// Tags filters, built directly so that every value type appears.
fn any_tags() -> impl Strategy<Value = ContentFilter> {
    let predicate = (any_name(), any_op(), any_value()).prop_map(|(name, op, value)| TagPredicate {
        name: name.to_string(),
        op,
        value,
    });
    prop::collection::vec(predicate, 1..4).prop_map(|predicates| ContentFilter::Tags(TagFilter { predicates }))
}

/// A SQL literal as text.
fn sql_constant() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["0", "1", "2", "-3", "1.0", "0.5", "2.5", "9223372036854775807", "'x'", "'IBM'", "''"])
        .prop_map(str::to_string)
}

fn sql_number() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["0", "1", "2", "-3", "1.0", "0.5", "2.5"]).prop_map(str::to_string)
}

fn symbol() -> impl Strategy<Value = &'static str> {
    any_op().prop_map(ComparisonOp::sql_symbol)
}

/// SQL predicates as text: every kind the index files or leaves residual.
fn sql_atom() -> impl Strategy<Value = String> {
    let in_items = prop::collection::vec(sql_constant(), 1..4).prop_map(|items| items.join(", "));
    let not = prop::sample::select(vec!["", "NOT "]);
    let like = prop::sample::select(vec!["'%'", "'I%'", "'_'", "'x%'", "'i_''s'"]);
    prop_oneof![
        4 => (any_name(), symbol(), sql_constant()).prop_map(|(name, op, value)| format!("{name} {op} {value}")),
        1 => (sql_constant(), symbol(), any_name()).prop_map(|(value, op, name)| format!("{value} {op} {name}")),
        2 => (any_name(), not.clone(), sql_number(), sql_number())
            .prop_map(|(name, not, low, high)| format!("{name} {not}BETWEEN {low} AND {high}")),
        2 => (any_name(), not.clone(), in_items).prop_map(|(name, not, items)| format!("{name} {not}IN ({items})")),
        1 => (any_name(), not.clone(), like).prop_map(|(name, not, pattern)| format!("{name} {not}LIKE {pattern}")),
        1 => (any_name(), not).prop_map(|(name, not)| format!("{name} IS {not}NULL")),
        1 => any_name().prop_map(str::to_string),
        1 => (symbol(), sql_number()).prop_map(|(op, value)| format!("JMSPriority {op} {value}")),
        1 => prop::sample::select(vec!["'PERSISTENT'", "'NON_PERSISTENT'"])
            .prop_map(|mode| format!("JMSDeliveryMode = {mode}")),
        1 => (any_name(), symbol(), sql_number()).prop_map(|(name, op, value)| format!("{name} + 1 {op} {value}")),
        1 => (any_name(), symbol(), any_name()).prop_map(|(left, op, right)| format!("{left} {op} {right}")),
    ]
}

/// SQL selectors: predicates under NOT, AND and OR, kept if they parse.
fn any_sql() -> impl Strategy<Value = ContentFilter> {
    let selector = sql_atom().prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|operand| format!("NOT ({operand})")),
            prop::collection::vec(inner.clone(), 2..4).prop_map(|operands| format!("({})", operands.join(" AND "))),
            prop::collection::vec(inner, 2..4).prop_map(|operands| format!("({})", operands.join(" OR "))),
        ]
    });
    selector.prop_filter_map("selector parses", |text| ContentFilter::parse(FilterLanguage::Sql, &text).ok())
}

/// An equality that many shaped filters share.
fn shared_equality() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["s = 'IBM'", "s = 'HP'", "a = 1", "b = 2", "b = 1.0", "flag", "NOT flag", "s IN ('IBM')"])
}

/// A range on a shaped message's numbers: `a > 1`, `b <= 0.5`, ...
fn shaped_range() -> impl Strategy<Value = String> {
    let operand = prop::sample::select(vec!["a", "b", "a", "JMSPriority"]);
    let op = prop::sample::select(vec!["<", "<=", ">", ">="]);
    let bound = prop::sample::select(vec!["-1", "0", "1", "2", "0.5", "1.5"]);
    (operand, op, bound).prop_map(|(operand, op, bound)| format!("{operand} {op} {bound}"))
}

/// One conjunction in the selectors or GES shape: one to three shared
/// equalities and up to two ranges, sometimes with a residual test.
fn shaped_conjunction() -> impl Strategy<Value = String> {
    let residual = prop::sample::select(vec!["", "", "", " AND s <> 'HP'", " AND a + 1 > 1", " AND s LIKE 'I%'"]);
    (prop::collection::vec(shared_equality(), 1..4), prop::collection::vec(shaped_range(), 0..3), residual).prop_map(
        |(equalities, ranges, residual)| {
            let mut literals: Vec<String> = equalities.into_iter().map(str::to_string).collect();
            literals.extend(ranges);
            format!("{}{residual}", literals.join(" AND "))
        },
    )
}

/// The selectors and GES shapes as SQL: a shaped conjunction, sometimes
/// OR'ed with a second one, or ranges alone (counted beside the clusters).
fn shaped_sql() -> impl Strategy<Value = ContentFilter> {
    let selector = prop_oneof![
        3 => shaped_conjunction(),
        1 => (shaped_conjunction(), shaped_conjunction()).prop_map(|(left, right)| format!("({left}) OR ({right})")),
        1 => (shaped_range(), shaped_range()).prop_map(|(left, right)| format!("{left} AND {right}")),
    ];
    selector.prop_map(|text: String| {
        ContentFilter::parse(FilterLanguage::Sql, &text).unwrap_or_else(|error| panic!("{text}: {error}"))
    })
}

/// The GES shape as a tags filter: shared equalities, a selective one, and
/// sometimes a range (numbers or strings) and a `!=`.
fn shaped_tags() -> impl Strategy<Value = ContentFilter> {
    let tag = |name: &str, op: ComparisonOp, value: Value| TagPredicate { name: name.to_string(), op, value };
    let shared = prop::sample::subsequence(vec![("s", Value::Str("IBM".into())), ("flag", Value::Bool(true))], 0..=2);
    let selective = prop::sample::select(vec![Value::Int(0), Value::Int(1), Value::Int(2), Value::Float(1.5)]);
    let range = prop::option::of((
        prop::sample::select(vec![ComparisonOp::Greater, ComparisonOp::LessOrEqual]),
        prop::sample::select(vec![("a", Value::Int(0)), ("a", Value::Float(1.5)), ("s", Value::Str("HP".into()))]),
    ));
    let not_equal = prop::option::of(prop::sample::select(vec![Value::Int(1), Value::Str("x".into())]));
    (shared, selective, range, not_equal).prop_map(move |(shared, selective, range, not_equal)| {
        let mut predicates: Vec<TagPredicate> =
            shared.into_iter().map(|(name, value)| tag(name, ComparisonOp::Equal, value)).collect();
        predicates.push(tag("b", ComparisonOp::Equal, selective));
        predicates.extend(range.map(|(op, (name, bound))| tag(name, op, bound)));
        predicates.extend(not_equal.map(|value| tag("a", ComparisonOp::NotEqual, value)));
        ContentFilter::Tags(TagFilter { predicates })
    })
}

fn any_regex() -> impl Strategy<Value = ContentFilter> {
    let patterns = vec!["^a", "b$", r"a\.b", ".*", r"^t\.[0-9]+$", "x|y", r"^orders\.(eu|us)\.", "^$", "[0-9]{2}"];
    prop::sample::select(patterns)
        .prop_map(|pattern| ContentFilter::parse(FilterLanguage::Regex, pattern).expect("test patterns compile"))
}

/// One XPath location step: an element test with, sometimes, a predicate
/// on attributes, children, text or position.
fn xpath_step() -> impl Strategy<Value = String> {
    let name = prop::sample::select(vec!["a", "b", "c", "*"]);
    let predicate = prop::sample::select(vec![
        "",
        "",
        "",
        "[@x]",
        "[@x = 1]",
        "[@y > 1]",
        "[@y != 'x']",
        "[b]",
        "[. = 'x']",
        "[c < 10]",
        "[1]",
        "[not(@x)]",
        "[b = 2 or @y = 'x']",
        "[contains(., '1')]",
    ]);
    (name, predicate).prop_map(|(name, predicate)| format!("{name}{predicate}"))
}

/// An absolute path of `/` and `//` steps, ending at an element, an
/// attribute or a text node.
fn xpath_path() -> impl Strategy<Value = String> {
    let separator = prop::sample::select(vec!["/", "//"]);
    let last = prop::sample::select(vec!["", "", "/@x", "/@y", "/text()"]);
    (prop::collection::vec((separator, xpath_step()), 1..4), last).prop_map(|(steps, last)| {
        let mut path: String = steps.into_iter().map(|(separator, step)| format!("{separator}{step}")).collect();
        path.push_str(last);
        path
    })
}

fn xpath_operator() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["=", "!=", "<", "<=", ">", ">="])
}

fn xpath_literal() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["1", "2", "10", "1.5", "-1", "'1'", "'x'", "' 3 '"])
}

/// XPath filters: paths, comparisons with numbers and strings, and their
/// combinations under `and`, `or` and `not()`.
fn any_xpath() -> impl Strategy<Value = ContentFilter> {
    let leaf = prop_oneof![
        3 => xpath_path(),
        3 => (xpath_path(), xpath_operator(), xpath_literal()).prop_map(|(path, op, value)| format!("{path} {op} {value}")),
        1 => (xpath_path(), xpath_literal()).prop_map(|(path, value)| format!("starts-with({path}, {value})")),
    ];
    let filter = leaf.prop_recursive(2, 6, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(left, right)| format!("({left}) and ({right})")),
            (inner.clone(), inner.clone()).prop_map(|(left, right)| format!("({left}) or ({right})")),
            inner.prop_map(|operand| format!("not({operand})")),
        ]
    });
    filter.prop_map(|text| {
        ContentFilter::parse(FilterLanguage::Xpath, &text).unwrap_or_else(|error| panic!("{text}: {error}"))
    })
}

fn any_filter() -> impl Strategy<Value = ContentFilter> {
    prop_oneof![
        2 => any_tags(),
        4 => any_sql(),
        1 => any_regex(),
        2 => any_xpath(),
        4 => shaped_sql(),
        2 => shaped_tags(),
    ]
}

fn any_partitions() -> impl Strategy<Value = Vec<u32>> {
    // Sometimes repeated, sometimes naming partitions with no subscriptions.
    prop::collection::vec(0..PARTITIONS + 1, 0..4)
}

/// One step of a history.
#[derive(Debug, Clone)]
enum Step {
    Insert(u32, u16, ContentFilter),
    Remove(u32, u16),
    Refresh,
    Check(Message, Vec<u32>),
}

fn any_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..PARTITIONS, 0..KEYS, any_filter()).prop_map(|(partition, key, filter)| Step::Insert(partition, key, filter)),
        1 => (0..PARTITIONS, 0..KEYS).prop_map(|(partition, key)| Step::Remove(partition, key)),
        1 => Just(Step::Refresh),
        3 => (any_message(), any_partitions()).prop_map(|(message, partitions)| Step::Check(message, partitions)),
        2 => (shaped_message(), any_partitions()).prop_map(|(message, partitions)| Step::Check(message, partitions)),
    ]
}

/// The index and, beside it, the filters it should hold.
#[derive(Default)]
struct Checked {
    index: ContentIndex<u16>,
    model: HashMap<(u32, u16), ContentFilter>,
    scratch: IndexScratch,
}

impl Checked {
    fn apply(&mut self, step: &Step) -> Result<(), TestCaseError> {
        match step {
            Step::Insert(partition, key, filter) => {
                self.index.insert(*partition, *key, filter);
                self.model.insert((*partition, *key), filter.clone());
            }
            Step::Remove(partition, key) => {
                let was_there = self.model.remove(&(*partition, *key)).is_some();
                prop_assert_eq!(self.index.remove(*partition, key), was_there);
            }
            Step::Refresh => self.index.refresh(),
            Step::Check(message, partitions) => self.check(message, partitions)?,
        }
        prop_assert_eq!(self.index.len(), self.model.len());
        Ok(())
    }

    fn check(&mut self, message: &Message, partitions: &[u32]) -> Result<(), TestCaseError> {
        let mut actual = Vec::new();
        self.index.matching(message, partitions, &mut self.scratch, &mut actual);
        actual.sort_unstable();
        let mut expected: Vec<u16> = self
            .model
            .iter()
            .filter(|((partition, _), filter)| partitions.contains(partition) && filter.matches(message))
            .map(|((_, key), _)| *key)
            .collect();
        expected.sort_unstable();
        let filters: Vec<String> = self
            .model
            .iter()
            .filter(|((partition, _), _)| partitions.contains(partition))
            .map(|((partition, key), filter)| format!("{partition}/{key} {}: {filter}", filter.language()))
            .collect();
        prop_assert_eq!(actual, expected, "message {:?}\nfilters {:#?}", message, filters);
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn matching_equals_evaluating_each_filter(steps in prop::collection::vec(any_step(), 1..48)) {
        let mut checked = Checked::default();
        for step in &steps {
            checked.apply(step)?;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn many_subscriptions_sharing_predicates(
        subscriptions in prop::collection::vec((0..PARTITIONS, any::<u16>(), any_filter()), 100..400),
        removals in prop::collection::vec(any::<prop::sample::Index>(), 0..100),
        later in prop::collection::vec((0..PARTITIONS, any::<u16>(), any_filter()), 0..60),
        messages in prop::collection::vec((prop_oneof![any_message(), shaped_message()], any_partitions()), 1..40),
    ) {
        let mut checked = Checked::default();
        for (partition, key, filter) in &subscriptions {
            checked.apply(&Step::Insert(*partition, *key, filter.clone()))?;
        }
        for removal in &removals {
            let (partition, key, _) = removal.get(&subscriptions);
            checked.apply(&Step::Remove(*partition, *key))?;
        }
        // Insertions after removals reuse the freed ids and fill the gaps
        // that removals left in shared lists and clusters.
        for (partition, key, filter) in &later {
            checked.apply(&Step::Insert(*partition, *key, filter.clone()))?;
        }
        for (message, partitions) in &messages {
            checked.check(message, partitions)?;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn sorted_runs_equal_evaluating_each_filter(
        subscriptions in prop::collection::vec((0..2_u32, 0..300_u16, sorted_filter()), 20..300),
        removals in prop::collection::vec(any::<prop::sample::Index>(), 0..80),
        later in prop::collection::vec((0..2_u32, 0..300_u16, sorted_filter()), 0..40),
        messages in prop::collection::vec((sorted_message(), any_partitions()), 1..40),
    ) {
        let mut checked = Checked::default();
        for (partition, key, filter) in &subscriptions {
            checked.apply(&Step::Insert(*partition, *key, filter.clone()))?;
        }
        for removal in &removals {
            let (partition, key, _) = removal.get(&subscriptions);
            checked.apply(&Step::Remove(*partition, *key))?;
        }
        for (partition, key, filter) in &later {
            checked.apply(&Step::Insert(*partition, *key, filter.clone()))?;
        }
        for (message, partitions) in &messages {
            checked.check(message, partitions)?;
        }
    }
}
