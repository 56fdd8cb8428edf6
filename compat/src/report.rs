//! Outcomes, per-check results and the report, in the shape scripts and the webhook rely on.

use std::borrow::Cow;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::vocab::{CheckName, Mode, Outcome};

/// A report value: static text where the value is fixed (`none`, `unknown`), built only where
/// it is not.
pub type Text = Cow<'static, str>;

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
    /// The comparison mode.
    pub mode: Mode,
    /// One row per check, in the stable report order.
    pub results: Vec<CheckResult>,
    /// The refusals in the peer's protocol: `<check>: source <s>, target <t>` joined by `; `.
    pub reason: String,
    /// cuda-checkpoint's `src=dst,…` device map when compatible (empty when all identity);
    /// `None` on a refusal or when the devices cannot be paired.
    pub device_map: Option<String>,
    /// What was read or paired less than cleanly.
    pub warnings: Vec<String>,
}

impl Report {
    /// The rows that refused.
    pub fn refusals(&self) -> impl Iterator<Item = &CheckResult> {
        self.results.iter().filter(|r| r.outcome == Outcome::Refuse)
    }

    /// The row of one check.
    pub fn result(&self, check: CheckName) -> Option<&CheckResult> {
        self.results.iter().find(|r| r.check == check)
    }
}

/// A value for a report: blank or absent becomes `unknown`, as the peer's protocol says.
pub fn or_unknown(value: Option<&str>) -> Text {
    match value.map(str::trim) {
        Some(v) if !v.is_empty() => Cow::Owned(v.to_string()),
        _ => Cow::Borrowed("unknown"),
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
