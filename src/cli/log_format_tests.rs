use std::sync::{Arc, Mutex};

use super::*;

/// A timer that always writes the same stamp, so two formatters' lines can be compared.
#[derive(Clone)]
struct Fixed;

impl FormatTime for Fixed {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        w.write_str("2026-12-04T17:00:00.000001Z")
    }
}

/// Collects what a subscriber writes.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What `emit` logs through a subscriber with `format`.
fn written<F>(format: F, emit: impl Fn()) -> String
where
    F: FormatEvent<tracing_subscriber::Registry, format::DefaultFields> + Send + Sync + 'static,
{
    let lines = Lines::default();
    let out = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(Level::TRACE)
        .with_writer(move || out.clone())
        .event_format(format)
        .finish();
    tracing::subscriber::with_default(subscriber, emit);
    let bytes = lines.0.lock().unwrap().clone();
    String::from_utf8(bytes).unwrap()
}

/// Both formatters' text for `emit`, fast first.
fn both(emit: impl Fn() + Clone) -> (String, String) {
    (
        written(TextFormat::new(Fixed), emit.clone()),
        written(format::format().with_timer(Fixed), emit),
    )
}

/// Field values the fast paths must write as the default does: the unset `-`, empty, plain,
/// and strings that `Debug` escapes (quotes, backslashes, controls, non-ASCII).
const AWKWARD: [&str; 11] = [
    "-",
    "plain",
    "",
    "with \"quotes\"",
    "back\\slash",
    "tab\there",
    "new\nline",
    "é unicode ✓",
    "\u{1b}[31mred",
    "\u{85}next",
    "\u{301}combining",
];

/// An access-log line is byte for byte the default's, for every kind of field it carries and
/// for strings the fast path must hand to `Debug` (quotes, backslashes, controls, non-ASCII).
#[test]
fn request_lines_are_the_default_formats_bytes() {
    let client: std::net::SocketAddr = "127.0.0.1:4242".parse().unwrap();
    for text in AWKWARD {
        let emit = move || {
            tracing::info!(
                target: "fetchgate::request",
                client = %client,
                method = %http::Method::GET,
                locator = %format!("/sha256/{text}"),
                registry = text,
                status = 200u16,
                bytes = 1024u64,
                duration_ms = 0u64,
                complete = true,
                r#type = false,
                signed = -5i64,
                "request"
            );
        };
        let (fast, default) = both(emit);
        assert!(
            fast.contains("fetchgate::request: request client=127.0.0.1:4242"),
            "{fast}"
        );
        assert_eq!(fast, default, "for {text:?}");
    }
}

/// Messages with terminal controls are escaped as the default escapes them, and every level
/// pads as the default pads it.
#[test]
fn messages_and_levels_match_the_default() {
    let emit = || {
        tracing::trace!(target: "fetchgate::request", n = 1u64, "bell \u{7} esc \u{1b} c1 \u{9b} end");
        tracing::debug!(target: "fetchgate::request", "debug {}", 42);
        tracing::info!(target: "fetchgate::request", "info");
        tracing::warn!(target: "fetchgate::request", "warn");
        tracing::error!(target: "fetchgate::request", error = "e", "error");
        tracing::info!(target: "fetchgate::request", only = "a field");
    };
    let (fast, default) = both(emit);
    assert_eq!(fast.lines().count(), 6, "{fast}");
    assert!(fast.contains("\\x07") && fast.contains("\\u{9b}"), "{fast}");
    assert_eq!(fast, default);
}

/// Lines of other targets, and lines inside a span, are the default formatter's own.
#[test]
fn other_lines_are_the_default_formatters() {
    let emit = || {
        tracing::info!(target: "fetchgate::banner", upstream = "x", "other target");
        let span = tracing::info_span!("conn", peer = 7u64);
        let _in = span.enter();
        tracing::info!(target: "fetchgate::request", status = 200u16, "in a span");
    };
    let (fast, default) = both(emit);
    assert!(fast.contains("conn{peer=7}"), "{fast}");
    assert_eq!(fast, default);
}

/// The access log's text lines put together without an event (`write_access_lines`) are
/// byte for byte the lines the event gives through the text format, for every field, with
/// strings the fast path hands to `Debug`, an IPv6 client and every other method.
#[test]
fn access_lines_written_without_an_event_are_the_events_bytes() {
    use crate::serve::request_log::{Decided, RequestLog};
    let clients = ["127.0.0.1:4242", "[2001:db8::1]:8080"];
    let methods = [
        http::Method::GET,
        http::Method::HEAD,
        http::Method::from_bytes(b"PURGE").unwrap(),
    ];
    for (i, text) in AWKWARD.into_iter().enumerate() {
        let mut log = RequestLog::new(
            clients[i % 2].parse().unwrap(),
            methods[i % 3].clone(),
            format!("/registry/npm/{text}"),
        );
        log.registry = (i % 2 == 0).then(|| Arc::from(text));
        log.decision = [Decided::Nothing, Decided::Allowed, Decided::Refused][i % 3];
        log.reason = "digest_mismatch";
        log.upstream = (i % 3 != 0).then(|| format!("127.0.0.2:{i}{text}"));
        log.status = [200, 424, 0][i % 3];
        log.policy = (i % 2 == 1).then(|| Arc::from(text));
        log.next = Some(text.to_string());
        log.trust_rule = (i % 3 == 2).then(|| text.to_string());
        let line = log.access_line(u64::MAX >> i, i % 2 == 0, i as u64 * 997);
        let through_event = written(TextFormat::new(Fixed), || line.event());
        let mut fields = String::new();
        line.text(&mut fields);
        let mut direct = String::new();
        access_line(&Fixed, &fields, |l| direct.push_str(l));
        assert!(direct.contains(" locator=/registry/npm/"), "{direct}");
        assert_eq!(direct, through_event, "for {text:?}");
    }
}
