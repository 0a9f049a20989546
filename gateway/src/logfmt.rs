//! The fields of log lines and spans, written exactly as tracing-subscriber's `DefaultFields`
//! writes them, at less cost. Every request opens a span whose three fields the log formats
//! when the span is made, logged or not: through `DefaultFields` that was a formatting call
//! with three arguments per field into a string grown from empty (about 3 % of the CPU of a
//! hot 4 KiB read, docs/BENCHMARKS.md). Here a plain `name=value` field is written directly
//! into a buffer sized once; whatever `DefaultFields` treats specially (messages and their
//! escaping, errors and their sources, `r#` and `log.` names, colour) is left to it.

use std::fmt::{self, Write};

use tracing::field::{Field, Visit};
use tracing_subscriber::field::{RecordFields, VisitOutput};
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::{DefaultFields, DefaultVisitor, Writer};

/// Room for a request span's fields without regrowing.
const TYPICAL: usize = 256;

/// `DefaultFields`' output, for the gateway's log (`fmt().fmt_fields(Fields)`).
#[derive(Debug, Default, Clone, Copy)]
pub struct Fields;

impl<'writer> FormatFields<'writer> for Fields {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'writer>, fields: R) -> fmt::Result {
        // A writer that `Writer::new` cannot make (colour, or escapes left in) is not ours to copy.
        if writer.has_ansi_escapes() || !writer.sanitizes_ansi_escapes() {
            return DefaultFields::new().format_fields(writer, fields);
        }
        let mut buf = String::with_capacity(TYPICAL);
        let mut v = Visitor { buf: &mut buf, is_empty: true, result: Ok(()) };
        fields.record(&mut v);
        v.result?;
        writer.write_str(&buf)
    }
}

struct Visitor<'a> {
    buf: &'a mut String,
    is_empty: bool,
    result: fmt::Result,
}

impl Visitor<'_> {
    /// Lets `DefaultVisitor` write one field (as it would in the middle of its own run).
    fn delegate(&mut self, name: &str, f: impl FnOnce(&mut DefaultVisitor<'_>)) {
        if self.result.is_err() {
            return;
        }
        let before = self.buf.len();
        let mut v = DefaultVisitor::new(Writer::new(&mut *self.buf), self.is_empty);
        f(&mut v);
        self.result = v.finish();
        // It pads before every field it writes; it skips only `log.` fields (log metadata),
        // which then write nothing.
        self.is_empty = self.is_empty && name.starts_with("log.") && self.buf.len() == before;
    }
}

fn is_plain(name: &str) -> bool {
    name != "message" && !name.starts_with("r#") && !name.starts_with("log.")
}

impl Visit for Visitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        // As `DefaultVisitor` does: a message as it is, anything else quoted.
        if field.name() == "message" {
            self.record_debug(field, &format_args!("{value}"))
        } else {
            self.record_debug(field, &value)
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.delegate(field.name(), |v| v.record_error(field, value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let name = field.name();
        if !is_plain(name) {
            return self.delegate(name, |v| v.record_debug(field, value));
        }
        if self.result.is_err() {
            return;
        }
        if self.is_empty {
            self.is_empty = false;
        } else {
            self.buf.push(' ');
        }
        // Without colour `DefaultVisitor` writes `{name}={value:?}`: its styles print nothing.
        self.buf.push_str(name);
        self.buf.push('=');
        self.result = write!(self.buf, "{value:?}");
    }
}

/// A log writer that keeps what it is given: for tests of what the log says.
#[cfg(test)]
#[derive(Clone, Default)]
pub(crate) struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

#[cfg(test)]
impl Captured {
    /// Everything written so far.
    pub(crate) fn text(&self) -> String {
        let bytes = self.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

#[cfg(test)]
impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer \x1b[31mfailure")]
    struct Outer(#[source] std::io::Error);

    /// Everything the log may be given: spans with fields recorded late, messages with escapes,
    /// errors with and without sources, `r#` and `log.` names, every value kind.
    fn events() {
        let span = tracing::info_span!(
            "request",
            request_id = %"0123456789abcdef",
            method = %"GET",
            path = %"/api/v1/files/a b/ü\"x",
            late = tracing::field::Empty
        );
        let _in = span.enter();
        span.record("late", 7);
        tracing::info!("plain message");
        tracing::info!(status = 500u16, latency_ms = 3u64, ok = false, ratio = 0.5, "response failed");
        tracing::warn!(error = %"disk full", path = ?"/x\ty", "cannot write: \x1b[2J{}", "escaped");
        let e = Outer(std::io::Error::other("inner \x1b[1mcause"));
        tracing::error!(error = &e as &(dyn std::error::Error + 'static), "with sources");
        let plain = std::io::Error::other("no source");
        tracing::error!(error = &plain as &(dyn std::error::Error + 'static));
        tracing::info!(r#type = "file", s = "quoted \"str\"", i = -1i64, u = 2u128, "names");
        tracing::info!(log.target = "x", log.line = 3u32, after = 1, "log fields");
        tracing::info!(message = "", after = 1);
        tracing::info!(empty = "", "");
        let nested = tracing::debug_span!("inner", id = 9, name = "n");
        nested.in_scope(|| tracing::info!(x = 1, "nested"));
    }

    fn logged(with_ours: bool, ansi: bool) -> String {
        let out = Captured::default();
        let builder = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .without_time()
            .with_ansi(ansi)
            .with_writer(out.clone());
        if with_ours {
            tracing::subscriber::with_default(builder.fmt_fields(Fields).finish(), events);
        } else {
            tracing::subscriber::with_default(builder.finish(), events);
        }
        out.text()
    }

    #[test]
    fn lines_are_those_of_the_default_fields() {
        for ansi in [false, true] {
            let ours = logged(true, ansi);
            let theirs = logged(false, ansi);
            assert!(theirs.contains("0123456789abcdef") && theirs.contains("with sources"), "{theirs}");
            assert!(theirs.lines().count() >= 9, "{theirs}");
            assert_eq!(ours, theirs, "ansi: {ansi}");
        }
    }
}
