//! Unit tests for each covering rule, through the public API.

use sift_core::TopicFilter;

use crate::{subscription_covers, ContentFilter, FilterLanguage};

fn tags(text: &str) -> ContentFilter {
    ContentFilter::parse(FilterLanguage::Tags, text).expect("tags filter parses")
}

fn sql(text: &str) -> ContentFilter {
    ContentFilter::parse(FilterLanguage::Sql, text).expect("selector parses")
}

fn check(cases: &[(ContentFilter, ContentFilter, bool)]) {
    for (wide, narrow, expected) in cases {
        assert_eq!(wide.covers(narrow), *expected, "{wide} covers {narrow}");
    }
}

#[test]
fn tags_cover_by_subset_and_wider_ranges() {
    check(&[
        (tags("price>100"), tags("price>200"), true),
        (tags("price>200"), tags("price>100"), false),
        (tags("x>=5"), tags("x=5"), true),
        (tags("x>5"), tags("x=5"), false),
        (tags("sym=IBM"), tags("sym=IBM,price>100"), true),
        (tags("sym=IBM,price>100"), tags("sym=IBM"), false),
        (tags("a=1,b>2"), tags("b>2,a=1"), true),
        (tags("x>1"), tags("x>=2,x<=3"), true),
        (tags("x!=4"), tags("x>5"), true),
        (tags("x!=4"), tags("x=4.0"), false),
        (tags("x>=1"), tags("x>1.5"), true),
        (tags("x<=1"), tags("x<1.0"), true),
        // Tags order strings, but a range on numbers says nothing about strings.
        (tags(r#"s>"a""#), tags(r#"s="b""#), true),
        (tags("x>1"), tags(r#"x="5""#), false),
        (tags("flag!=false"), tags("flag=true"), true),
        // Contradictory predicates match nothing, so anything covers them.
        (tags("y=1"), tags("x>5,x<3"), true),
    ]);
}

#[test]
fn sql_literals_compare_by_value_set() {
    check(&[
        (sql("price > 100"), sql("price > 200"), true),
        (sql("x >= 5"), sql("x = 5"), true),
        (sql("100 < price"), sql("price >= 200"), true),
        (sql("x BETWEEN 1 AND 10"), sql("x BETWEEN 2 AND 5"), true),
        (sql("x BETWEEN 1 AND 10"), sql("x BETWEEN 2 AND 11"), false),
        (sql("x BETWEEN 1 AND 10"), sql("x >= 2 AND x < 10"), true),
        (sql("x > 0"), sql("x BETWEEN 2 AND 5"), true),
        (sql("sym IN ('IBM', 'HP', 'SUN')"), sql("sym IN ('IBM', 'HP')"), true),
        (sql("sym IN ('IBM', 'HP')"), sql("sym = 'HP'"), true),
        (sql("sym IN ('IBM')"), sql("sym IN ('IBM', 'HP')"), false),
        (sql("sym NOT IN ('IBM')"), sql("sym NOT IN ('IBM', 'HP')"), true),
        (sql("x IS NOT NULL"), sql("x > 3"), true),
        (sql("x IS NULL"), sql("x > 3"), false),
        (sql("x <> 3"), sql("x > 3"), true),
        (sql("NOT (x <= 3)"), sql("x > 3"), true),
        (sql("flag"), sql("flag = TRUE"), true),
        (sql("JMSPriority > 4"), sql("JMSPriority BETWEEN 5 AND 9"), true),
        (sql("JMSPriority > 4"), sql("jmspriority > 5"), false),
    ]);
}

#[test]
fn sql_respects_three_valued_logic_and_types() {
    check(&[
        // NaN makes `x > 3` FALSE, so `NOT (x > 3)` accepts it and `x <= 3` does not.
        (sql("x <= 3"), sql("NOT (x > 3)"), false),
        (sql("NOT (x > 3)"), sql("x <= 3"), true),
        // Strings are not ordered in SQL: `s > 'a'` is never TRUE.
        (sql("s = 'b'"), sql("s > 'a'"), true),
        (sql("s > 'a'"), sql("s = 'b'"), false),
        (sql("x > 1"), sql("x = '5'"), false),
        (sql("x <> 1"), sql("x = '5'"), false),
        // A string in the list makes NOT IN UNKNOWN for numbers.
        (sql("x <> 2"), sql("x NOT IN (2, 'a')"), true),
        (sql("x NOT IN (2, 'a')"), sql("x <> 2"), false),
        (sql("x = 1"), sql("FALSE"), true),
        (sql("x = 1 OR TRUE"), sql("y = 2"), true),
    ]);
}

#[test]
fn sql_disjunctions_and_opaque_literals() {
    check(&[
        (sql("a = 1 OR b = 2"), sql("a = 1 AND c = 3"), true),
        (sql("a = 1 OR b = 2"), sql("(a = 1 OR b = 2) AND c = 3"), true),
        (sql("a = 1"), sql("a = 1 OR b = 2"), false),
        (sql("x = 1 OR x = 2"), sql("x IN (1, 2)"), true),
        (sql("x < 0 OR x >= 0"), sql("x BETWEEN -1 AND 1"), true),
        (sql("name LIKE 'a%'"), sql("name LIKE 'a%' AND x = 1"), true),
        (sql("name LIKE 'a%'"), sql("name LIKE 'ab%'"), false),
        (sql("a + b > 3"), sql("a + b > 3 AND c = 1"), true),
        (sql("a + b > 3"), sql("a + b > 4"), false),
        (sql("a = b"), sql("a = b"), true),
    ]);
}

#[test]
fn tags_and_sql_compare_across_languages() {
    check(&[
        (tags("price>100"), sql("price > 200 AND sym = 'IBM'"), true),
        (sql("price > 100"), tags(r#"price>200,sym="IBM""#), true),
        (sql("sym = 'IBM'"), tags("sym=IBM"), true),
        // Tags order strings and SQL does not.
        (tags(r#"s>"a""#), sql("s = 'b'"), true),
        (sql("s = 'b' OR s = 'c'"), tags(r#"s>"a""#), false),
        (tags("price>100"), sql("price > 200 OR sym = 'IBM'"), false),
        (tags("JMSPriority>4"), sql("JMSPriority > 5"), false),
    ]);
}

#[test]
fn regex_and_xpath_cover_only_identical_text() {
    let regex = |text: &str| ContentFilter::parse(FilterLanguage::Regex, text).expect("regex parses");
    let xpath = |text: &str| ContentFilter::parse(FilterLanguage::Xpath, text).expect("xpath parses");
    check(&[
        (regex("^a"), regex("^a"), true),
        (regex("^a"), regex("^ab"), false),
        (xpath("/m[a='1']"), xpath("/m[a='1']"), true),
        (xpath("/m"), xpath("/m[a='1']"), false),
        (regex("^a"), tags("a=1"), false),
        (tags("a=1"), regex("^a"), false),
    ]);
}

#[test]
fn subscriptions_combine_topic_and_content() {
    let topic = |text: &str| TopicFilter::new(text).expect("valid filter");
    let cheap = tags("price<10");
    let cheaper = tags("price<5");
    assert!(subscription_covers(&topic("a.>"), None, &topic("a.b"), Some(&cheap)));
    assert!(subscription_covers(&topic("a.>"), Some(&cheap), &topic("a.*"), Some(&cheaper)));
    assert!(!subscription_covers(&topic("a.*"), Some(&cheap), &topic("a.>"), Some(&cheaper)));
    assert!(!subscription_covers(&topic("a.>"), Some(&cheaper), &topic("a.b"), Some(&cheap)));
    assert!(!subscription_covers(&topic("a.>"), Some(&cheap), &topic("a.b"), None));
    assert!(subscription_covers(&topic("a.b"), None, &topic("a.b"), None));
}
