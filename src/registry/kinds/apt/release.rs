//! The verified Release file: what it says about the suite, and the SHA256 list of every
//! index it vouches for. Only bytes [`super::signed`] returned should reach [`parse`].
//!
//! Dates are checked as apt checks them: `Date` must be there and readable and not later than
//! [`MAX_FUTURE_SKEW`] past now (apt's `Acquire::Max-FutureTime`, 10 seconds by default);
//! `Valid-Until`, when present, must not have passed.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::deb822::paragraphs;
use super::{AptError, AptErrorKind};

/// How far in the future a Release's `Date` may be (apt's default `Acquire::Max-FutureTime`).
pub(crate) const MAX_FUTURE_SKEW: Duration = Duration::from_secs(10);

/// The most files one Release may list (Debian's main archive lists about 1,000 per suite).
pub(crate) const MAX_RELEASE_FILES: usize = 100_000;

/// One file the Release vouches for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ReleaseFile {
    /// SHA-256 of the file's bytes.
    pub(crate) sha256: [u8; 32],
    /// Its size in bytes.
    pub(crate) size: u64,
    /// Its path below `dists/<suite>/`, for example `main/binary-amd64/Packages.xz`.
    pub(crate) path: String,
}

/// A parsed, date-checked Release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Release {
    /// `Origin`.
    pub(crate) origin: Option<String>,
    /// `Suite`.
    pub(crate) suite: Option<String>,
    /// `Codename`.
    pub(crate) codename: Option<String>,
    /// `Date`.
    pub(crate) date: SystemTime,
    /// `Valid-Until`.
    pub(crate) valid_until: Option<SystemTime>,
    /// `Architectures`.
    pub(crate) architectures: Vec<String>,
    /// `Components`.
    pub(crate) components: Vec<String>,
    /// `Acquire-By-Hash: yes`.
    pub(crate) acquire_by_hash: bool,
    /// The `SHA256` list.
    pub(crate) files: Vec<ReleaseFile>,
}

impl Release {
    /// The listed file at `path` (below `dists/<suite>/`).
    pub(crate) fn file(&self, path: &str) -> Option<&ReleaseFile> {
        self.files.iter().find(|f| f.path == path)
    }

    /// Refuses a Release that is not the one of `requested` (the `<suite>` of the path
    /// `dists/<suite>/`): one key signs every suite of an archive, so a mirror could serve
    /// `oldstable`'s valid Release as `stable`. It is the requested suite's when its `Suite`
    /// or its `Codename` is that name, or (as apt's `CheckDist` reads `bookworm/updates`) the
    /// name before its last `/`. apt itself only warns ("Conflicting distribution").
    pub(crate) fn check_suite(&self, requested: &str, locator: &str) -> Result<(), AptError> {
        let names = [self.suite.as_deref(), self.codename.as_deref()];
        let is = |want: &str| names.iter().flatten().any(|n| *n == want);
        let parent = requested.rsplit_once('/').map(|(p, _)| p);
        if is(requested) || parent.is_some_and(is) {
            return Ok(());
        }
        let shown = |v: Option<&str>| v.map_or("none".to_string(), |v| format!("{v:?}"));
        Err(AptError::new(
            AptErrorKind::SuiteMismatch,
            format!("{locator}:Suite"),
            format!(
                "the Release of dists/{requested}/ says Suite {} and Codename {}; another suite's Release served in its place (a rollback to an older distribution) is not served",
                shown(self.suite.as_deref()),
                shown(self.codename.as_deref())
            ),
        ))
    }
}

/// Parses the verified Release text at `locator` and checks its dates against `now`.
pub(crate) fn parse(signed: &[u8], now: SystemTime, locator: &str) -> Result<Release, AptError> {
    let field_err =
        |kind, field: &str, why: String| AptError::new(kind, format!("{locator}:{field}"), why);
    let invalid = |field: &str, why: String| field_err(AptErrorKind::ReleaseInvalid, field, why);
    let text = std::str::from_utf8(signed)
        .map_err(|_| invalid("text", "the Release is not UTF-8".into()))?;
    let mut paras = paragraphs(text, locator);
    let p = match paras.next() {
        Some(p) => p.map_err(|e| AptError::new(AptErrorKind::ReleaseInvalid, e.field, e.detail))?,
        None => return Err(invalid("text", "the Release is empty".into())),
    };
    if paras.next().is_some() {
        return Err(invalid(
            "text",
            "a Release holds one paragraph; this holds more".into(),
        ));
    }
    let date_field = |name: &str| -> Result<Option<SystemTime>, AptError> {
        p.get(name)
            .map(|v| {
                parse_date(v).ok_or_else(|| {
                    invalid(
                        name,
                        format!("{v:?} is not a date like `Tue, 01 Dec 2026 10:00:00 UTC`"),
                    )
                })
            })
            .transpose()
    };
    let date = date_field("Date")?
        .ok_or_else(|| invalid("Date", "the Release has no Date; apt refuses it too".into()))?;
    if date > now + MAX_FUTURE_SKEW {
        return Err(field_err(
            AptErrorKind::ReleaseFromFuture,
            "Date",
            "the Release is dated in the future; check this machine's clock and the mirror's"
                .into(),
        ));
    }
    let valid_until = date_field("Valid-Until")?;
    if let Some(v) = valid_until
        && v <= now
    {
        return Err(field_err(
            AptErrorKind::ReleaseExpired,
            "Valid-Until",
            "the Release has expired (a stale or replayed mirror); the repository must re-sign it"
                .into(),
        ));
    }
    let words = |name: &str| -> Vec<String> {
        p.get(name)
            .map(|v| v.split_ascii_whitespace().map(str::to_string).collect())
            .unwrap_or_default()
    };
    let acquire_by_hash = match p.get("Acquire-By-Hash") {
        None => false,
        Some(v) if v.eq_ignore_ascii_case("yes") => true,
        Some(v) if v.eq_ignore_ascii_case("no") => false,
        Some(v) => {
            return Err(invalid(
                "Acquire-By-Hash",
                format!("{v:?} is neither yes nor no"),
            ));
        }
    };
    let mut files = Vec::new();
    for line in p
        .get("SHA256")
        .unwrap_or("")
        .lines()
        .filter(|l| !l.is_empty())
    {
        if files.len() == MAX_RELEASE_FILES {
            return Err(invalid(
                "SHA256",
                format!("more than MAX_RELEASE_FILES ({MAX_RELEASE_FILES}) files"),
            ));
        }
        let file = checksum_line(line).ok_or_else(|| {
            invalid(
                "SHA256",
                format!("{line:?} is not `<sha256> <size> <path>`"),
            )
        })?;
        // One path, one file: a second line the same is a repeat, a different one makes the
        // path mean two things (which one a reader keeps is its own choice), so it refuses.
        match files.iter().find(|f: &&ReleaseFile| f.path == file.path) {
            Some(seen) if *seen == file => continue,
            Some(_) => {
                return Err(invalid(
                    "SHA256",
                    format!(
                        "`{}` is listed twice with different digests or sizes",
                        file.path
                    ),
                ));
            }
            None => files.push(file),
        }
    }
    if files.is_empty() {
        return Err(invalid(
            "SHA256",
            "the Release lists no SHA256 files; fetchgate checks nothing weaker".into(),
        ));
    }
    Ok(Release {
        origin: p.get("Origin").map(str::to_string),
        suite: p.get("Suite").map(str::to_string),
        codename: p.get("Codename").map(str::to_string),
        date,
        valid_until,
        architectures: words("Architectures"),
        components: words("Components"),
        acquire_by_hash,
        files,
    })
}

/// Reads `<sha256 hex> <size> <path>` (the form of Release's SHA256 and Sources'
/// Checksums-Sha256 lines). The path must be relative, without `..` or empty segments.
pub(crate) fn checksum_line(line: &str) -> Option<ReleaseFile> {
    let mut it = line.split_ascii_whitespace();
    let (hash, size, path) = (it.next()?, it.next()?, it.next()?);
    if it.next().is_some() || hash.len() != 64 {
        return None;
    }
    let mut sha256 = [0u8; 32];
    hex::decode_to_slice(hash, &mut sha256).ok()?;
    let size = size
        .parse()
        .ok()
        .filter(|_| size.bytes().all(|b| b.is_ascii_digit()))?;
    if !super::paths::is_clean_relative(path) {
        return None;
    }
    Some(ReleaseFile {
        sha256,
        size,
        path: path.to_string(),
    })
}

/// Parses apt's date form `Tue, 01 Dec 2026 10:00:00 UTC` (zone `UTC`, `GMT`, `Z` or
/// `+0000`, as apt accepts; the weekday is not checked against the date, as apt does not).
pub(crate) fn parse_date(s: &str) -> Option<SystemTime> {
    let (_weekday, rest) = s.split_once(", ")?;
    let mut it = rest.split_ascii_whitespace();
    let day: u32 = it.next()?.parse().ok()?;
    let month = match it.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i64 = it
        .next()?
        .parse()
        .ok()
        .filter(|y| (1970..=9999).contains(y))?;
    let mut hms = it.next()?.split(':');
    let (h, m, sec): (u64, u64, u64) = (
        hms.next()?.parse().ok()?,
        hms.next()?.parse().ok()?,
        hms.next()?.parse().ok()?,
    );
    if hms.next().is_some()
        || !matches!(it.next()?, "UTC" | "GMT" | "Z" | "+0000")
        || it.next().is_some()
    {
        return None;
    }
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if day == 0 || day > month_days[month - 1] || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    // Days since 1970-01-01 (Howard Hinnant's days_from_civil).
    let (y, mo) = if month <= 2 {
        (year - 1, month as i64 + 9)
    } else {
        (year, month as i64 - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * mo + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = u64::try_from(era * 146_097 + doe - 719_468).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(days * 86_400 + h * 3600 + m * 60 + sec))
}

#[cfg(test)]
#[path = "release_tests.rs"]
mod tests;
