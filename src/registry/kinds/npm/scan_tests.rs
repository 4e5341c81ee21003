use proptest::prelude::*;

use super::*;

/// Every report of a scan of `doc`, written out in order (a string with its decoded text and
/// the document's bytes its span covers).
#[derive(Default)]
struct Record(Vec<String>, String);

impl Visit for Record {
    type Refusal = std::convert::Infallible;
    fn versions(&mut self) -> Result<(), Self::Refusal> {
        self.0.push("versions".into());
        Ok(())
    }
    fn version(&mut self, version: &str) -> Result<(), Self::Refusal> {
        self.0.push(format!("version {version}"));
        Ok(())
    }
    fn dist(&mut self) -> Result<(), Self::Refusal> {
        self.0.push("dist".into());
        Ok(())
    }
    fn member(&mut self, key: &str, value: Member<'_>) -> Result<(), Self::Refusal> {
        self.0.push(match value {
            Member::Text { text, span } => format!("{key}={text:?} from {}", &self.1[span]),
            Member::Other => format!("{key}=other"),
        });
        Ok(())
    }
}

fn reports(doc: &str) -> Result<Vec<String>, ScanError<std::convert::Infallible>> {
    let mut record = Record(Vec::new(), doc.to_string());
    scan(doc.as_bytes(), &mut record)?;
    Ok(record.0)
}

#[test]
fn only_the_top_level_versions_dists_are_reported_in_document_order() {
    let doc = r#" {"name":"x","dist":{"tarball":"no"},"versions":{"1.0.0":{"dist":{"tarball":"a","n":[1,{"tarball":"deep"}],"size":12},"tarball":"no"},"2":7,"3":{"x":{"dist":{"tarball":"no"}}}},"other":{"versions":{"9":{"dist":{"tarball":"no"}}}}} "#;
    assert_eq!(
        reports(doc).unwrap(),
        [
            "versions",
            "version 1.0.0",
            "dist",
            "tarball=\"a\" from \"a\"",
            "n=other",
            "size=other",
            "version 2",
            "version 3",
        ]
    );
    // A document that is not an object has no versions.
    assert_eq!(
        reports(r#"[{"versions":{"1":{}}}]"#).unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(reports("\"versions\"").unwrap(), Vec::<String>::new());
}

#[test]
fn names_are_decoded_before_they_are_compared() {
    let doc = r#"{"vers\u0069ons":{"1.0.0\u002dbeta":{"d\u0069st":{"tar\u0062all":"http:\/\/r\/x-1.tgz","\u0074arball":5}}}}"#;
    assert_eq!(
        reports(doc).unwrap(),
        [
            "versions",
            "version 1.0.0-beta",
            "dist",
            r#"tarball="http://r/x-1.tgz" from "http:\/\/r\/x-1.tgz""#,
            "tarball=other",
        ]
    );
    // Surrogate pairs, and escapes that spell no name on the path.
    let doc = r#"{"versions":{"\ud83d\ude00":{"dist":{"tarball\u0000":"x","\"":"\n"}}}}"#;
    assert_eq!(
        reports(doc).unwrap(),
        [
            "versions",
            "version \u{1f600}",
            "dist",
            "tarball\u{0}=\"x\" from \"x\"",
            r#""="\n" from "\n""#,
        ]
    );
}

#[test]
fn every_repeated_member_is_reported_in_turn() {
    let doc =
        r#"{"versions":{"1":{"dist":{"tarball":"a","tarball":"b"},"dist":{}}},"versions":{}}"#;
    assert_eq!(
        reports(doc).unwrap(),
        [
            "versions",
            "version 1",
            "dist",
            "tarball=\"a\" from \"a\"",
            "tarball=\"b\" from \"b\"",
            "dist",
            "versions",
        ]
    );
}

#[test]
fn what_is_not_json_is_refused_saying_what_and_where() {
    let bad: &[(&[u8], &str)] = &[
        (
            b"",
            "the end of the document where a value belongs at byte 0",
        ),
        (
            b"  ",
            "the end of the document where a value belongs at byte 2",
        ),
        (b"{", "no member name where one belongs at byte 1"),
        (b"{\"a\":}", "no value where one belongs at byte 5"),
        (b"{\"a\":1,}", "no member name where one belongs at byte 7"),
        (b"[1,]", "no value where one belongs at byte 3"),
        (b"[1 2]", "no `,` or `]` after an element at byte 3"),
        (b"{\"a\" 1}", "no `:` after a member name at byte 5"),
        (b"{'a':1}", "no member name where one belongs at byte 1"),
        (
            b"{\"a\":1",
            "the end of the document inside a value at byte 6",
        ),
        (b"{} x", "more after the document's value at byte 3"),
        (b"01", "more after the document's value at byte 1"),
        (b"1.", "no digit after a decimal point at byte 2"),
        (b"1e+", "no digit in an exponent at byte 3"),
        (b"-", "no value where one belongs at byte 0"),
        (b"+1", "no value where one belongs at byte 0"),
        (b"tru", "no value where one belongs at byte 0"),
        (b"NaN", "no value where one belongs at byte 0"),
        (b"\"abc", "a string that does not end at byte 0"),
        (b"\"a\\x\"", "an unknown escape in a string at byte 2"),
        (
            b"\"\\u12\"",
            "a `\\u` escape without four hex digits at byte 1",
        ),
        (b"\"\\ud800\"", "a lone surrogate escape at byte 1"),
        (b"\"\\udc00\"", "a lone surrogate escape at byte 1"),
        (b"\"\\ud800\\u0041\"", "a lone surrogate escape at byte 1"),
        (b"\"a\x01\"", "a control character in a string at byte 2"),
        (b"\"\xff\"", "a byte sequence that is not UTF-8 at byte 1"),
        (b"\xef\xbb\xbf{}", "no value where one belongs at byte 0"),
    ];
    for (doc, why) in bad {
        let e = scan(doc, &mut Record::default())
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some(format!("the packument is not JSON: {why}").as_str()),
            "{:?}",
            String::from_utf8_lossy(doc)
        );
    }
    let deep = "[".repeat(MAX_DEPTH + 1);
    assert!(
        reports(&deep)
            .unwrap_err()
            .to_string()
            .contains("nested too deep")
    );
    let fine = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
    assert!(reports(&fine).is_ok());
}

#[test]
fn a_readers_refusal_ends_the_scan_with_its_reason() {
    /// The reader's one reason.
    #[derive(Debug, PartialEq, Eq, thiserror::Error)]
    #[error("no thanks")]
    struct NoThanks;
    struct Refuse;
    impl Visit for Refuse {
        type Refusal = NoThanks;
        fn versions(&mut self) -> Result<(), NoThanks> {
            Err(NoThanks)
        }
        fn version(&mut self, _: &str) -> Result<(), NoThanks> {
            Ok(())
        }
        fn dist(&mut self) -> Result<(), NoThanks> {
            Ok(())
        }
        fn member(&mut self, _: &str, _: Member<'_>) -> Result<(), NoThanks> {
            Ok(())
        }
    }
    let refused = scan(br#"{"versions":{}}"#, &mut Refuse);
    assert_eq!(refused, Err(ScanError::Refused(NoThanks)));
    assert_eq!(refused.unwrap_err().to_string(), "no thanks");
}

proptest! {
    /// The scan accepts exactly what serde_json reads as a `Value`, but for the numbers too
    /// large for an `f64` that serde_json refuses and `JSON.parse` reads as infinities.
    #[test]
    fn the_scan_accepts_what_serde_json_accepts(doc in r#"[ {}\[\],:"\\a-fnrlstu0-9.E+-]{0,24}|"[^"]{0,6}""#) {
        let ours = scan(doc.as_bytes(), &mut Record::default());
        match serde_json::from_str::<serde_json::Value>(&doc) {
            Ok(_) => prop_assert!(ours.is_ok(), "{doc:?}: {ours:?}"),
            Err(e) if e.to_string().contains("number out of range") => {}
            Err(e) => prop_assert!(ours.is_err(), "{doc:?} is not JSON ({e}), yet scanned"),
        }
    }
}
