//! Tests for `release.rs`.

use super::*;

const HASH: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

fn at(s: &str) -> SystemTime {
    parse_date(s).unwrap()
}

fn release(extra: &str) -> String {
    format!(
        "Origin: Test\nSuite: stable\nCodename: trixie\nDate: Tue, 01 Dec 2026 10:00:00 UTC\n{extra}Architectures: amd64 arm64\nComponents: main\nSHA256:\n {HASH} 0 main/binary-amd64/Packages\n {HASH}     20 main/binary-amd64/Packages.xz\n"
    )
}

fn now() -> SystemTime {
    at("Tue, 01 Dec 2026 12:00:00 UTC")
}

#[test]
fn reads_every_field_and_the_sha256_list() {
    let r = parse(
        release("Acquire-By-Hash: yes\nValid-Until: Tue, 08 Dec 2026 10:00:00 UTC\n").as_bytes(),
        now(),
        "R",
    )
    .unwrap();
    assert_eq!(
        (
            r.origin.as_deref(),
            r.suite.as_deref(),
            r.codename.as_deref()
        ),
        (Some("Test"), Some("stable"), Some("trixie"))
    );
    assert_eq!(r.architectures, ["amd64", "arm64"]);
    assert_eq!(r.components, ["main"]);
    assert!(r.acquire_by_hash);
    assert_eq!(r.date, at("Tue, 01 Dec 2026 10:00:00 UTC"));
    assert_eq!(r.files.len(), 2);
    let f = r.file("main/binary-amd64/Packages.xz").unwrap();
    assert_eq!((f.size, hex::encode(f.sha256)), (20, HASH.to_string()));
    assert!(r.file("main/binary-amd64/Packages.gz").is_none());
}

#[test]
fn dates_are_unix_times() {
    assert_eq!(at("Thu, 01 Jan 1970 00:00:00 UTC"), UNIX_EPOCH);
    assert_eq!(
        keyring_secs(at("Sat, 29 Feb 2020 23:59:59 +0000")),
        1_583_020_799
    );
    for bad in [
        "01 Dec 2026 10:00:00 UTC",
        "Tue, 31 Nov 2026 10:00:00 UTC",
        "Tue, 01 Dec 2026 10:00:00 CET",
        "Tue, 01 Dec 2026 10:00 UTC",
    ] {
        assert!(parse_date(bad).is_none(), "{bad}");
    }
}

fn keyring_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_secs()
}

#[test]
fn a_missing_or_unreadable_date_is_refused_naming_it() {
    let no_date = release("").replace("Date: Tue, 01 Dec 2026 10:00:00 UTC\n", "");
    let e = parse(no_date.as_bytes(), now(), "R").unwrap_err();
    assert_eq!(
        (e.code(), e.field.as_str()),
        ("apt_release_invalid", "R:Date")
    );
    let bad = release("").replace("Tue, 01 Dec 2026", "yesterday");
    assert_eq!(
        parse(bad.as_bytes(), now(), "R").unwrap_err().field,
        "R:Date"
    );
}

#[test]
fn valid_until_in_the_past_is_refused_and_in_the_future_accepted() {
    let past = release("Valid-Until: Tue, 01 Dec 2026 11:59:59 UTC\n");
    let e = parse(past.as_bytes(), now(), "R").unwrap_err();
    assert_eq!(
        (e.code(), e.field.as_str()),
        ("apt_release_expired", "R:Valid-Until")
    );
    let future = release("Valid-Until: Tue, 01 Dec 2026 12:00:01 UTC\n");
    assert!(parse(future.as_bytes(), now(), "R").is_ok());
}

#[test]
fn a_date_in_the_future_beyond_the_skew_is_refused() {
    let r = release("");
    let early = at("Tue, 01 Dec 2026 10:00:00 UTC") - MAX_FUTURE_SKEW;
    assert!(parse(r.as_bytes(), early, "R").is_ok(), "within the skew");
    let e = parse(r.as_bytes(), early - Duration::from_secs(1), "R").unwrap_err();
    assert_eq!(
        (e.code(), e.field.as_str()),
        ("apt_release_from_future", "R:Date")
    );
}

#[test]
fn bad_checksum_lines_and_empty_lists_are_refused() {
    for line in [
        format!(" {HASH} 1 ../../etc/passwd\n"),
        format!(" {HASH} -1 main/x\n"),
        format!(" {} 1 main/x\n", &HASH[1..]),
        format!(" {HASH} 1 main//x\n"),
        format!(" {HASH} 1 /main/x\n"),
    ] {
        let text = format!("{}{line}", release(""));
        assert_eq!(
            parse(text.as_bytes(), now(), "R").unwrap_err().field,
            "R:SHA256",
            "{line}"
        );
    }
    let none = release("").split("SHA256:").next().unwrap().to_string();
    assert_eq!(
        parse(none.as_bytes(), now(), "R").unwrap_err().field,
        "R:SHA256"
    );
    let two = format!("{}\nOrigin: Evil\n", release(""));
    assert_eq!(
        parse(two.as_bytes(), now(), "R").unwrap_err().code(),
        "apt_release_invalid"
    );
}

#[test]
fn a_release_is_the_requested_suites_only_when_its_suite_or_codename_names_it() {
    let r = parse(release("").as_bytes(), now(), "R").unwrap();
    // Another suite's Release (same archive key) served under this suite's path.
    for other in [
        "oldstable",
        "bookworm",
        "Stable",
        "stable-updates",
        "trixie/updates/x",
    ] {
        let e = r.check_suite(other, "dists/x").unwrap_err();
        assert_eq!(e.code(), "apt_release_suite_mismatch", "{other}: {e}");
        assert_eq!(e.field, "dists/x:Suite");
    }
    // The twin: the suite, the codename, and apt's `<codename>/updates` form are its own.
    for own in ["stable", "trixie", "trixie/updates", "stable/updates"] {
        assert!(r.check_suite(own, "dists/x").is_ok(), "{own}");
    }
    let bare = parse(
        release("")
            .replace("Suite: stable\nCodename: trixie\n", "")
            .as_bytes(),
        now(),
        "R",
    )
    .unwrap();
    assert_eq!(
        bare.check_suite("stable", "d").unwrap_err().code(),
        "apt_release_suite_mismatch",
        "a Release that names no suite is no suite's"
    );
}

#[test]
fn a_path_listed_twice_differently_is_refused_and_a_repeat_is_one_file() {
    // Found by the apt_release fuzz target: one path with two digests and sizes.
    let twice = format!(
        "{}Acquire-By-Hash: no\n",
        release("").replace(
            "Packages.xz\n",
            &format!(
                "Packages.xz\n {} 346 main/binary-amd64/Packages\n",
                "1".repeat(64)
            )
        )
    );
    let e = parse(twice.as_bytes(), now(), "R").unwrap_err();
    assert_eq!(e.field, "R:SHA256", "{e}");
    assert!(e.to_string().contains("listed twice"), "{e}");
    // The twin: the same line again is the same file, listed once.
    let repeated = release("").replace(
        "Packages.xz\n",
        &format!("Packages.xz\n {HASH} 0 main/binary-amd64/Packages\n"),
    );
    let r = parse(repeated.as_bytes(), now(), "R").unwrap();
    assert_eq!(r.files.len(), 2);
}
