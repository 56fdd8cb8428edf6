//! The text log line's fields and timestamp, written as tracing-subscriber's default format
//! writes them without colours, at less cost per line.
//!
//! The webhook logs a line per decided request. Under load (`perf` under wrk, beside
//! a bare axum + rustls echo; bench/webhook/FINDINGS.md) the default format spent a third
//! of that line in wrappers that only matter on a terminal: each field's name and `=` went
//! through an empty colour style's `Display`, and the timestamp through nine padded integer
//! formats. [`PlainFields`] writes `name=value` directly and [`Rfc3339Micros`] writes the
//! timestamp through humantime; both produce the same bytes as the defaults (tested below),
//! so nothing that reads the logs can tell. On a terminal the default, coloured fields stay.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing_subscriber::field::{MakeVisitor, VisitFmt, VisitOutput};
use tracing_subscriber::fmt::format::{DefaultVisitor, Writer};
use tracing_subscriber::fmt::time::FormatTime;

/// tracing-subscriber's `DefaultFields` without colours: `key=value` pairs, `value` as its
/// `Debug`, the message first and unprefixed.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PlainFields;

impl<'a> MakeVisitor<Writer<'a>> for PlainFields {
    type Visitor = PlainVisitor<'a>;

    fn make_visitor(&self, target: Writer<'a>) -> PlainVisitor<'a> {
        PlainVisitor {
            writer: target,
            is_empty: true,
            result: Ok(()),
        }
    }
}

/// Writes one event's or span's fields for [`PlainFields`].
pub(crate) struct PlainVisitor<'a> {
    writer: Writer<'a>,
    is_empty: bool,
    result: fmt::Result,
}

impl PlainVisitor<'_> {
    /// Whether `name` is an ordinary field, written here; the message, raw identifiers
    /// (`r#type`) and `log.` metadata are written by the default visitor.
    fn is_plain(name: &str) -> bool {
        name != "message" && !name.starts_with("r#") && !name.starts_with("log.")
    }

    /// Writes `name=value`, a space before it unless it is the line's first field.
    fn write_pair(&mut self, name: &str, value: &dyn fmt::Debug) {
        let pad = if self.is_empty { "" } else { " " };
        self.is_empty = false;
        self.result = write!(self.writer, "{pad}{name}={value:?}");
    }

    /// Hands the field `name` to tracing-subscriber's own visitor, writing into the same line.
    fn by_default(&mut self, name: &str, record: impl FnOnce(&mut DefaultVisitor<'_>)) {
        let mut visitor = DefaultVisitor::new(self.writer.by_ref(), self.is_empty);
        record(&mut visitor);
        self.result = visitor.finish();
        // It writes (and pads before) every field but `log.` metadata, which it skips.
        self.is_empty = self.is_empty && name.starts_with("log.");
    }
}

impl Visit for PlainVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if self.result.is_err() {
            return;
        }
        if Self::is_plain(field.name()) {
            self.write_pair(field.name(), &value);
        } else {
            self.by_default(field.name(), |v| v.record_str(field, value));
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        if self.result.is_err() {
            return;
        }
        self.by_default(field.name(), |v| v.record_error(field, value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.result.is_err() {
            return;
        }
        if Self::is_plain(field.name()) {
            self.write_pair(field.name(), value);
        } else {
            self.by_default(field.name(), |v| v.record_debug(field, value));
        }
    }
}

impl VisitOutput<fmt::Result> for PlainVisitor<'_> {
    fn finish(self) -> fmt::Result {
        self.result
    }
}

impl VisitFmt for PlainVisitor<'_> {
    fn writer(&mut self) -> &mut dyn fmt::Write {
        &mut self.writer
    }
}

/// The timestamp tracing-subscriber's `SystemTime` writes (`2026-12-01T22:58:33.583130Z`,
/// UTC, microseconds), through humantime's formatter.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Rfc3339Micros;

/// The first second humantime cannot write (year 10000).
const YEAR_10000: u64 = 253_402_300_800;

impl FormatTime for Rfc3339Micros {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        let now = SystemTime::now();
        match now.duration_since(UNIX_EPOCH) {
            Ok(since) if since.as_secs() < YEAR_10000 => {
                write!(w, "{}", humantime::format_rfc3339_micros(now))
            }
            // A clock before 1970 or past 9999: the default's own wording of it.
            _ => tracing_subscriber::fmt::time::SystemTime.format_time(w),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A writer keeping what the subscriber writes.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Sink {
        type Writer = Sink;
        fn make_writer(&'a self) -> Sink {
            self.clone()
        }
    }

    /// An error with a source, its message carrying an escape.
    #[derive(Debug)]
    struct Outer(std::io::Error);

    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("outer \u{1b}[31mfailure")
        }
    }

    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    /// Every kind of field the commands log, and the hazards a value can carry.
    fn events() {
        tracing::info!("plain message");
        tracing::info!(
            uid = "0b7a1c3e",
            namespace = "ml",
            name = %"vllm-restore-0",
            verdict = "warned",
            dry_run = false,
            count = 3_u64,
            delta = -2_i64,
            ratio = 0.5_f64,
            "restore admitted"
        );
        tracing::warn!(
            quoted = "a \"b\" \\ c\n\t\u{0}\u{7f}\u{1b}[2J é \u{200b}",
            shown = %"raw \u{1b}[2J text",
            debugged = ?vec!["x", "y"],
            "message with \u{1b}[31m escape and {} arguments",
            2
        );
        tracing::info!(r#type = "raw identifier", message_like = "m", "spans none");
        let error = Outer(std::io::Error::other("inner \u{1b}] cause"));
        tracing::error!(error = &error as &(dyn std::error::Error + 'static), "failed");
        tracing::info!(only = 1);
        tracing::info!(first = "no message", second = true);
        let span = tracing::info_span!("reload", path = "/etc/miggate", round = 2);
        span.in_scope(|| tracing::info!(inside = "span", "in a span"));
        tracing::info!(empty = "", "");
    }

    fn written(plain: bool) -> String {
        let sink = Sink::default();
        let builder = tracing_subscriber::fmt()
            .with_writer(sink.clone())
            .with_ansi(false)
            .without_time();
        if plain {
            tracing::subscriber::with_default(builder.fmt_fields(PlainFields).finish(), events);
        } else {
            tracing::subscriber::with_default(builder.finish(), events);
        }
        String::from_utf8(sink.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn plain_fields_write_what_the_default_fields_write() {
        let default = written(false);
        assert_eq!(default.lines().count(), 9, "{default}");
        assert_eq!(written(true), default);
    }

    /// The default timer's format (`2026-12-01T22:58:33.583130Z`), read back to the instant.
    #[test]
    fn the_timestamp_has_the_default_format_and_reads_back_as_now() {
        let before = SystemTime::now();
        let mut line = String::new();
        Rfc3339Micros.format_time(&mut Writer::new(&mut line)).unwrap();
        let after = SystemTime::now();
        let shape: String = line
            .chars()
            .map(|c| if c.is_ascii_digit() { '9' } else { c })
            .collect();
        assert_eq!(shape, "9999-99-99T99:99:99.999999Z", "{line}");
        let read = humantime::parse_rfc3339(&line).unwrap();
        let micro = std::time::Duration::from_micros(1);
        assert!(read + micro >= before && read <= after, "{line}");
    }

    #[test]
    fn humantime_writes_known_instants_as_the_default_does() {
        for (secs, micros, want) in [
            (0, 0, "1970-01-01T00:00:00.000000Z"),
            (951_782_400, 1, "2000-02-29T00:00:00.000001Z"),
            (1_796_165_913, 583_130, "2026-12-01T22:58:33.583130Z"),
            (YEAR_10000 - 1, 999_999, "9999-12-31T23:59:59.999999Z"),
        ] {
            let at = UNIX_EPOCH + std::time::Duration::new(secs, micros * 1000 + 999);
            assert_eq!(humantime::format_rfc3339_micros(at).to_string(), want);
        }
    }
}
