//! Quoting outside text in a warning.

/// Outside text as a warning quotes it: in backticks, with terminal controls neutralised and cut
/// to 4 KiB (see [`miggate_compat::escape::escape`]).
pub(crate) fn quote(text: &str) -> String {
    format!("`{}`", miggate_compat::escape::escape(text))
}
