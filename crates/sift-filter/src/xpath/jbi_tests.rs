//! The filters and metadata of the AFRL JBI hardware XPath experiment
//! (figures 5 to 12 of the report): the subscriptions the language was
//! added for, checked with the tree evaluator and the shared automaton.

use sift_core::{Message, TopicName};

use crate::xpath::{XPathFilter, XPathScratch, XPathSet, XmlDocument, XmlError};

/// A `.basic` object's metadata: the beginning and ending date-time groups.
const BASIC: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>
<metadata>
  <BasicTemporal>
    <beginning_date_time_group>
      <day>26</day><hour_time>13</hour_time><minute_time>28</minute_time>
      <month_name>September</month_name><year>2003</year>
    </beginning_date_time_group>
    <ending_date_time_group>
      <day>26</day><hour_time>4</hour_time><minute_time>0</minute_time>
      <month_name>September</month_name><year>2003</year>
    </ending_date_time_group>
  </BasicTemporal>
</metadata>";

/// An `.ato` object's metadata (air tasking order).
const ATO: &str = "<metadata>
  <ATO classification=\"UNCLASSIFIED\" rev=\"2\">
    <nickname>KTJR</nickname><serialno>targ1234</serialno><originator>AFRL</originator>
  </ATO>
  <TemporalATO>
    <day> 12 </day><hour_time>8</hour_time><minute_time>30</minute_time>
    <month_name>March</month_name><year>2004</year>
  </TemporalATO>
</metadata>";

/// An `.xmlxpath` object's metadata.
const XMLXPATH: &str = "<metadata><Orig>
  <type>Targets</type><nickname>KQAZ</nickname><serialno>JBI4821Q</serialno>
  <originator>NSA</originator><version>3</version>
</Orig></metadata>";

/// Figure 6, written as XPath: every date-time field within bounds.
const FIGURE_6: &str = "/metadata/BasicTemporal/beginning_date_time_group/day >= 26 and
    /metadata/BasicTemporal/beginning_date_time_group/hour_time >= 13 and
    /metadata/BasicTemporal/beginning_date_time_group/minute_time >= 28 and
    /metadata/BasicTemporal/beginning_date_time_group/month_name = 'September' and
    /metadata/BasicTemporal/beginning_date_time_group/year >= 2003 and
    /metadata/BasicTemporal/ending_date_time_group/day <= 26 and
    /metadata/BasicTemporal/ending_date_time_group/hour_time <= 4 and
    /metadata/BasicTemporal/ending_date_time_group/minute_time <= 0 and
    /metadata/BasicTemporal/ending_date_time_group/year <= 2003";

/// Evaluates `filter` on `document` with the tree evaluator, checks that a
/// set holding only that filter agrees, and returns the verdict.
fn check(filter: &str, document: &str) -> bool {
    let parsed = XPathFilter::parse(filter).expect("filter parses");
    let tree = XmlDocument::parse(document.as_bytes()).expect("document is well-formed");
    let expected = parsed.matches_document(&tree);
    let mut set = XPathSet::new();
    set.insert((), &parsed);
    let mut matched = Vec::new();
    set.matching(document.as_bytes(), &mut XPathScratch::new(), &mut matched).expect("well-formed");
    assert_eq!(matched.len() == 1, expected, "set and tree disagree on {filter}");
    let reparsed = XPathFilter::parse(&parsed.to_string()).expect("display parses");
    assert_eq!(reparsed.matches_document(&tree), expected, "display changes the meaning of {filter}");
    expected
}

#[test]
fn figure_6_matches_the_basic_object() {
    assert!(check(FIGURE_6, BASIC));
    assert!(!check(FIGURE_6, &BASIC.replace("<minute_time>28", "<minute_time>27")));
    assert!(!check(FIGURE_6, &BASIC.replace("September", "October")));
    assert!(!check(FIGURE_6, ATO), "an ato object has no BasicTemporal");
}

#[test]
fn issue_examples_match() {
    let ato_filter = "/metadata/ATO[nickname='KTJR' and serialno='targ1234']";
    assert!(check(ato_filter, ATO));
    assert!(!check(ato_filter, &ATO.replace("targ1234", "targ9999")));
    let temporal = "/metadata/BasicTemporal/beginning_date_time_group/year >= 2003 and \
                    /metadata/BasicTemporal/ending_date_time_group/day <= 26";
    assert!(check(temporal, BASIC));
    assert!(!check(temporal, &BASIC.replace("<day>26</day><hour_time>4", "<day>27</day><hour_time>4")));
}

#[test]
fn figure_11_fields_compare_as_strings_and_integers() {
    let cases = [
        ("/metadata/ATO/nickname = 'KTJR'", ATO, true),
        ("/metadata/ATO/originator = 'AFMC'", ATO, false),
        ("/metadata/TemporalATO/day >= 12", ATO, true),
        ("/metadata/TemporalATO/hour_time >= 9", ATO, false),
        ("/metadata/TemporalATO/month_name = 'March'", ATO, true),
        ("/metadata/TemporalATO/year >= 2003", ATO, true),
        ("/metadata/BasicTemporal/ending_date_time_group/month_name = 'September'", BASIC, true),
        ("/metadata/Orig/type = 'Targets'", XMLXPATH, true),
        ("/metadata/Orig/serialno = 'JBI4821Q'", XMLXPATH, true),
        ("/metadata/Orig/version >= 3", XMLXPATH, true),
        ("/metadata/Orig/version >= 4", XMLXPATH, false),
        ("/metadata/Orig/nickname = 'KQAZ' and /metadata/Orig/originator = 'NSA'", XMLXPATH, true),
    ];
    for (filter, document, expected) in cases {
        assert_eq!(check(filter, document), expected, "{filter}");
    }
}

#[test]
fn text_converts_to_numbers_by_xpath_rules() {
    // `<day> 12 </day>`: white space around a number is allowed.
    assert!(check("/metadata/TemporalATO/day = 12", ATO));
    assert!(!check("/metadata/TemporalATO/day = '12'", ATO), "as strings, the spaces count");
    assert!(check("/metadata/TemporalATO/day >= '11.5'", ATO), "ordering converts strings to numbers");
    assert!(!check("/metadata/TemporalATO/month_name > 0", ATO), "`March` is NaN");
    assert!(check("/metadata/TemporalATO/month_name != 0", ATO), "NaN differs from everything");
    assert!(check("/metadata/Orig/version = 3.0", XMLXPATH));
    assert!(check("not(/metadata/Orig/version < -1)", XMLXPATH));
}

#[test]
fn attributes_and_text_nodes() {
    assert!(check("/metadata/ATO[@classification = 'UNCLASSIFIED']/nickname", ATO));
    assert!(check("/metadata/ATO/@rev > 1", ATO));
    assert!(!check("/metadata/ATO/@missing", ATO));
    assert!(check("/metadata/*[@rev]/serialno[starts-with(., 'targ')]", ATO));
    assert!(check("/metadata/ATO/nickname/text() = 'KTJR'", ATO));
    assert!(check("/metadata/Orig[contains(serialno, '4821')]", XMLXPATH));
}

#[test]
fn descendant_steps_reach_any_depth() {
    assert!(check("//nickname = 'KTJR'", ATO));
    assert!(check("/metadata//day >= 26", BASIC));
    assert!(check("//ending_date_time_group//year <= 2003", BASIC));
    assert!(!check("//ATO//day", ATO));
    assert!(check("//*[nickname = 'KQAZ']/version", XMLXPATH));
}

#[test]
fn one_pass_routes_each_object_to_its_subscribers() {
    let subscriptions = [
        ("fig6", FIGURE_6),
        ("ato-ktjr", "/metadata/ATO[nickname='KTJR' and serialno='targ1234']"),
        ("ato-kmyx", "/metadata/ATO[nickname='KMYX']"),
        ("orig-targets", "/metadata/Orig/type = 'Targets' and /metadata/Orig/version >= 2"),
        ("any-september", "//month_name = 'September'"),
        ("no-ato", "not(/metadata/ATO)"),
        ("first-day", "/metadata/*/*[1]/day = 26"),
    ];
    let mut set = XPathSet::new();
    for (key, filter) in subscriptions {
        set.insert(key, &XPathFilter::parse(filter).expect("parses"));
    }
    let mut scratch = XPathScratch::new();
    let mut route = |document: &str| {
        let mut matched = Vec::new();
        set.matching(document.as_bytes(), &mut scratch, &mut matched).expect("well-formed");
        matched.sort_unstable();
        matched
    };
    assert_eq!(route(BASIC), ["any-september", "fig6", "first-day", "no-ato"]);
    assert_eq!(route(ATO), ["ato-ktjr"]);
    assert_eq!(route(XMLXPATH), ["no-ato", "orig-targets"]);
}

#[test]
fn malformed_or_missing_metadata_matches_nothing() {
    let filter = XPathFilter::parse("/metadata").expect("parses");
    let mut set = XPathSet::new();
    set.insert(1, &filter);
    let mut matched = vec![0];
    let error = set.matching(b"<metadata><ATO></metadata>", &mut XPathScratch::new(), &mut matched);
    assert!(matches!(error, Err(XmlError::Syntax { position: 15, .. })), "{error:?}");
    assert_eq!(matched, [0], "out is left as it was");
    let mut message = Message::new(TopicName::new("jbi.ato").expect("valid topic"), "payload");
    assert!(!filter.matches(&message), "no metadata");
    message.metadata = Some("<metadata>".into());
    assert!(!filter.matches(&message), "malformed metadata");
    message.metadata = Some(ATO.into());
    assert!(filter.matches(&message));
}
