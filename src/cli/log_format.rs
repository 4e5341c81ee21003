//! The text log's line format: exactly `tracing-subscriber`'s default ("full") format, with
//! the access log's lines (one per request, target `fetchgate::request`) written by a visitor
//! that puts each field's text straight into the line instead of through the default's styled
//! `format_args!` per field. Every other line, and any line while colours are on or inside a
//! span, is written by the default formatter itself. The JSON log is not affected.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::FmtContext;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::format::{self, Format, FormatEvent, FormatFields, Full, Writer};
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::registry::LookupSpan;

use crate::serve::access_line::{push_debug_str, push_decimal};

/// The target of the access log's lines.
pub const REQUEST_TARGET: &str = "fetchgate::request";

/// The text log's event format (see the module documentation).
#[derive(Clone, Debug)]
pub struct TextFormat<T> {
    timer: T,
    default: Format<Full, T>,
}

impl<T: FormatTime + Clone> TextFormat<T> {
    /// The default format with `timer`'s timestamps, and the fast access-log lines.
    pub fn new(timer: T) -> Self {
        Self {
            default: format::format().with_timer(timer.clone()),
            timer,
        }
    }
}

impl<S, N, T> FormatEvent<S, N> for TextFormat<T>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    T: FormatTime,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        if meta.target() != REQUEST_TARGET
            || writer.has_ansi_escapes()
            || ctx.event_scope().is_some()
        {
            return self.default.format_event(ctx, writer, event);
        }
        // The default's timestamp, level (padded to five), target and fields, in its order.
        if self.timer.format_time(&mut writer).is_err() {
            writer.write_str("<unknown time>")?;
        }
        LINE.with(|cell| {
            // A field whose text logs a line of its own finds the buffer taken: that inner
            // line is the default formatter's.
            let Ok(mut line) = cell.try_borrow_mut() else {
                return self.default.format_event(ctx, writer, event);
            };
            let line = &mut *line;
            line.clear();
            line.push_str(level_column(meta.level()));
            line.push_str(meta.target());
            line.push_str(": ");
            let mut fields = FieldWriter {
                out: line,
                first: true,
                result: Ok(()),
            };
            event.record(&mut fields);
            fields.result?;
            line.push('\n');
            writer.write_str(line)
        })
    }
}

/// Writes the access log's lines to `writer`, stamped by `timer`, without a `tracing` event:
/// the bytes [`TextFormat`] writes for a `fetchgate::request` event outside any span, put
/// together in one reused buffer (`serve::access_line`). For a plain text log without colours
/// only. False if the access log's lines already go elsewhere.
pub fn write_access_lines<T, W>(timer: T, writer: W) -> bool
where
    T: FormatTime + Send + Sync + 'static,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    crate::serve::access_line::write_text_lines_to(Box::new(move |fields: &str| {
        access_line(&timer, fields, |line| {
            let _ = std::io::Write::write_all(&mut writer.make_writer(), line.as_bytes());
        });
    }))
}

/// The whole access log line for its message and `fields`, stamped by `timer`, handed to
/// `write` from the reused line buffer.
fn access_line<T: FormatTime>(timer: &T, fields: &str, write: impl FnOnce(&str)) {
    LINE.with(|cell| {
        // Taken only while another line is put together on this thread: this one gets its own.
        let mut own = String::new();
        let mut kept = cell.try_borrow_mut();
        let line = match kept.as_deref_mut() {
            Ok(line) => line,
            Err(_) => &mut own,
        };
        line.clear();
        if timer.format_time(&mut Writer::new(&mut *line)).is_err() {
            line.push_str("<unknown time>");
        }
        line.push_str(level_column(&Level::INFO));
        line.push_str(REQUEST_TARGET);
        line.push_str(": ");
        line.push_str(fields);
        line.push('\n');
        write(line);
    });
}

thread_local! {
    /// The line after its timestamp, put together here and written at once: one call into the
    /// log's writer instead of three or four per field. It keeps its capacity between lines.
    static LINE: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// The space after the timestamp, the level as the default pads it, and the space after it.
fn level_column(level: &Level) -> &'static str {
    match *level {
        Level::TRACE => " TRACE ",
        Level::DEBUG => " DEBUG ",
        Level::INFO => "  INFO ",
        Level::WARN => "  WARN ",
        Level::ERROR => " ERROR ",
    }
}

/// Writes an event's fields as the default visitor does with colours off: `name=value`
/// separated by spaces, the message first and bare, strings and other values by their
/// `Debug` form (a `%` field's `Debug` is its `Display`).
struct FieldWriter<'a> {
    out: &'a mut String,
    first: bool,
    result: fmt::Result,
}

impl FieldWriter<'_> {
    /// The separator and `name=`, or `false` for a field the default leaves out.
    fn start(&mut self, field: &Field) -> bool {
        if self.result.is_err() {
            return false;
        }
        let name = field.name();
        if name.starts_with("log.") {
            return false;
        }
        if !self.first {
            self.out.push(' ');
        }
        self.first = false;
        if name != "message" {
            self.out.push_str(name.strip_prefix("r#").unwrap_or(name));
            self.out.push('=');
        }
        true
    }
}

impl Visit for FieldWriter<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            return self.record_debug(field, &format_args!("{value}"));
        }
        if !self.start(field) {
            return;
        }
        push_debug_str(self.out, value);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if self.start(field) {
            push_decimal(self.out, value);
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if self.start(field) {
            self.out.push_str(if value { "true" } else { "false" });
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if !self.start(field) {
            return;
        }
        self.result = if field.name() == "message" {
            // The default escapes terminal control characters in the message only.
            write!(EscapeControls(self.out), "{value:?}")
        } else {
            write!(self.out, "{value:?}")
        };
    }
}

/// A writer that spells out the control characters a terminal could act on, as the default
/// formatter does for a message (ESC, BEL, BS, FF, DEL and the C1 controls).
struct EscapeControls<'a>(&'a mut String);

impl fmt::Write for EscapeControls<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut rest = s;
        while let Some(at) = rest.find(is_terminal_control) {
            self.0.write_str(&rest[..at])?;
            let ch = rest[at..].chars().next().unwrap_or(' ');
            match ch {
                '\x1b' => self.0.write_str("\\x1b")?,
                '\x07' => self.0.write_str("\\x07")?,
                '\x08' => self.0.write_str("\\x08")?,
                '\x0c' => self.0.write_str("\\x0c")?,
                '\x7f' => self.0.write_str("\\x7f")?,
                c => write!(self.0, "\\u{{{:x}}}", c as u32)?,
            }
            rest = &rest[at + ch.len_utf8()..];
        }
        self.0.write_str(rest)
    }
}

/// The characters [`EscapeControls`] spells out.
fn is_terminal_control(c: char) -> bool {
    matches!(
        c,
        '\x1b' | '\x07' | '\x08' | '\x0c' | '\x7f' | '\u{80}'..='\u{9f}'
    )
}

#[cfg(test)]
#[path = "log_format_tests.rs"]
mod tests;
