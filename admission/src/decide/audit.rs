//! The audit annotations of a restore's decision: what the API server's audit log keeps of it,
//! under the webhook's name (`<webhook>/<key>`), so a refusal questioned later can be read back
//! from the log without the webhook's own logs. Every decision on a restore carries
//! [`VERDICT`]; the rest are written when they apply. Each value is escaped and cut to
//! [`MAX_AUDIT_VALUE_BYTES`]: the names in them come from tenants' objects.

use std::collections::{BTreeSet, HashMap};

use miggate_compat::escape::escape_within;

use super::warnings::Warning;
use super::{RestoreRequest, Verdict};
use crate::refusal::RefusedBy;
use crate::resolve::Kind;

/// `allowed`, `warned` or `refused`.
pub const VERDICT: &str = "verdict";
/// The checks that refused, or the reason the restore was refused before any check
/// (`checkpoint-not-found`, …), comma-separated.
pub const REFUSED_BY: &str = "refused-by";
/// The checks whose outcome is unknown (`image-digest` when the pod pins no digest the
/// checkpoint's matches), `pod: container-unknown` when no pod check could run, or `all: <why>`
/// when none ran (`caches-not-synced`, …), comma-separated.
pub const NOT_RUN: &str = "not-run";
/// The checks a waiver skipped, comma-separated; `all` for the Go peer's skip annotation.
pub const WAIVED: &str = "waived";
/// The checkpoint: `GpuCheckpoint <namespace>/<name>` or `PodSnapshot <namespace>/<name>`.
pub const CHECKPOINT: &str = "checkpoint";
/// The node the pod names or is being bound to.
pub const NODE: &str = "node";

/// Each value is cut to this many bytes, escaped: an audit event stays small whatever the
/// tenant's names.
pub const MAX_AUDIT_VALUE_BYTES: usize = 512;

/// What a restore's decision names, read from its request before it is judged.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Subject {
    /// [`CHECKPOINT`]'s value, unescaped.
    pub checkpoint: Option<String>,
    /// [`NODE`]'s value, unescaped.
    pub node: Option<String>,
}

impl Subject {
    /// The checkpoint and node a request names.
    pub fn of(restore: &RestoreRequest<'_>) -> Self {
        let kind = match restore.reference.kind {
            Kind::GpuCheckpoint => "GpuCheckpoint",
            Kind::PodSnapshot => "PodSnapshot",
        };
        Subject {
            checkpoint: Some(format!("{kind} {}/{}", restore.namespace, restore.reference.name)),
            node: restore.node.as_deref().map(str::to_string),
        }
    }
}

/// Why no check ran, as [`NOT_RUN`] says it after `all:`.
fn none_ran(warning: &Warning) -> Option<&'static str> {
    Some(match warning {
        Warning::BindingNotSynced => "caches-not-synced",
        Warning::BindingStale(_) => "caches-stale",
        Warning::BindingNoNode { .. } => "no-node",
        Warning::BindingNoInventory { .. } => "no-inventory",
        Warning::RestoreUnchecked { .. } => "checkpoint-unreadable",
        _ => return None,
    })
}

/// Writes the decision's audit annotations into `out`.
pub(super) fn annotate(
    out: &mut HashMap<String, String>,
    verdict: Verdict,
    refused_by: &[RefusedBy],
    warnings: &[Warning],
    subject: &Subject,
) {
    let mut put = |key: &str, value: &str| {
        out.insert(
            key.to_string(),
            escape_within(value, MAX_AUDIT_VALUE_BYTES).into_owned(),
        );
    };
    put(VERDICT, verdict.as_str());
    if !refused_by.is_empty() {
        put(REFUSED_BY, &joined(refused_by.iter().map(|r| r.as_str())));
    }
    let mut not_run = Vec::new();
    let mut waived = Vec::new();
    for warning in warnings {
        if let Some(why) = none_ran(warning) {
            not_run.push(format!("all: {why}"));
        }
        match warning {
            Warning::Unknown(result) => not_run.push(result.check.as_str().to_string()),
            Warning::ExactCheckNotRun(_) => not_run.push("exact-on-allocated".to_string()),
            // The node agent compares the runtime's image id; the pod's facts are its too.
            Warning::ImageUnpinned | Warning::DigestsDiffer { .. } => {
                not_run.push(miggate_compat::CheckName::IMAGE_DIGEST.as_str().to_string());
            }
            Warning::ContainerUnknown { .. } => not_run.push("pod: container-unknown".to_string()),
            Warning::Waived { checks } => waived.extend(checks.iter().map(|c| c.as_str().to_string())),
            Warning::AllWaivedByPeer { .. } => waived.push("all".to_string()),
            _ => {}
        }
    }
    if !not_run.is_empty() {
        put(NOT_RUN, &joined(not_run.iter().map(String::as_str)));
    }
    if !waived.is_empty() {
        put(WAIVED, &joined(waived.iter().map(String::as_str)));
    }
    if let Some(checkpoint) = &subject.checkpoint {
        put(CHECKPOINT, checkpoint);
    }
    if let Some(node) = &subject.node {
        put(NODE, node);
    }
}

/// Items joined by `, `, each once, in first-seen order.
fn joined<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let mut out = String::new();
    let mut seen = BTreeSet::new();
    for item in items {
        if !seen.insert(item) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(", ");
        }
        out.push_str(item);
    }
    out
}
