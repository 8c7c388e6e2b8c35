//! The shipped example configuration parses and equals the defaults, so the
//! documented defaults cannot drift from the code.

#[test]
fn example_config_is_valid_and_documents_the_defaults() {
    let text = include_str!("../../../sift.example.toml");
    let parsed = sift_broker::Config::from_toml(text).expect("example config parses");
    let defaults = sift_broker::Config::default();
    assert_eq!(format!("{parsed:?}"), format!("{defaults:?}"));
}
