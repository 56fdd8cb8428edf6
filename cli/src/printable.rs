//! Text from manifests and nvidia-smi shown on a terminal with its control characters escaped:
//! a crafted product name must not be able to drive an operator's terminal.

use std::borrow::Cow;

/// `s` with every control character (escape sequences, newlines, carriage returns) written as
/// a Rust escape, or `s` itself when it has none.
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("NVIDIA H100 80GB HBM3"), "NVIDIA H100 80GB HBM3");
        assert_eq!(printable("H100\u{1b}[2J"), "H100\\u{1b}[2J");
        assert_eq!(printable("a\nb\r"), "a\\nb\\r");
    }
}
