//! `miggate`: decides whether a GPU checkpoint can be restored on a target.
//!
//! Thin on purpose: flags are parsed here and the work happens in the library crates.

mod capture;
mod check;
mod claim;
mod cli;
mod cluster_read;
mod convert;
mod crds;
mod deploy;
mod doctor;
mod duration;
mod flags;
mod input;
mod log_format;
mod log_writer;
mod place;
mod printable;
mod publish;
mod recover;
mod service;
mod table;
mod tree;
mod webhook;

/// jemalloc, not glibc's malloc: the webhook allocates and frees small buffers on two worker
/// threads per request, where glibc's frees and arena consolidation cost about a tenth of the
/// CPU. Measured side by side with a bare axum + rustls echo under wrk: +7% requests/s, and
/// less memory held by 2,000 stalled bodies (95 MiB, glibc 103 MiB; cli/tests/webhook_hostile.rs).
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::io::Write;
use std::process::ExitCode;

use clap::builder::styling::Styles;
use clap::{CommandFactory, FromArgMatches};
use miggate_compat::escape::{MAX_QUOTED_BYTES, escape_within};

/// The most one line of an error message may take. Each quoted path or value is already cut to
/// its own bound; this is the guard for text that reached a message unquoted.
const MAX_ERROR_LINE_BYTES: usize = 4 * MAX_QUOTED_BYTES;

/// The name kubectl finds a plugin by: `kubectl miggate …` runs `kubectl-miggate …`.
const PLUGIN_NAME: &str = "kubectl-miggate";

/// The command line's definition, named as it was invoked: `kubectl miggate` when run as the
/// kubectl plugin, so usage and help show what the user typed.
fn command() -> clap::Command {
    let invoked = std::env::args_os().next().map(std::path::PathBuf::from);
    let as_plugin = invoked
        .as_deref()
        .and_then(std::path::Path::file_name)
        .is_some_and(|name| name == PLUGIN_NAME);
    let command = cli::Cli::command();
    if as_plugin {
        command
            .bin_name("kubectl miggate")
            .display_name("kubectl miggate")
    } else {
        command
    }
}

fn main() -> ExitCode {
    let args = match command()
        .try_get_matches()
        .and_then(|m| cli::Cli::from_arg_matches(&m))
    {
        Ok(args) => args,
        Err(err) => return usage_error(&err),
    };
    match cli::run(args) {
        Ok(code) => code,
        Err(err) => {
            // `eprintln!` would panic on a stderr nobody reads any more; there is nowhere left
            // to say so, and the exit status still carries the failure.
            let _ = writeln!(
                std::io::stderr(),
                "miggate: {}",
                escape_lines(&said_once(&err), MAX_ERROR_LINE_BYTES)
            );
            ExitCode::from(2)
        }
    }
}

/// The error and its causes joined by `: ` as `{:#}` joins them, each cause said once: a
/// library error that shows its source in its own message and also returns it as its
/// `source()` (`cannot read x: No such file or directory`, then `No such file or directory`)
/// would otherwise be said twice.
fn said_once(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// `text` with each line escaped and bounded, the line breaks kept: the last guard for outside
/// text (a file name, a flag value, a manifest value inside a parser's message) in an error.
fn escape_lines(text: &str, max_line_bytes: usize) -> String {
    text.split('\n')
        .map(|line| escape_within(line, max_line_bytes))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Prints a clap error (or help, or the version) and gives its exit status: 2 for usage errors.
/// clap quotes what was typed as is (`unexpected argument '…'`), so a message holding a control
/// or bidi character, or a line past the bound, is printed escaped and without colour.
fn usage_error(err: &clap::Error) -> ExitCode {
    let code = u8::try_from(err.exit_code()).map_or(ExitCode::from(2), ExitCode::from);
    // The message as typed, without clap's styling: rendering `err` without colour would strip
    // escape sequences clap did not write along with those it did, hiding what was typed. The
    // same arguments parsed again with plain styles give the same error with no codes of clap's.
    let raw = match command().styles(Styles::plain()).try_get_matches() {
        Err(plain) => plain.render().ansi().to_string(),
        Ok(_) => err.render().to_string(),
    };
    // clap's lines each quote what was typed about once: one quotation's bound each.
    let escaped = escape_lines(&raw, MAX_QUOTED_BYTES);
    if escaped == raw {
        // Nothing to neutralise: clap prints it, in colour where the terminal takes it. A
        // failed write (a closed pipe after `--help | head`) leaves nothing more to say.
        let _ = err.print();
    } else {
        let _ = write!(std::io::stderr(), "{escaped}");
    }
    code
}

#[cfg(test)]
mod tests {
    use super::{escape_lines, said_once};

    #[test]
    fn a_cause_already_in_the_message_is_not_said_again() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory");
        /// A library error as thiserror writes one with a field named `source`: the cause in
        /// its message, and again as its `source()`.
        #[derive(Debug)]
        struct Read(std::io::Error);
        impl std::fmt::Display for Read {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "cannot read nope.yaml: {}", self.0)
            }
        }
        impl std::error::Error for Read {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let err = anyhow::Error::new(Read(io)).context("webhook store");
        assert_eq!(
            said_once(&err),
            "webhook store: cannot read nope.yaml: No such file or directory"
        );
        let plain = anyhow::anyhow!("root cause").context("outer");
        assert_eq!(said_once(&plain), "outer: root cause");
    }

    #[test]
    fn lines_are_escaped_and_line_breaks_kept() {
        assert_eq!(
            escape_lines("a\u{1b}[2J\nb\u{202e}c\n", 100),
            "a\\u{1b}[2J\nb\\u{202e}c\n"
        );
        let long = "x".repeat(1 << 20);
        assert!(escape_lines(&long, 1000).len() < 1040);
    }
}
