//! Text from manifests and nvidia-smi shown on a terminal: kept for the capture tree, and only a
//! name for compat's one escaping function, so the CLI has no rule of its own.

use std::borrow::Cow;

/// `s` as [`miggate_compat::escape::escape`] quotes it: control and bidi characters written as
/// escapes (`\u{1b}`, `\u{202e}`, `\n`), cut to a bound; `s` itself when there is nothing to do.
pub fn printable(s: &str) -> Cow<'_, str> {
    miggate_compat::escape::escape(s)
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_and_bidi_characters_are_escaped() {
        assert_eq!(printable("NVIDIA H100 80GB HBM3"), "NVIDIA H100 80GB HBM3");
        assert_eq!(printable("H100\u{1b}[2J"), "H100\\u{1b}[2J");
        assert_eq!(printable("a\nb\r"), "a\\nb\\r");
        assert_eq!(printable("H100\u{202e}3MBH"), "H100\\u{202e}3MBH");
    }
}
