//! Line handling and quoting the parsers share.

use crate::error::Error;

/// The lines of `text`, numbered from 1, with a leading byte-order mark and any `\r` line ends
/// removed, so CRLF captures read like LF ones.
pub(crate) fn numbered_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim_end_matches('\r')))
}

/// Outside text as a warning quotes it: in backticks, with terminal controls neutralised and cut
/// to 4 KiB (see [`miggate_compat::escape::escape`]).
pub(crate) fn quote(text: &str) -> String {
    format!("`{}`", miggate_compat::escape::escape(text))
}

/// The first non-blank line (number and text), for an error that has to point somewhere.
pub(crate) fn first_non_blank(text: &str) -> Option<(usize, &str)> {
    numbered_lines(text).find(|(_, l)| !l.trim().is_empty())
}

/// The error for output with nothing of the expected shape in it.
pub(crate) fn nothing_parsed(command: &'static str, text: &str, expected: &str) -> Error {
    match first_non_blank(text) {
        Some((line, l)) => Error::Parse {
            command,
            line,
            message: format!("nothing in this output has the expected shape ({expected})"),
            text: l.to_string(),
        },
        None => Error::Parse {
            command,
            line: 1,
            message: format!("the output is empty (expected {expected})"),
            text: String::new(),
        },
    }
}

/// Parses a whole token as a non-negative integer (`07` is 7; `-1`, `+1`, `1a` are not numbers).
pub(crate) fn number(token: &str) -> Option<u32> {
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    token.parse().ok()
}
