//! The one way outside text (nvidia-smi output, file paths, flag values, manifest values) is
//! quoted in a message: control characters neutralised and the length bounded.
//!
//! A crafted product name or a hostile `nvidia-smi` must not be able to drive the terminal of
//! the operator reading an error (OSC title sets, clear-screen, BEL), reorder what they read
//! (bidi overrides such as U+202E), or flood a log with megabytes of one message.

use std::borrow::Cow;
use std::fmt::Write as _;

/// How many bytes of escaped text one quotation keeps; the rest is cut, and the cut is said.
pub const MAX_QUOTED_BYTES: usize = 4096;

/// Whether a character must not reach a terminal as is: C0 and C1 controls, DEL, and the
/// Unicode bidirectional controls that reorder how a line reads.
pub fn is_hazard(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// Whether `text` has no hazard. Printable ASCII, which nearly every name and message is, is
/// told byte by byte; characters are decoded only from the first other byte on (a control, or
/// the first byte of a multi-byte character, since every byte before it is ASCII).
fn is_plain(text: &str) -> bool {
    match text.bytes().position(|b| !(b' '..=b'~').contains(&b)) {
        None => true,
        Some(at) => text.get(at..).is_some_and(|rest| !rest.chars().any(is_hazard)),
    }
}

/// `text` with every hazard written as an escape (`\n`, `\t`, `\u{1b}`, `\u{202e}`) and cut to
/// [`MAX_QUOTED_BYTES`], ending in `… [N more bytes cut]` when it was cut. Borrowed when there
/// is nothing to change, which is the common case.
pub fn escape(text: &str) -> Cow<'_, str> {
    escape_within(text, MAX_QUOTED_BYTES)
}

/// [`escape`] with another bound, for callers that quote many texts in one message.
pub fn escape_within(text: &str, max_bytes: usize) -> Cow<'_, str> {
    if text.len() <= max_bytes && is_plain(text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len().min(max_bytes) + 32);
    for (at, c) in text.char_indices() {
        let before = out.len();
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_hazard(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
        if out.len() > max_bytes {
            out.truncate(before);
            let _ = write!(out, "… [{} more bytes cut]", text.len() - at);
            break;
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3")]
    #[case("a\nb\r\tc", "a\\nb\\r\\tc")]
    #[case("\u{1b}]0;owned\u{7}", "\\u{1b}]0;owned\\u{7}")]
    #[case("\u{1b}[2J", "\\u{1b}[2J")]
    #[case("x\u{7f}\u{85}\u{9b}", "x\\u{7f}\\u{85}\\u{9b}")]
    #[case("evil\u{202e}gpj.exe", "evil\\u{202e}gpj.exe")]
    #[case("\u{2066}\u{2069}\u{200f}\u{61c}", "\\u{2066}\\u{2069}\\u{200f}\\u{61c}")]
    #[case("nul\0", "nul\\u{0}")]
    #[case("ümlaut 日本", "ümlaut 日本")]
    #[case("plain ü\u{1b}[2J", "plain ü\\u{1b}[2J")]
    #[case("ab 日本 evil\u{202e}", "ab 日本 evil\\u{202e}")]
    #[case("ü then \n", "ü then \\n")]
    fn hazards_are_escaped(#[case] text: &str, #[case] want: &str) {
        assert_eq!(escape(text), want);
    }

    #[test]
    fn clean_text_is_borrowed() {
        assert!(matches!(escape("GPU-1"), Cow::Borrowed(_)));
    }

    #[test]
    fn long_text_is_cut_and_says_so() {
        let text = "é".repeat(10_000);
        let out = escape(&text);
        assert!(out.len() < MAX_QUOTED_BYTES + 40, "{}", out.len());
        assert!(
            out.ends_with("… [15904 more bytes cut]"),
            "{}",
            &out[out.len() - 40..]
        );
        // A cut never splits an escape: the kept part ends on a whole character.
        let escapes = "\u{1b}".repeat(5000);
        let out = escape(&escapes);
        let kept = out.split('…').next().unwrap_or_default();
        assert!(kept.ends_with("\\u{1b}"), "{kept:?}");
    }

    /// The ASCII fast path keeps exactly the printable range: DEL and every control are
    /// escaped, alone or beside plain text.
    #[test]
    fn every_ascii_byte_is_kept_or_escaped_as_the_char_rule_says() {
        for b in 0u8..=0x7f {
            let c = char::from(b);
            let alone = c.to_string();
            let beside = format!("plain {c} text");
            let printable = (0x20..0x7f).contains(&b);
            assert_eq!(printable, !is_hazard(c), "byte {b:#x}");
            assert_eq!(
                matches!(escape(&alone), Cow::Borrowed(_)),
                printable,
                "byte {b:#x} alone"
            );
            assert_eq!(
                matches!(escape(&beside), Cow::Borrowed(_)),
                printable,
                "byte {b:#x} in text"
            );
        }
    }

    #[test]
    fn a_bound_of_zero_keeps_only_the_note() {
        assert_eq!(escape_within("abc", 0), "… [3 more bytes cut]");
    }
}
