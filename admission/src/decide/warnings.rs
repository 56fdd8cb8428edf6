//! Every warning a decision writes, as one enum: the words live in [`Warning`]'s `Display`,
//! and the evaluations name what they saw, kept typed until the response is written. The text
//! is what the API server passes to the client (`kubectl` prints it), so it is held by the
//! decision tests and snapshots; escaping and the length bound are
//! [`render`](super::render)'s.

use std::fmt;

use miggate_compat::escape::escape_within;
use miggate_compat::{CheckName, CheckResult, Outcome, Report};
use miggate_wire::annotations::SKIP_CHECKS;
use miggate_wire::peer::SKIP_COMPAT_CHECK;

use crate::lookup::{Inventory, Note, PassedOver, Source, Staleness};
use miggate_inventory::NO_SOURCE;

/// One warning of a decision, kept typed until the response is written ([`render`](super::render)
/// renders each with its `Display`).
#[derive(Debug, Clone, PartialEq)]
pub enum Warning {
    /// The peer's skip annotation is not a Go boolean.
    PeerSkipUnreadable {
        /// The value, already escaped and cut.
        value: String,
    },
    /// A binding arrived before the caches' first list.
    BindingNotSynced,
    /// A binding arrived while the caches are too far behind.
    BindingStale(Staleness),
    /// A restore pod's binding names no node.
    BindingNoNode {
        /// `namespace/name` of the pod, escaped.
        pod: String,
    },
    /// The checkpoint cannot be looked up here (a `PodSnapshot` whose content is not known).
    RestoreUnchecked {
        /// Why not.
        why: crate::resolve::Unresolved,
    },
    /// `nvidia.com/snapshot-skip-compat-check` waives every check.
    AllWaivedByPeer {
        /// The checkpoint not compared, as messages name it.
        checkpoint: String,
    },
    /// The pod names its image by tag: the digest is the node agent's to compare.
    ImageUnpinned,
    /// The pod's pinned digest and the checkpoint's differ.
    DigestsDiffer {
        /// The pod's digest, reduced to `sha256:…`.
        pod: String,
        /// The checkpoint's digest, reduced to `sha256:…`.
        checkpoint: String,
    },
    /// No restore container can be told: the checkpoint names none and several containers
    /// ask for GPUs.
    ContainerUnknown {
        /// The checkpoint, as messages name it.
        checkpoint: String,
        /// How many containers ask for GPUs.
        asking: usize,
    },
    /// A binding to a node no source describes.
    BindingNoInventory {
        /// The node.
        node: String,
        /// Whether sources are present but cannot be read (each then follows as a
        /// [`Warning::PassedOver`]).
        unusable: bool,
        /// `namespace/name` of the pod, escaped.
        pod: String,
    },
    /// The checks the pod's `miggate.io/skip-checks` waived.
    Waived {
        /// The checks, in report order.
        checks: Vec<CheckName>,
    },
    /// A check whose outcome is unknown.
    Unknown(CheckResult),
    /// A warning of the report itself.
    Report(miggate_compat::Warning),
    /// A note on a node's inventory: a source passed over, or what the source could not say.
    Node {
        /// The node.
        node: String,
        /// The note.
        note: Note,
    },
    /// A source of a node without a usable inventory, present and passed over.
    PassedOver {
        /// The node.
        node: String,
        /// Why it was passed over.
        why: PassedOver,
    },
    /// A node's inventory from a source other than a `GpuNode`.
    PartialInventory {
        /// The node.
        node: String,
        /// The source read.
        source: Source,
        /// Whether a better source is present but cannot be read.
        passed_over: bool,
    },
    /// A DRA pod's binding judged against the whole node: the exact check on its allocated
    /// devices could not run.
    ExactCheckNotRun(crate::allocation::ExactNotRun),
    /// The last warning when the list was cut.
    MoreNotShown(usize),
}

impl fmt::Display for Warning {
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
                    write!(f, "no GPU inventory ({NO_SOURCE})")?;
                }
                write!(
                    f,
                    "; binding of restore pod {pod} not checked, the node agent decides"
                )
            }
            Warning::Waived { checks } => {
                write!(f, "miggate: waived by {SKIP_CHECKS}: ")?;
                for (i, check) in checks.iter().enumerate() {
                    f.write_str(if i == 0 { "" } else { ", " })?;
                    f.write_str(check.as_str())?;
                }
                Ok(())
            }
            Warning::Unknown(r) => write!(
                f,
                "miggate: {} unknown: {} (source {}, target {})",
                r.check, r.message, r.source, r.target
            ),
            Warning::Report(w) => write!(f, "miggate: {w}"),
            Warning::Node { node: n, note } => write!(f, "miggate: node {}: {note}", node(n)),
            Warning::PassedOver { node: n, why } => write!(f, "miggate: node {}: {why}", node(n)),
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
            Warning::ExactCheckNotRun(why) => write!(
                f,
                "miggate: exact check on the allocated devices not run: {why}; judged against the whole node in offer mode"
            ),
            Warning::MoreNotShown(n) => write!(f, "miggate: {n} more warnings not shown"),
        }
    }
}

/// "waived by …" naming the skipped checks `keep` accepts, when there are any.
pub(super) fn waived_warning(
    report: &Report,
    warnings: &mut Vec<Warning>,
    keep: impl Fn(&CheckResult) -> bool,
) {
    let checks: Vec<CheckName> = report
        .results
        .iter()
        .filter(|r| r.outcome == Outcome::Skipped && keep(r))
        .map(|r| r.check)
        .collect();
    if !checks.is_empty() {
        warnings.push(Warning::Waived { checks });
    }
}

/// The report's own warnings, each prefixed.
pub(super) fn report_warnings(report: &Report, warnings: &mut Vec<Warning>) {
    warnings.extend(report.warnings.iter().cloned().map(Warning::Report));
}

/// One warning per source passed over (each is cut to a warning's length on its own).
pub(super) fn passed_over_warnings(node: &str, passed_over: &[PassedOver], warnings: &mut Vec<Warning>) {
    for why in passed_over {
        warnings.push(Warning::PassedOver {
            node: node.to_string(),
            why: why.clone(),
        });
    }
}

/// Warnings an inventory brings: its source when it is not a `GpuNode` (a partial view), and
/// what the source could not say.
pub(super) fn inventory_warnings(node: &str, inventory: &Inventory, warnings: &mut Vec<Warning>) {
    if inventory.source != Source::GpuNode {
        warnings.push(Warning::PartialInventory {
            node: node.to_string(),
            source: inventory.source,
            passed_over: !inventory.passed_over.is_empty(),
        });
    }
    for note in &inventory.notes {
        warnings.push(Warning::Node {
            node: node.to_string(),
            note: note.clone(),
        });
    }
}
