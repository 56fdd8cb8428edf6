//! Every warning a decision writes, as one enum: the words live in [`Warning`]'s `Display`,
//! and the evaluations name what they saw. The text is what the API server passes to the
//! client (`kubectl` prints it), so it is held by the decision tests and snapshots; escaping
//! and the length bound are [`render`](super::render)'s.

use std::fmt;

use miggate_compat::escape::escape_within;
use miggate_compat::{CheckResult, Outcome, Report};
use miggate_wire::annotations::SKIP_CHECKS;
use miggate_wire::peer::SKIP_COMPAT_CHECK;

use crate::lookup::{Inventory, Source, Staleness};

use super::NO_INVENTORY;

/// One warning of a decision.
#[derive(Debug)]
pub(crate) enum Warning<'a> {
    /// The peer's skip annotation is not a Go boolean (already escaped and cut).
    PeerSkipUnreadable { value: &'a str },
    /// A binding arrived before the caches' first list.
    BindingNotSynced,
    /// A binding arrived while the caches are too far behind.
    BindingStale(Staleness),
    /// A restore pod's binding names no node (`pod` escaped).
    BindingNoNode { pod: &'a str },
    /// The checkpoint cannot be looked up here (a `PodSnapshot` whose content is not known).
    RestoreUnchecked { why: &'a str },
    /// `nvidia.com/snapshot-skip-compat-check` waives every check.
    AllWaivedByPeer { checkpoint: &'a str },
    /// The pod names its image by tag: the digest is the node agent's to compare.
    ImageUnpinned,
    /// The pod's pinned digest and the checkpoint's differ (both reduced to `sha256:…`).
    DigestsDiffer { pod: &'a str, checkpoint: &'a str },
    /// No restore container can be told: the checkpoint names none and `asking` containers
    /// ask for GPUs.
    ContainerUnknown { checkpoint: &'a str, asking: usize },
    /// A binding to a node no source describes; `unusable` when sources are present but
    /// cannot be read (each then follows as a [`Warning::Node`]).
    BindingNoInventory {
        node: &'a str,
        unusable: bool,
        pod: &'a str,
    },
    /// The checks the pod's `miggate.io/skip-checks` waived, comma-separated.
    Waived { checks: &'a str },
    /// A check whose outcome is unknown.
    Unknown(&'a CheckResult),
    /// A warning of the report itself.
    Report(&'a str),
    /// A note about a node: a source passed over, or what its inventory could not say.
    Node { node: &'a str, note: &'a str },
    /// A node's inventory from a source other than a `GpuNode`; `passed_over` when a better
    /// source is present but cannot be read.
    PartialInventory {
        node: &'a str,
        source: Source,
        passed_over: bool,
    },
    /// The last warning when the list was cut.
    MoreNotShown(usize),
}

impl fmt::Display for Warning<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let node = |n: &str| escape_within(n, 256).into_owned();
        match self {
            Warning::PeerSkipUnreadable { value } => write!(
                f,
                "miggate: annotation {SKIP_COMPAT_CHECK} \"{value}\" is not a boolean (Go's ParseBool): it waives nothing"
            ),
            Warning::BindingNotSynced => f.write_str(
                "miggate: binding not checked: the webhook's caches have not finished their first list",
            ),
            Warning::BindingStale(staleness) => write!(f, "miggate: binding not checked: {staleness}"),
            Warning::BindingNoNode { pod } => {
                write!(f, "miggate: binding of restore pod {pod} names no node; not checked")
            }
            Warning::RestoreUnchecked { why } => {
                write!(f, "miggate: restore not checked: {why}; the peer's agent decides")
            }
            Warning::AllWaivedByPeer { checkpoint } => write!(
                f,
                "miggate: every check waived by {SKIP_COMPAT_CHECK}; checkpoint {checkpoint} not compared"
            ),
            Warning::ImageUnpinned => f.write_str(
                "miggate: image-digest unknown: the pod names its image without an @sha256: digest; the node agent compares the runtime's image id",
            ),
            Warning::DigestsDiffer { pod, checkpoint } => write!(
                f,
                "miggate: image-digest unknown: pod pins {pod}, checkpoint has {checkpoint}; may be an index digest, the node agent decides"
            ),
            Warning::ContainerUnknown { checkpoint, asking } => write!(
                f,
                "miggate: the restore container is unknown: checkpoint {checkpoint} names none and {asking} containers ask for GPUs; pod facts are not checked here, the node agent decides"
            ),
            Warning::BindingNoInventory { node: n, unusable, pod } => {
                write!(f, "miggate: node {} has ", node(n))?;
                if *unusable {
                    f.write_str("no usable GPU inventory (the sources present cannot be read, as follows)")?;
                } else {
                    write!(f, "no GPU inventory ({NO_INVENTORY})")?;
                }
                write!(
                    f,
                    "; binding of restore pod {pod} not checked, the node agent decides"
                )
            }
            Warning::Waived { checks } => write!(f, "miggate: waived by {SKIP_CHECKS}: {checks}"),
            Warning::Unknown(r) => write!(
                f,
                "miggate: {} unknown: {} (source {}, target {})",
                r.check, r.message, r.source, r.target
            ),
            Warning::Report(w) => write!(f, "miggate: {w}"),
            Warning::Node { node: n, note } => write!(f, "miggate: node {}: {note}", node(n)),
            Warning::PartialInventory {
                node: n,
                source,
                passed_over,
            } => {
                let why = if *passed_over {
                    "a better source cannot be read"
                } else {
                    "no GpuNode"
                };
                write!(
                    f,
                    "miggate: node {} inventory from {} ({why}): facts it does not publish are unknown",
                    node(n),
                    source.as_str()
                )
            }
            Warning::MoreNotShown(n) => write!(f, "miggate: {n} more warnings not shown"),
        }
    }
}

/// The warnings a decision collects, in order; rendered to text as each is added.
pub(crate) trait Push {
    /// Adds one warning.
    fn warn(&mut self, warning: Warning<'_>);
}

impl Push for Vec<String> {
    fn warn(&mut self, warning: Warning<'_>) {
        self.push(warning.to_string());
    }
}

/// "waived by …" naming the skipped checks `keep` accepts, when there are any.
pub(super) fn waived_warning(
    report: &Report,
    warnings: &mut Vec<String>,
    keep: impl Fn(&CheckResult) -> bool,
) {
    let mut line = String::new();
    for r in report
        .results
        .iter()
        .filter(|r| r.outcome == Outcome::Skipped && keep(r))
    {
        line.push_str(if line.is_empty() { "" } else { ", " });
        line.push_str(r.check.as_str());
    }
    if !line.is_empty() {
        warnings.warn(Warning::Waived { checks: &line });
    }
}

/// The report's own warnings, each prefixed.
pub(super) fn report_warnings(report: &Report, warnings: &mut Vec<String>) {
    for w in &report.warnings {
        warnings.warn(Warning::Report(w));
    }
}

/// One warning per source passed over (each is cut to a warning's length on its own).
pub(super) fn passed_over_warnings(node: &str, passed_over: &[String], warnings: &mut Vec<String>) {
    for why in passed_over {
        warnings.warn(Warning::Node { node, note: why });
    }
}

/// Warnings an inventory brings: its source when it is not a `GpuNode` (a partial view), and
/// what the source could not say.
pub(super) fn inventory_warnings(node: &str, inventory: &Inventory, warnings: &mut Vec<String>) {
    if inventory.source != Source::GpuNode {
        warnings.warn(Warning::PartialInventory {
            node,
            source: inventory.source,
            passed_over: !inventory.passed_over.is_empty(),
        });
    }
    for note in &inventory.notes {
        warnings.warn(Warning::Node { node, note });
    }
}
