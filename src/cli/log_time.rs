//! The timestamp on every log line, as `tracing-subscriber`'s system-time timer writes it
//! (RFC 3339 in UTC with microseconds, `2026-12-01T17:12:41.123456Z`), with the part down to
//! the second formatted once per second per thread: the access log writes one line per request.

use std::cell::RefCell;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

/// Bytes of `YYYY-MM-DDTHH:MM:SS`.
const TO_SECONDS: usize = 19;

/// The log timer: [`FormatTime`] with the seconds cached.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogTime;

thread_local! {
    /// The second last formatted on this thread, and its text.
    static SECOND: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

impl FormatTime for LogTime {
    fn format_time(&self, w: &mut Writer<'_>) -> std::fmt::Result {
        write_stamp(w, SystemTime::now())
    }
}

/// Writes `at` as the log shows it.
fn write_stamp(w: &mut impl std::fmt::Write, at: SystemTime) -> std::fmt::Result {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    SECOND.with_borrow_mut(|(cached, text)| {
        if *cached != secs || text.len() != TO_SECONDS {
            let whole = humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs));
            *text = whole
                .to_string()
                .get(..TO_SECONDS)
                .unwrap_or_default()
                .to_string();
            *cached = secs;
        }
        w.write_str(text)
    })?;
    // `.` six digits of microseconds, `Z`.
    let mut tail = *b".000000Z";
    let mut micros = since.subsec_micros();
    for digit in tail[1..7].iter_mut().rev() {
        *digit = b'0' + (micros % 10) as u8;
        micros /= 10;
    }
    w.write_str(std::str::from_utf8(&tail).unwrap_or(".000000Z"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same text as `humantime`'s RFC 3339 with microseconds, second after second.
    #[test]
    fn stamps_are_rfc_3339_with_microseconds() {
        for secs in [0u64, 1_764_609_161, 1_764_609_162, 4_102_444_799] {
            for micros in [0u32, 7, 123_456, 999_999] {
                let at = UNIX_EPOCH
                    + Duration::from_secs(secs)
                    + Duration::from_micros(u64::from(micros));
                let mut got = String::new();
                write_stamp(&mut got, at).unwrap();
                assert_eq!(
                    got,
                    humantime::format_rfc3339_micros(at).to_string(),
                    "{secs} {micros}"
                );
            }
        }
    }
}
