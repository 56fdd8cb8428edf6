//! Outcomes, per-check results and the report, in the shape scripts and the webhook rely on.

use std::borrow::{Borrow, Cow};
use std::fmt;
use std::ops::Deref;

use compact_str::CompactString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::vocab::{CheckName, Mode, Outcome};
use crate::warning::Warning;

/// A report's value or message.
///
/// A report is built on every admission request, and most of its texts are either fixed (a
/// message, `none`, `unknown`) or short (`amd64`, `580.82.07`, `64`): fixed texts are kept by
/// reference and short ones inline, so neither allocates. Converting from `&'static str` keeps
/// the reference; [`Text::copied`] copies a borrowed text, inline when it is short.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Text(CompactString);

impl Text {
    /// A fixed text, kept by reference.
    pub const fn fixed(text: &'static str) -> Self {
        Text(CompactString::const_new(text))
    }

    /// A copy of `text`: inline (no allocation) up to 24 bytes.
    pub fn copied(text: &str) -> Self {
        Text(CompactString::new(text))
    }

    /// A count, inline.
    pub fn number(n: usize) -> Self {
        Text(compact_str::ToCompactString::to_compact_string(&n))
    }

    /// Text written by the crate's renderers straight into inline-or-heap storage.
    pub(crate) fn from_compact(text: CompactString) -> Self {
        Text(text)
    }

    /// The text, whether it is kept by reference, inline or on the heap.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The text as a `String`.
    pub fn into_string(self) -> String {
        self.0.into_string()
    }
}

impl Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Text {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl From<&'static str> for Text {
    fn from(text: &'static str) -> Self {
        Text::fixed(text)
    }
}

impl From<String> for Text {
    fn from(text: String) -> Self {
        Text(CompactString::from(text))
    }
}

impl From<Cow<'static, str>> for Text {
    fn from(text: Cow<'static, str>) -> Self {
        match text {
            Cow::Borrowed(s) => Text::fixed(s),
            Cow::Owned(s) => Text::from(s),
        }
    }
}

impl From<Text> for String {
    fn from(text: Text) -> Self {
        text.into_string()
    }
}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<Text> for &str {
    fn eq(&self, other: &Text) -> bool {
        *self == other.as_str()
    }
}

impl JsonSchema for Text {
    fn schema_name() -> Cow<'static, str> {
        String::schema_name()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        String::json_schema(generator)
    }
}

/// One row of a report: a check, its outcome and both values. Checks build it as they
/// conclude; policy (strict, skip, scope) then adjusts outcome and message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CheckResult {
    /// The check's stable name.
    pub check: CheckName,
    /// What it concluded.
    pub outcome: Outcome,
    /// The source's value as compared (`unknown` when absent).
    pub source: Text,
    /// The target's value as compared (`unknown` when absent).
    pub target: Text,
    /// Why, in a sentence.
    pub message: Text,
    /// The (source, target) pairs a refusal names in the reason; one per missing mount, say.
    /// Not part of the JSON shape: the reason carries them.
    #[serde(skip)]
    #[schemars(skip)]
    pub mismatches: Vec<(String, String)>,
}

impl CheckResult {
    /// A row of `check` with no mismatches beyond its two values.
    pub fn new(
        check: CheckName,
        outcome: Outcome,
        source: impl Into<Text>,
        target: impl Into<Text>,
        message: impl Into<Text>,
    ) -> Self {
        CheckResult {
            check,
            outcome,
            source: source.into(),
            target: target.into(),
            message: message.into(),
            mismatches: Vec::new(),
        }
    }
}

/// The comparison of a source manifest with a target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The version of this JSON shape.
    pub schema_version: u32,
    /// Whether no check refused.
    pub compatible: bool,
    /// How the target was read (a restore container's devices, or a node's whole inventory):
    /// the same two manifests can pass in one mode and refuse in the other.
    pub mode: Mode,
    /// One row per check, in the stable report order.
    pub results: Vec<CheckResult>,
    /// The refusals in the peer's protocol: `<check>: source <s>, target <t>` joined by `; `.
    pub reason: String,
    /// cuda-checkpoint's `src=dst,…` device map when compatible (empty when all identity);
    /// `None` on a refusal or when the devices cannot be paired.
    pub device_map: Option<String>,
    // Each written as its words (a `Serialize` of `Warning`'s own); read back as words.
    /// What was read or paired less than cleanly.
    pub warnings: Vec<Warning>,
}

impl Report {
    /// The rows that refused, in report order: the first is the one `miggate where` names.
    pub fn refusals(&self) -> impl Iterator<Item = &CheckResult> {
        self.results.iter().filter(|r| r.outcome == Outcome::Refuse)
    }

    /// The row of one check: every evaluation writes one per check, so `None` only for a
    /// report made otherwise (built, or read from JSON).
    pub fn result(&self, check: CheckName) -> Option<&CheckResult> {
        self.results.iter().find(|r| r.check == check)
    }

    /// Whether the report is compatible only because nothing was compared: no check passed or
    /// refused, and some were not applicable or unknown (a pod's scope asked of a node
    /// inventory, two manifests with no facts in common). Checks waived with a skip are the
    /// caller's choice and do not count either way.
    pub fn compared_nothing(&self) -> bool {
        self.compatible
            && !self
                .results
                .iter()
                .any(|r| matches!(r.outcome, Outcome::Pass | Outcome::Refuse))
            && self
                .results
                .iter()
                .any(|r| matches!(r.outcome, Outcome::Unknown | Outcome::NotApplicable))
    }
}

/// A value for a report: blank or absent becomes `unknown`, as the peer's protocol says.
pub fn or_unknown(value: Option<&str>) -> Text {
    match value.map(str::trim) {
        Some(v) if !v.is_empty() => Text::copied(v),
        _ => Text::fixed("unknown"),
    }
}

/// The reason string: every refusal's mismatches, in report order.
pub fn reason(results: &[CheckResult]) -> String {
    let mut parts = Vec::new();
    for r in results.iter().filter(|r| r.outcome == Outcome::Refuse) {
        if r.mismatches.is_empty() {
            parts.push(segment(r.check, &r.source, &r.target));
        } else {
            for (s, t) in &r.mismatches {
                parts.push(segment(r.check, s, t));
            }
        }
    }
    parts.join("; ")
}

fn segment(check: CheckName, source: &str, target: &str) -> String {
    format!(
        "{check}: source {}, target {}",
        or_unknown(Some(source)),
        or_unknown(Some(target))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refuse(check: CheckName, s: &str, t: &str) -> CheckResult {
        CheckResult::new(check, Outcome::Refuse, s.to_string(), t.to_string(), "")
    }

    fn report(outcomes: &[Outcome]) -> Report {
        let results: Vec<CheckResult> = outcomes
            .iter()
            .map(|&o| CheckResult::new(CheckName::CPU_ARCH, o, "", "", ""))
            .collect();
        Report {
            schema_version: 1,
            compatible: !outcomes.contains(&Outcome::Refuse),
            mode: Mode::Exact,
            reason: reason(&results),
            results,
            device_map: None,
            warnings: Vec::new(),
        }
    }

    #[rstest::rstest]
    #[case::all_not_applicable(&[Outcome::NotApplicable, Outcome::NotApplicable], true)]
    #[case::unknown_and_not_applicable(&[Outcome::Unknown, Outcome::NotApplicable, Outcome::Skipped], true)]
    #[case::one_pass(&[Outcome::Pass, Outcome::NotApplicable], false)]
    #[case::a_refusal(&[Outcome::Refuse, Outcome::NotApplicable], false)]
    #[case::all_skipped(&[Outcome::Skipped, Outcome::Skipped], false)]
    fn nothing_compared_is_told_apart(#[case] outcomes: &[Outcome], #[case] expected: bool) {
        assert_eq!(report(outcomes).compared_nothing(), expected);
    }

    #[test]
    fn reasons_follow_the_peer_protocol() {
        assert_eq!(
            reason(&[refuse(CheckName::MEMORY_LIMIT, "32Gi", "1Gi")]),
            "memory-limit: source 32Gi, target 1Gi"
        );
        assert_eq!(
            reason(&[
                refuse(CheckName::CPU_ARCH, "amd64", "arm64"),
                refuse(CheckName::MEMORY_LIMIT, "32Gi", "1Gi")
            ]),
            "cpu-arch: source amd64, target arm64; memory-limit: source 32Gi, target 1Gi"
        );
        assert_eq!(
            reason(&[refuse(CheckName::KERNEL_VERSION, "", "  ")]),
            "kernel-version: source unknown, target unknown"
        );
        assert_eq!(reason(&[]), "");
    }
}
