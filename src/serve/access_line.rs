//! The access log's line for one finished request (target `fetchgate::request`): a `tracing`
//! event, or, once the binary has asked for plain text ([`write_text_lines_to`]), the same
//! line's message and fields written straight into a reused buffer and handed to the log's
//! writer: no event, no field visitor and no formatting machinery on the way, which made up
//! most of a cache hit's cost after HTTP itself. Both forms carry the same fields in the same
//! order, and the text is byte for byte what the text log writes for the event.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::sync::OnceLock;

/// Takes the message and fields of an access log line as the text log writes them
/// (`request client=... duration_ms=N`) and writes the whole line: the time stamp, level and
/// target before them, a newline after.
pub type TextLines = Box<dyn Fn(&str) + Send + Sync>;

static TEXT_LINES: OnceLock<TextLines> = OnceLock::new();

/// Sends every later access log line to `lines` instead of through `tracing` (while the
/// `fetchgate::request` target is enabled at `INFO`). For a plain text log without colours
/// only; set once, at start. False if already set.
pub(crate) fn write_text_lines_to(lines: TextLines) -> bool {
    TEXT_LINES.set(lines).is_ok()
}

thread_local! {
    /// The line's message and fields, put together here; it keeps its capacity between lines.
    static FIELDS: RefCell<String> = const { RefCell::new(String::new()) };
}

/// One finished request's line: its fields, borrowed from the request's log
/// ([`super::request_log`]), `None` for a field not set.
pub(crate) struct AccessLine<'a> {
    /// The client's address.
    pub(crate) client: std::net::SocketAddr,
    /// The request's method.
    pub(crate) method: &'a http::Method,
    /// The redacted locator.
    pub(crate) locator: &'a str,
    /// The registry the request was for.
    pub(crate) registry: Option<&'a str>,
    /// What was decided about the destination.
    pub(crate) decision: &'static str,
    /// Reason or error code.
    pub(crate) reason: &'static str,
    /// The validated address used.
    pub(crate) upstream: Option<&'a str>,
    /// Response status.
    pub(crate) status: u16,
    /// The `[[access.policy]]` in force.
    pub(crate) policy: Option<&'a str>,
    /// A failure's safe next action.
    pub(crate) next: Option<&'a str>,
    /// The trust rule that would allow what was refused.
    pub(crate) trust_rule: Option<&'a str>,
    /// Body bytes sent.
    pub(crate) bytes: u64,
    /// Whether the body was sent whole.
    pub(crate) complete: bool,
    /// From the request's arrival to the body's end.
    pub(crate) duration_ms: u64,
}

impl AccessLine<'_> {
    /// Writes the line: as text when [`write_text_lines_to`] was called, else as an event.
    pub(crate) fn write(&self) {
        let Some(lines) = TEXT_LINES.get() else {
            return self.event();
        };
        if !tracing::enabled!(target: "fetchgate::request", tracing::Level::INFO) {
            return;
        }
        FIELDS.with(|cell| match cell.try_borrow_mut() {
            Ok(mut fields) => {
                fields.clear();
                self.text(&mut fields);
                lines(&fields);
            }
            Err(_) => self.event(),
        });
    }

    /// The line as a `tracing` event.
    pub(crate) fn event(&self) {
        tracing::info!(
            target: "fetchgate::request",
            client = %ClientAddr(self.client),
            method = %self.method,
            locator = %self.locator,
            registry = self.registry.unwrap_or("-"),
            decision = self.decision,
            reason = self.reason,
            upstream = self.upstream.unwrap_or("-"),
            status = self.status,
            policy = self.policy.unwrap_or("-"),
            next = self.next.unwrap_or("-"),
            trust_rule = self.trust_rule.unwrap_or("-"),
            bytes = self.bytes,
            complete = self.complete,
            duration_ms = self.duration_ms,
            "request"
        );
    }

    /// The event's message and fields as the text log writes them: `%` fields as they
    /// display, strings as their `Debug` form, numbers in decimal.
    pub(crate) fn text(&self, out: &mut String) {
        out.push_str("request client=");
        ClientAddr(self.client).push_to(out);
        out.push_str(" method=");
        out.push_str(self.method.as_str());
        out.push_str(" locator=");
        out.push_str(self.locator);
        let quoted: [(&str, &str); 4] = [
            (" registry=", self.registry.unwrap_or("-")),
            (" decision=", self.decision),
            (" reason=", self.reason),
            (" upstream=", self.upstream.unwrap_or("-")),
        ];
        for (name, value) in quoted {
            push_str_field(out, name, value);
        }
        out.push_str(" status=");
        push_decimal(out, u64::from(self.status));
        let quoted: [(&str, &str); 3] = [
            (" policy=", self.policy.unwrap_or("-")),
            (" next=", self.next.unwrap_or("-")),
            (" trust_rule=", self.trust_rule.unwrap_or("-")),
        ];
        for (name, value) in quoted {
            push_str_field(out, name, value);
        }
        out.push_str(" bytes=");
        push_decimal(out, self.bytes);
        out.push_str(if self.complete {
            " complete=true"
        } else {
            " complete=false"
        });
        out.push_str(" duration_ms=");
        push_decimal(out, self.duration_ms);
    }
}

/// Appends `name` (` field=`) and `value`'s `Debug` form; the unset value `-` that most
/// fields of most lines carry, as one piece.
fn push_str_field(out: &mut String, name: &str, value: &str) {
    out.push_str(name);
    if value == "-" {
        out.push_str("\"-\"");
    } else {
        push_debug_str(out, value);
    }
}

/// Appends `value`'s `Debug` form: quoted, with only quotes, backslashes and characters
/// outside printable ASCII escaped, so a string without any is written as it is.
pub(crate) fn push_debug_str(out: &mut String, value: &str) {
    if value
        .bytes()
        .all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\')
    {
        out.push('"');
        out.push_str(value);
        out.push('"');
    } else {
        let _ = write!(out, "{value:?}");
    }
}

/// Appends `v` in decimal, as its `Debug` writes it.
pub(crate) fn push_decimal(out: &mut String, v: u64) {
    out.push_str(itoa::Buffer::new().format(v));
}

/// A client address as `SocketAddr`'s `Display` writes it; an IPv4 one without the
/// formatter's machinery (the access log writes one per request).
struct ClientAddr(std::net::SocketAddr);

impl ClientAddr {
    /// Appends the address as its `Display` writes it.
    fn push_to(&self, out: &mut String) {
        let std::net::SocketAddr::V4(a) = self.0 else {
            let _ = write!(out, "{}", self.0);
            return;
        };
        let mut digits = itoa::Buffer::new();
        for (i, octet) in a.ip().octets().into_iter().enumerate() {
            if i > 0 {
                out.push('.');
            }
            out.push_str(digits.format(octet));
        }
        out.push(':');
        out.push_str(digits.format(a.port()));
    }
}

impl std::fmt::Display for ClientAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let std::net::SocketAddr::V4(a) = self.0 else {
            return self.0.fmt(f);
        };
        let mut digits = itoa::Buffer::new();
        for (i, octet) in a.ip().octets().into_iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            f.write_str(digits.format(octet))?;
        }
        f.write_str(":")?;
        f.write_str(digits.format(a.port()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The access log's client address is the one `SocketAddr` writes.
    #[test]
    fn client_addresses_are_written_as_socket_addr_writes_them() {
        for a in [
            "127.0.0.1:3128",
            "0.0.0.0:0",
            "255.255.255.255:65535",
            "10.20.30.40:9",
            "[::1]:443",
            "[2001:db8::1]:8080",
        ] {
            let addr: std::net::SocketAddr = a.parse().unwrap();
            assert_eq!(ClientAddr(addr).to_string(), addr.to_string());
            let mut pushed = String::from("client=");
            ClientAddr(addr).push_to(&mut pushed);
            assert_eq!(pushed, format!("client={addr}"));
        }
    }
}
