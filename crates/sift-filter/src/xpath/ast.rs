//! The syntax tree of an XPath filter.
//!
//! The tree covers the part of XPath 1.0 that the `xpath` language accepts:
//! location paths with the child, attribute and self axes (written `/`, `@`
//! and `.`) and `//` between steps, the name tests `name` and `*`, the node
//! tests `text()` and `node()`, predicates, comparisons, `and`, `or`,
//! `not()`, `contains()`, `starts-with()`, `true()`, `false()`, unary minus
//! and string and number literals.

use crate::compare::ComparisonOp;

/// An XPath expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// `a or b or …`: true when any operand, converted to a boolean, is true.
    Or(Vec<Expr>),
    /// `a and b and …`: true when every operand, converted to a boolean, is true.
    And(Vec<Expr>),
    /// `left OP right` with the XPath 1.0 comparison rules: a node-set
    /// compares true when any of its nodes does.
    Compare {
        /// The operator.
        op: ComparisonOp,
        /// The left operand.
        left: Box<Expr>,
        /// The right operand.
        right: Box<Expr>,
    },
    /// `-operand`: the operand converted to a number, negated.
    Negate(Box<Expr>),
    /// `not(operand)`.
    Not(Box<Expr>),
    /// `contains(haystack, needle)` or `starts-with(haystack, needle)`.
    StringTest {
        /// Which test.
        function: StringFunction,
        /// The string searched, converted with XPath's `string()`.
        haystack: Box<Expr>,
        /// The string searched for, converted with XPath's `string()`.
        needle: Box<Expr>,
    },
    /// `true()` or `false()`.
    Boolean(bool),
    /// A string literal, without its quotes.
    Literal(String),
    /// A number literal; always finite and not negative when parsed.
    Number(f64),
    /// A location path.
    Path(LocationPath),
}

/// A string function that tests one string against another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StringFunction {
    /// `contains(haystack, needle)`.
    Contains,
    /// `starts-with(haystack, needle)`.
    StartsWith,
}

impl StringFunction {
    /// The function's name as written.
    pub fn name(self) -> &'static str {
        match self {
            StringFunction::Contains => "contains",
            StringFunction::StartsWith => "starts-with",
        }
    }

    /// Whether the test holds.
    pub fn holds(self, haystack: &str, needle: &str) -> bool {
        match self {
            StringFunction::Contains => haystack.contains(needle),
            StringFunction::StartsWith => haystack.starts_with(needle),
        }
    }
}

/// A location path: steps taken from the document root (absolute) or from
/// the context node (relative).
#[derive(Debug, Clone, PartialEq)]
pub struct LocationPath {
    /// True when the path starts at the document root (`/…`, `//…`).
    pub absolute: bool,
    /// The steps, in order; an absolute path without steps (`/`) selects
    /// the root.
    pub steps: Vec<Step>,
}

/// One step of a location path.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// True when the step is preceded by `//`: it is then taken from every
    /// descendant-or-self of the previous step's nodes, as XPath defines
    /// `//` (`/descendant-or-self::node()/`).
    pub descendants: bool,
    /// Which nodes the step looks at.
    pub axis: Axis,
    /// Which of those nodes it keeps.
    pub test: NodeTest,
    /// Conditions the kept nodes must meet, in order. A predicate whose value
    /// is a number keeps the node at that position (`[1]` is the first).
    pub predicates: Vec<Expr>,
}

/// The axes a step can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Axis {
    /// The children of the context node (the default, written as nothing).
    Child,
    /// The attributes of the context node (`@`).
    Attribute,
    /// The context node itself (`.`).
    SelfNode,
}

/// Which nodes a step keeps.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NodeTest {
    /// Elements (or, on the attribute axis, attributes) with this name, as
    /// written in the document, prefix included.
    Name(String),
    /// Any element, or on the attribute axis any attribute (`*`).
    AnyName,
    /// Text nodes (`text()`).
    Text,
    /// Any node (`node()`, and the test of `.`).
    Node,
}

/// The type of value an expression has. XPath 1.0 without variables is
/// statically typed, so the parser knows every expression's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A node-set (a location path).
    NodeSet,
    /// A boolean (comparisons, `and`, `or`, `not()`, the string tests).
    Boolean,
    /// A number (number literals, unary minus).
    Number,
    /// A string (string literals).
    String,
}

impl Kind {
    /// The kind in words, for error messages.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Kind::NodeSet => "a path",
            Kind::Boolean => "a condition",
            Kind::Number => "a number",
            Kind::String => "a string",
        }
    }
}

impl Expr {
    /// The kind of value the expression has.
    pub fn kind(&self) -> Kind {
        match self {
            Expr::Or(_) | Expr::And(_) | Expr::Compare { .. } | Expr::Not(_) | Expr::StringTest { .. } => Kind::Boolean,
            Expr::Boolean(_) => Kind::Boolean,
            Expr::Negate(_) | Expr::Number(_) => Kind::Number,
            Expr::Literal(_) => Kind::String,
            Expr::Path(_) => Kind::NodeSet,
        }
    }

    /// True when the expression contains a location path anywhere, and so
    /// depends on the document.
    pub fn mentions_path(&self) -> bool {
        match self {
            Expr::Or(operands) | Expr::And(operands) => operands.iter().any(Expr::mentions_path),
            Expr::Compare { left, right, .. } => left.mentions_path() || right.mentions_path(),
            Expr::StringTest { haystack, needle, .. } => haystack.mentions_path() || needle.mentions_path(),
            Expr::Negate(operand) | Expr::Not(operand) => operand.mentions_path(),
            Expr::Boolean(_) | Expr::Literal(_) | Expr::Number(_) => false,
            Expr::Path(_) => true,
        }
    }

    /// True when the expression contains an absolute location path anywhere,
    /// predicates included, and so looks outside the context node's subtree.
    pub fn mentions_absolute_path(&self) -> bool {
        match self {
            Expr::Or(operands) | Expr::And(operands) => operands.iter().any(Expr::mentions_absolute_path),
            Expr::Compare { left, right, .. } => left.mentions_absolute_path() || right.mentions_absolute_path(),
            Expr::StringTest { haystack, needle, .. } => {
                haystack.mentions_absolute_path() || needle.mentions_absolute_path()
            }
            Expr::Negate(operand) | Expr::Not(operand) => operand.mentions_absolute_path(),
            Expr::Boolean(_) | Expr::Literal(_) | Expr::Number(_) => false,
            Expr::Path(path) => path.absolute || path.steps.iter().any(Step::mentions_absolute_path),
        }
    }
}

impl Step {
    /// True when the step is `.` without predicates, which selects the
    /// context node and so can be left out of a path.
    pub fn is_identity(&self) -> bool {
        !self.descendants && self.axis == Axis::SelfNode && self.test == NodeTest::Node && self.predicates.is_empty()
    }

    /// True when the step selects elements among children (`name`, `*`,
    /// `//name`, `//*`), the steps a structural automaton follows.
    pub fn is_element_step(&self) -> bool {
        self.axis == Axis::Child && matches!(self.test, NodeTest::Name(_) | NodeTest::AnyName)
    }

    /// True when some predicate keeps nodes by position (its value is a
    /// number), which depends on the node's siblings.
    pub fn is_positional(&self) -> bool {
        self.predicates.iter().any(|predicate| predicate.kind() == Kind::Number)
    }

    fn mentions_absolute_path(&self) -> bool {
        self.predicates.iter().any(Expr::mentions_absolute_path)
    }
}
