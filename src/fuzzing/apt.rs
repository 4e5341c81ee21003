//! apt: deb822 stanzas (Release, Packages, Sources), `Release` dates, clearsigned `InRelease`
//! files, keyrings, index decompression and request paths.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::reach::{
    APT_TEST_KEYRING, Compression, Keyring, apt_decompress, paragraphs, parse_date, parse_packages,
    parse_release, parse_sources, verify_inrelease,
};
use super::text;

/// The "now" Release dates are judged against: 2026-06-01, inside the fixtures' validity.
fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_780_272_000)
}

/// deb822 paragraphs, and the Packages and Sources readers over them. Property: the
/// paragraphs read, written back out as deb822, read back to the same fields.
pub fn apt_deb822(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let mut read = Vec::new();
    for p in paragraphs(text, "fuzz") {
        match p {
            Ok(p) => read.push(p.fields),
            Err(_) => return,
        }
    }
    let mut written = String::new();
    for fields in &read {
        for (name, value) in fields {
            let mut lines = value.split('\n');
            written.push_str(&format!("{name}: {}\n", lines.next().unwrap_or("")));
            for l in lines {
                written.push_str(&format!(" {l}\n"));
            }
        }
        written.push('\n');
    }
    let again: Vec<_> = paragraphs(&written, "again")
        .map(|p| p.map(|p| p.fields))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("written paragraphs do not read back: {e:?}\n{written}"));
    assert_eq!(read, again, "deb822 round trip\n{written}");
    let _ = parse_packages(text, "fuzz/Packages");
    let _ = parse_sources(text, "fuzz/Sources");
}

/// A verified Release text, judged at a fixed "now". Properties: every date the reader
/// accepts round-trips through apt's date form, and every listed file is listed once.
pub fn apt_release(data: &[u8]) {
    if let Some(t) = text(data) {
        for line in t.lines() {
            let value = line.split_once(':').map_or(line, |(_, v)| v).trim();
            if let Some(time) = parse_date(value) {
                let again = apt_date(time);
                assert_eq!(parse_date(&again), Some(time), "{value:?} as {again:?}");
            }
        }
    }
    let Ok(release) = parse_release(data, now(), "fuzz/Release") else {
        return;
    };
    let mut paths: Vec<&str> = release.files.iter().map(|f| f.path.as_str()).collect();
    paths.sort_unstable();
    let n = paths.len();
    paths.dedup();
    assert_eq!(n, paths.len(), "a file listed twice in the SHA256 list");
}

/// `time` in apt's date form (`Tue, 01 Dec 2026 10:00:00 UTC`).
fn apt_date(time: SystemTime) -> String {
    let secs = match time.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    };
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "Mon, {day:02} {} {year} {:02}:{:02}:{:02} UTC",
        MONTHS[(month - 1) as usize],
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// A clearsigned `InRelease`, verified against the apt tests' keyring. Properties: a verified
/// file's signer is in the keyring, and every line of the text handed back is a line of the
/// input (dash-escaped or not): nothing outside the signature gets in.
pub fn apt_inrelease(data: &[u8]) {
    let keyring = match Keyring::from_bytes(APT_TEST_KEYRING) {
        Ok(k) => k,
        Err(e) => panic!("the test keyring does not read: {e:?}"),
    };
    let Ok(v) = verify_inrelease(data, &keyring, now(), "fuzz/InRelease") else {
        return;
    };
    assert!(
        keyring
            .signers(now())
            .iter()
            .any(|(s, _)| s.fingerprint() == v.signer),
        "{} is not a key of the keyring",
        v.signer
    );
    let input = String::from_utf8_lossy(data);
    let lines: Vec<&str> = input.lines().map(|l| l.trim_end_matches('\r')).collect();
    let signed = String::from_utf8(v.signed).unwrap_or_else(|_| panic!("signed text not UTF-8"));
    for line in signed.lines() {
        let escaped = format!("- {line}");
        assert!(
            lines.iter().any(|l| *l == line || *l == escaped),
            "{line:?} is not a line of the input"
        );
    }
    let _ = parse_release(signed.as_bytes(), now(), "fuzz/InRelease");
}

/// An operator's keyring file (armoured or binary OpenPGP). Property: a keyring that reads
/// has at least one key.
pub fn apt_keyring(data: &[u8]) {
    if let Ok(k) = Keyring::from_bytes(data) {
        assert!(
            !k.signers(now()).is_empty(),
            "an empty keyring was accepted"
        );
    }
}

/// An index file to decompress (the first byte chooses none, gzip or xz), at a 1 MiB cap.
/// Property: the output never exceeds the cap, and "none" is the input itself.
pub fn apt_decompress_index(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let compression = match which % 3 {
        0 => Compression::None,
        1 => Compression::Gzip,
        _ => Compression::Xz,
    };
    const CAP: usize = 1 << 20;
    if let Ok(out) = apt_decompress(rest, compression, CAP, "fuzz") {
        assert!(out.len() <= CAP, "{} bytes past the cap", out.len());
        if compression == Compression::None {
            assert_eq!(out, rest);
        }
    }
}
