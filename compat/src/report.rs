//! Outcomes, per-check results and the report, in the shape scripts and the webhook rely on.

use serde::Serialize;

use crate::checks::{CheckName, Mode};

/// What one check concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The target matches.
    Pass,
    /// The target does not match; the restore is refused.
    Refuse,
    /// A fact is missing on either side; admits unless strict.
    Unknown,
    /// The check's inputs do not exist for this kind of target; never refuses.
    NotApplicable,
    /// Waived by the caller.
    Skipped,
}

impl Outcome {
    /// The name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Refuse => "refuse",
            Outcome::Unknown => "unknown",
            Outcome::NotApplicable => "not-applicable",
            Outcome::Skipped => "skipped",
        }
    }
}

/// One row of a report: a check, its outcome and both values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    /// The check's stable name.
    pub check: CheckName,
    /// What it concluded.
    pub outcome: Outcome,
    /// The source's value as compared (`unknown` when absent).
    pub source: String,
    /// The target's value as compared (`unknown` when absent).
    pub target: String,
    /// Why, in a sentence.
    pub message: String,
    /// The (source, target) pairs a refusal names in the reason; one per missing mount, say.
    #[serde(skip)]
    pub mismatches: Vec<(String, String)>,
}

/// The comparison of a source manifest with a target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
pub fn or_unknown(value: Option<&str>) -> String {
    match value.map(str::trim) {
        Some(v) if !v.is_empty() => v.to_string(),
        _ => "unknown".to_string(),
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
        CheckResult {
            check,
            outcome: Outcome::Refuse,
            source: s.into(),
            target: t.into(),
            message: String::new(),
            mismatches: vec![],
        }
    }

    #[test]
    fn reasons_follow_the_peer_protocol() {
        assert_eq!(
            reason(&[refuse(CheckName::MemoryLimit, "32Gi", "1Gi")]),
            "memory-limit: source 32Gi, target 1Gi"
        );
        assert_eq!(
            reason(&[
                refuse(CheckName::CpuArch, "amd64", "arm64"),
                refuse(CheckName::MemoryLimit, "32Gi", "1Gi")
            ]),
            "cpu-arch: source amd64, target arm64; memory-limit: source 32Gi, target 1Gi"
        );
        assert_eq!(
            reason(&[refuse(CheckName::KernelVersion, "", "  ")]),
            "kernel-version: source unknown, target unknown"
        );
        assert_eq!(reason(&[]), "");
    }
}
