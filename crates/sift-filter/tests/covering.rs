//! Property tests of `ContentFilter::covers`.
//!
//! Soundness: whenever `a.covers(b)`, every message `b` matches is matched
//! by `a`; checked on random tags and SQL filters over a small vocabulary,
//! and on random messages whose properties may be missing, of another type,
//! or NaN. Precision: a filter built from `a` by tightening it (narrower
//! ranges, fewer IN items, more predicates, and the opposite under NOT) must
//! be recognised as covered.

use proptest::prelude::*;
use sift_core::{Message, TopicName, Value};
use sift_filter::{ComparisonOp, ContentFilter, FilterLanguage, SqlFilter, TagFilter, TagPredicate};

/// Property names shared by filters and messages.
const NAMES: [&str; 4] = ["x", "y", "s", "flag"];

/// A constant in a filter.
#[derive(Debug, Clone)]
enum Constant {
    Int(i64),
    Float(f64),
    Str(&'static str),
    Bool(bool),
}

impl Constant {
    fn sql(&self) -> String {
        match self {
            Constant::Int(int) => int.to_string(),
            Constant::Float(float) => format!("{float:?}"),
            Constant::Str(text) => format!("'{text}'"),
            Constant::Bool(flag) => flag.to_string().to_uppercase(),
        }
    }

    fn value(&self) -> Value {
        match self {
            Constant::Int(int) => Value::Int(*int),
            Constant::Float(float) => Value::Float(*float),
            Constant::Str(text) => Value::Str((*text).into()),
            Constant::Bool(flag) => Value::Bool(*flag),
        }
    }

    /// The constant moved by `step` when it is a number.
    fn shifted(&self, step: i64) -> Constant {
        match self {
            Constant::Int(int) => Constant::Int(int + step),
            Constant::Float(float) => Constant::Float(float + step as f64),
            other => other.clone(),
        }
    }
}

/// A SQL predicate on one property.
#[derive(Debug, Clone)]
enum Atom {
    Compare { name: &'static str, op: ComparisonOp, constant: Constant },
    Between { name: &'static str, low: i64, high: i64, negated: bool },
    In { name: &'static str, items: Vec<Constant>, negated: bool },
    IsNull { name: &'static str, negated: bool },
    Like { name: &'static str, pattern: &'static str },
    Flag { name: &'static str },
}

/// A SQL selector.
#[derive(Debug, Clone)]
enum Tree {
    Atom(Atom),
    Not(Box<Tree>),
    And(Vec<Tree>),
    Or(Vec<Tree>),
}

fn any_constant() -> impl Strategy<Value = Constant> {
    prop_oneof![
        4 => (-2_i64..4).prop_map(Constant::Int),
        1 => prop::sample::select(vec![0.5, -1.5, 2.0]).prop_map(Constant::Float),
        2 => prop::sample::select(vec!["a", "b"]).prop_map(Constant::Str),
        1 => any::<bool>().prop_map(Constant::Bool),
    ]
}

/// IN lists take strings and numbers only.
fn any_item() -> impl Strategy<Value = Constant> {
    any_constant().prop_map(|constant| match constant {
        Constant::Bool(_) => Constant::Str("a"),
        other => other,
    })
}

fn any_op() -> impl Strategy<Value = ComparisonOp> {
    use ComparisonOp::*;
    prop::sample::select(vec![Equal, NotEqual, Less, LessOrEqual, Greater, GreaterOrEqual])
}

fn any_name() -> impl Strategy<Value = &'static str> {
    prop::sample::select(NAMES.to_vec())
}

fn any_atom() -> impl Strategy<Value = Atom> {
    prop_oneof![
        6 => (any_name(), any_op(), any_constant()).prop_map(|(name, op, constant)| {
            // A boolean compares only for equality (JMS): `s > FALSE` is refused.
            let ordering = !matches!(op, ComparisonOp::Equal | ComparisonOp::NotEqual);
            let op = if ordering && matches!(constant, Constant::Bool(_)) { ComparisonOp::Equal } else { op };
            Atom::Compare { name, op, constant }
        }),
        2 => (any_name(), -2_i64..3, 0_i64..4, any::<bool>())
            .prop_map(|(name, low, width, negated)| Atom::Between { name, low, high: low + width, negated }),
        2 => (any_name(), prop::collection::vec(any_item(), 1..4), any::<bool>())
            .prop_map(|(name, items, negated)| Atom::In { name, items, negated }),
        1 => (any_name(), any::<bool>()).prop_map(|(name, negated)| Atom::IsNull { name, negated }),
        1 => (any_name(), prop::sample::select(vec!["a%", "_"])).prop_map(|(name, pattern)| Atom::Like { name, pattern }),
        1 => any_name().prop_map(|name| Atom::Flag { name }),
    ]
}

fn any_tree() -> impl Strategy<Value = Tree> {
    any_atom().prop_map(Tree::Atom).prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|tree| Tree::Not(Box::new(tree))),
            prop::collection::vec(inner.clone(), 2..4).prop_map(Tree::And),
            prop::collection::vec(inner, 2..4).prop_map(Tree::Or),
        ]
    })
}

fn atom_sql(atom: &Atom) -> String {
    let not = |negated: bool| if negated { "NOT " } else { "" };
    match atom {
        Atom::Compare { name, op, constant } => format!("{name} {} {}", op.sql_symbol(), constant.sql()),
        Atom::Between { name, low, high, negated } => format!("{name} {}BETWEEN {low} AND {high}", not(*negated)),
        Atom::In { name, items, negated } => {
            let items: Vec<String> = items.iter().map(Constant::sql).collect();
            format!("{name} {}IN ({})", not(*negated), items.join(", "))
        }
        Atom::IsNull { name, negated } => format!("{name} IS {}NULL", not(*negated)),
        Atom::Like { name, pattern } => format!("{name} LIKE '{pattern}'"),
        Atom::Flag { name } => name.to_string(),
    }
}

fn tree_sql(tree: &Tree) -> String {
    let join = |trees: &[Tree], separator: &str| {
        trees.iter().map(|tree| format!("({})", tree_sql(tree))).collect::<Vec<_>>().join(separator)
    };
    match tree {
        Tree::Atom(atom) => atom_sql(atom),
        Tree::Not(inner) => format!("NOT ({})", tree_sql(inner)),
        Tree::And(trees) => join(trees, " AND "),
        Tree::Or(trees) => join(trees, " OR "),
    }
}

fn sql(tree: &Tree) -> ContentFilter {
    let text = tree_sql(tree);
    ContentFilter::parse(FilterLanguage::Sql, &text).unwrap_or_else(|error| panic!("{text}: {error}"))
}

/// The atom made narrower (its TRUE set shrinks, its FALSE set grows), or
/// wider when `narrower` is false. Atoms without a range stay as they are.
fn adjust(atom: &Atom, narrower: bool) -> Atom {
    let step = if narrower { 1 } else { -1 };
    match atom {
        Atom::Compare { name, op, constant } => {
            let shift = match op {
                ComparisonOp::Greater | ComparisonOp::GreaterOrEqual => step,
                ComparisonOp::Less | ComparisonOp::LessOrEqual => -step,
                ComparisonOp::Equal | ComparisonOp::NotEqual => 0,
            };
            Atom::Compare { name, op: *op, constant: constant.shifted(shift) }
        }
        Atom::Between { name, low, high, negated } => {
            let step = if *negated { -step } else { step };
            Atom::Between { name, low: low + step, high: *high, negated: *negated }
        }
        Atom::In { name, items, negated } => {
            let mut items = items.clone();
            if narrower != *negated {
                if items.len() > 1 {
                    items.pop();
                }
            } else {
                items.push(Constant::Int(7));
            }
            Atom::In { name, items, negated: *negated }
        }
        other => other.clone(),
    }
}

/// The tree with every atom narrowed where `narrower` is true, which makes
/// the whole narrower; NOT flips the direction.
fn tighten(tree: &Tree, narrower: bool) -> Tree {
    match tree {
        Tree::Atom(atom) => Tree::Atom(adjust(atom, narrower)),
        Tree::Not(inner) => Tree::Not(Box::new(tighten(inner, !narrower))),
        Tree::And(trees) => Tree::And(trees.iter().map(|tree| tighten(tree, narrower)).collect()),
        Tree::Or(trees) => Tree::Or(trees.iter().map(|tree| tighten(tree, narrower)).collect()),
    }
}

fn any_predicate() -> impl Strategy<Value = TagPredicate> {
    (any_name(), any_op(), any_constant()).prop_map(|(name, op, constant)| TagPredicate {
        name: name.to_string(),
        op,
        value: constant.value(),
    })
}

fn any_tags() -> impl Strategy<Value = TagFilter> {
    prop::collection::vec(any_predicate(), 1..4).prop_map(|predicates| TagFilter { predicates })
}

/// The predicate with its range narrowed by one.
fn narrow_predicate(predicate: &TagPredicate) -> TagPredicate {
    let shift = match predicate.op {
        ComparisonOp::Greater | ComparisonOp::GreaterOrEqual => 1,
        ComparisonOp::Less | ComparisonOp::LessOrEqual => -1,
        ComparisonOp::Equal | ComparisonOp::NotEqual => 0,
    };
    let value = match &predicate.value {
        Value::Int(int) => Value::Int(int + shift),
        Value::Float(float) => Value::Float(float + shift as f64),
        other => other.clone(),
    };
    TagPredicate { value, ..predicate.clone() }
}

/// A tags filter written as a SQL selector, when every predicate means the
/// same in both languages (SQL does not order strings).
fn tags_as_sql(filter: &TagFilter) -> Option<ContentFilter> {
    let mut conjuncts = Vec::new();
    for predicate in &filter.predicates {
        let constant = match &predicate.value {
            Value::Int(int) => int.to_string(),
            Value::Float(float) => format!("{float:?}"),
            Value::Str(text) if predicate.op.is_equality() => format!("'{text}'"),
            Value::Bool(flag) => flag.to_string().to_uppercase(),
            Value::Str(_) => return None,
        };
        conjuncts.push(format!("{} {} {constant}", predicate.name, predicate.op.sql_symbol()));
    }
    SqlFilter::parse(&conjuncts.join(" AND ")).ok().map(ContentFilter::Sql)
}

fn any_value() -> impl Strategy<Value = Option<Value>> {
    prop::option::weighted(
        0.85,
        prop_oneof![
            4 => (-3_i64..5).prop_map(Value::Int),
            2 => prop::sample::select(vec![0.5, 1.5, -1.5, 2.0, f64::NAN]).prop_map(Value::Float),
            2 => prop::sample::select(vec!["a", "b", "c", ""]).prop_map(|text| Value::Str(text.into())),
            1 => any::<bool>().prop_map(Value::Bool),
        ],
    )
}

fn any_message() -> impl Strategy<Value = Message> {
    prop::collection::vec(any_value(), NAMES.len()).prop_map(|values| {
        let mut message = Message::new(TopicName::new("t").expect("valid topic"), "");
        message.properties =
            NAMES.iter().zip(values).filter_map(|(name, value)| Some((name.to_string(), value?))).collect();
        message
    })
}

fn any_messages() -> impl Strategy<Value = Vec<Message>> {
    prop::collection::vec(any_message(), 24)
}

/// Fails when `wide` claims to cover `narrow` but some message escapes it.
fn check_sound(wide: &ContentFilter, narrow: &ContentFilter, messages: &[Message]) -> Result<(), TestCaseError> {
    if wide.covers(narrow) {
        for message in messages {
            prop_assert!(
                !narrow.matches(message) || wide.matches(message),
                "{} claims to cover {} but misses {:?}",
                wide,
                narrow,
                message.properties
            );
        }
    }
    Ok(())
}

/// True when the selector has a normal form the covering check can use.
fn has_dnf(filter: &ContentFilter) -> bool {
    matches!(filter, ContentFilter::Sql(sql) if sql.to_dnf().is_some())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(768))]

    #[test]
    fn random_pairs_are_sound(
        sql_a in any_tree(), sql_b in any_tree(), tags_a in any_tags(), tags_b in any_tags(), messages in any_messages()
    ) {
        let filters = [sql(&sql_a), sql(&sql_b), ContentFilter::Tags(tags_a), ContentFilter::Tags(tags_b)];
        for wide in &filters {
            for narrow in &filters {
                check_sound(wide, narrow, &messages)?;
            }
        }
    }

    #[test]
    fn tightened_selectors_are_covered(tree in any_tree(), extra in any_tree(), messages in any_messages()) {
        let wide = sql(&tree);
        let narrowed = sql(&tighten(&tree, true));
        let extended = sql(&Tree::And(vec![tree.clone(), extra]));
        for narrow in [&narrowed, &extended] {
            check_sound(&wide, narrow, &messages)?;
            if has_dnf(&wide) && has_dnf(narrow) {
                prop_assert!(wide.covers(narrow), "{} should cover {}", wide, narrow);
            }
        }
        // The other way round is usually not a cover, and must stay sound.
        check_sound(&narrowed, &wide, &messages)?;
    }

    #[test]
    fn tightened_tags_are_covered(filter in any_tags(), extra in any_tags(), messages in any_messages()) {
        let mut narrowed = TagFilter { predicates: filter.predicates.iter().map(narrow_predicate).collect() };
        narrowed.predicates.extend(extra.predicates);
        let wide = ContentFilter::Tags(filter.clone());
        let narrow = ContentFilter::Tags(narrowed);
        check_sound(&wide, &narrow, &messages)?;
        prop_assert!(wide.covers(&narrow), "{} should cover {}", wide, narrow);
        check_sound(&narrow, &wide, &messages)?;
        if let Some(as_sql) = tags_as_sql(&filter) {
            check_sound(&wide, &as_sql, &messages)?;
            check_sound(&as_sql, &wide, &messages)?;
            prop_assert!(wide.covers(&as_sql) && as_sql.covers(&wide), "{} and {} are equivalent", wide, as_sql);
            prop_assert!(as_sql.covers(&narrow), "{} should cover {}", as_sql, narrow);
        }
    }
}
