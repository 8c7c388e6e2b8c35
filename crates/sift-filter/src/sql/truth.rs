//! SQL three-valued logic.

/// The value of a SQL condition: TRUE, FALSE or UNKNOWN (a comparison that
/// involves NULL or values of incompatible types). A selector matches a
/// message only when it evaluates to [`Truth::True`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Truth {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// The condition cannot be decided (SQL UNKNOWN).
    Unknown,
}

impl Truth {
    /// TRUE or FALSE.
    pub fn from_bool(value: bool) -> Truth {
        if value {
            Truth::True
        } else {
            Truth::False
        }
    }

    /// The boolean, or `None` for UNKNOWN.
    pub fn to_bool(self) -> Option<bool> {
        match self {
            Truth::True => Some(true),
            Truth::False => Some(false),
            Truth::Unknown => None,
        }
    }

    /// True only for TRUE.
    pub fn is_true(self) -> bool {
        self == Truth::True
    }

    /// SQL AND: FALSE wins over UNKNOWN, which wins over TRUE.
    pub fn and(self, other: Truth) -> Truth {
        match (self, other) {
            (Truth::False, _) | (_, Truth::False) => Truth::False,
            (Truth::True, Truth::True) => Truth::True,
            _ => Truth::Unknown,
        }
    }

    /// SQL OR: TRUE wins over UNKNOWN, which wins over FALSE.
    pub fn or(self, other: Truth) -> Truth {
        match (self, other) {
            (Truth::True, _) | (_, Truth::True) => Truth::True,
            (Truth::False, Truth::False) => Truth::False,
            _ => Truth::Unknown,
        }
    }
}

impl std::ops::Not for Truth {
    type Output = Truth;

    /// SQL NOT: swaps TRUE and FALSE and leaves UNKNOWN alone.
    fn not(self) -> Truth {
        match self {
            Truth::True => Truth::False,
            Truth::False => Truth::True,
            Truth::Unknown => Truth::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Truth::{False, True, Unknown};

    #[test]
    fn and_follows_the_sql_truth_table() {
        let table = [
            (True, True, True),
            (True, False, False),
            (True, Unknown, Unknown),
            (False, True, False),
            (False, False, False),
            (False, Unknown, False),
            (Unknown, True, Unknown),
            (Unknown, False, False),
            (Unknown, Unknown, Unknown),
        ];
        for (left, right, expected) in table {
            assert_eq!(left.and(right), expected, "{left:?} AND {right:?}");
        }
    }

    #[test]
    fn or_follows_the_sql_truth_table() {
        let table = [
            (True, True, True),
            (True, False, True),
            (True, Unknown, True),
            (False, True, True),
            (False, False, False),
            (False, Unknown, Unknown),
            (Unknown, True, True),
            (Unknown, False, Unknown),
            (Unknown, Unknown, Unknown),
        ];
        for (left, right, expected) in table {
            assert_eq!(left.or(right), expected, "{left:?} OR {right:?}");
        }
    }

    #[test]
    fn not_swaps_true_and_false_only() {
        assert_eq!(!True, False);
        assert_eq!(!False, True);
        assert_eq!(!Unknown, Unknown);
        assert_eq!(Unknown.to_bool(), None);
        assert!(!Unknown.is_true());
    }
}
