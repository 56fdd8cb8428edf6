//! Why a restore is refused, typed: one variant per reason, its metric labels from
//! [`Refusal::refused_by`] (the failing checks, or its [`Reason`]) and its message from
//! `Display`, so the labels operators alert on and the words a user reads cannot drift apart.

use std::fmt;

use miggate_compat::CheckName;
use std::sync::Arc;

use miggate_compat::escape::{escape, escape_within};
use miggate_crds::peer::PeerError;
use miggate_wire::annotations::RESTORE_FROM;
use miggate_wire::annotations::SKIP_CHECKS;
use miggate_wire::peer;

use crate::lookup::{Inventory, NoInventory, PassedOver, Source};

/// The reason a restore pod or its binding is refused. Every text field is escaped for
/// messages already (names from the request are untrusted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// `miggate.io/restore-from` is present but names nothing.
    RestoreFromEmpty {
        /// `namespace/name` of the pod.
        pod: String,
    },
    /// `nvidia.com/restore-from` does not name a `PodSnapshot` (the peer's words why).
    RestoreFromInvalid {
        /// `namespace/name` of the pod.
        pod: String,
        /// Why, as the peer's agent says it.
        why: PeerError,
    },
    /// Both `miggate.io/restore-from` and `nvidia.com/restore-from`: which restores?
    RestoreFromBoth {
        /// `namespace/name` of the pod.
        pod: String,
    },
    /// `nvidia.com/restore-container-map` cannot be right (the peer's words why).
    ContainerMapInvalid {
        /// `namespace/name` of the pod.
        pod: String,
        /// Why, as the peer's agent says it.
        why: PeerError,
    },
    /// Neither the request nor the object names a namespace.
    NoNamespace,
    /// A restore pod `--restore-pod-selector` does not select: the pod watch never sends it,
    /// so its binding would pass unchecked.
    NotSelected {
        /// `namespace/name` of the pod.
        pod: String,
        /// The selector's canonical text, escaped.
        selector: String,
    },
    /// The webhook's caches have not listed everything once: absent cannot be told from
    /// not seen yet.
    StoreNotSynced {
        /// `namespace/name` of the checkpoint.
        checkpoint: String,
    },
    /// A watch cache has been behind the API server longer than `--max-staleness`: what it
    /// holds is too old to decide on.
    StoreStale {
        /// `namespace/name` of the checkpoint.
        checkpoint: String,
        /// Which cache, for how long.
        staleness: crate::lookup::Staleness,
    },
    /// `miggate.io/skip-checks` does not parse: a typo never waives.
    SkipChecksInvalid {
        /// `namespace/name` of the pod, named on the binding path (the pod is not the
        /// request's object there).
        pod: Option<String>,
        /// Why it waives nothing.
        why: WaivesNothing,
    },
    /// No `GpuCheckpoint` of that name.
    CheckpointNotFound {
        /// `namespace/name` of the checkpoint.
        checkpoint: String,
        /// The namespace looked in.
        namespace: String,
        /// On the binding path: the pod and the node it was being bound to.
        binding: Option<(String, String)>,
    },
    /// No `PodSnapshot` of that name.
    SnapshotNotFound {
        /// `namespace/name` of the snapshot.
        snapshot: String,
        /// The namespace looked in.
        namespace: String,
        /// On the binding path: the pod and the node it was being bound to.
        binding: Option<(String, String)>,
    },
    /// The `PodSnapshot` is bound to a `PodSnapshotContent` whose `spec.snapshotRef` names
    /// another snapshot (or none): a snapshot restores only its own content.
    SnapshotContentMismatch {
        /// The snapshot, the content and what the content points back to.
        foreign: Box<crate::resolve::Foreign>,
        /// On the binding path: the pod and the node it was being bound to.
        binding: Option<(String, String)>,
    },
    /// The pod's spec does not decode.
    PodUnreadable {
        /// `namespace/name` of the pod.
        pod: String,
        /// Why.
        error: SpecUnreadable,
    },
    /// The checkpoint names a container the pod does not have.
    ContainerNotFound {
        /// `namespace/name` of the checkpoint.
        checkpoint: String,
        /// The container the checkpoint was taken from.
        container: String,
        /// `namespace/name` of the pod.
        pod: String,
        /// The pod's containers.
        containers: Vec<String>,
        /// Whether the container is a destination `nvidia.com/restore-container-map` names
        /// (else the one the checkpoint was taken from, restored under its own name).
        mapped: bool,
    },
    /// The pod names a node no source describes.
    NodeNotFound {
        /// `namespace/name` of the pod.
        pod: String,
        /// The node the pod is bound to, escaped and bounded.
        node: String,
        /// Why the node has no inventory.
        has: NoInventory,
        /// `namespace/name` of the checkpoint.
        checkpoint: String,
    },
    /// Checks refused.
    Incompatible {
        /// `namespace/name` of the checkpoint.
        checkpoint: String,
        /// On the binding path, the pod (the request's object is a Binding).
        of_pod: Option<String>,
        /// Where (boxed: every `Result` of a decision carries a `Refusal`'s size).
        place: Box<Place>,
        /// The report's reason: each failing check with both values.
        reason: String,
        /// The failing checks.
        checks: Vec<CheckName>,
    },
}

/// Why a `miggate.io/skip-checks` value waives nothing: the reader's error, its words
/// escaped when shown.
#[derive(Debug, Clone, thiserror::Error)]
#[error("annotation {SKIP_CHECKS} waives nothing: {}", escape(&.0.to_string()))]
pub struct WaivesNothing(#[source] pub Arc<miggate_compat::Error>);

/// Why a restore pod's spec cannot be read: the decoder's error, its words escaped when shown.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", escape(&.0.to_string()))]
pub struct SpecUnreadable(#[source] pub Arc<serde_json::Error>);

/// Two reasons are the same when they say the same: the errors inside hold no identity.
macro_rules! same_when_said_alike {
    ($($t:ty),*) => {$(
        impl PartialEq for $t {
            fn eq(&self, other: &Self) -> bool {
                self.to_string() == other.to_string()
            }
        }
        impl Eq for $t {}
    )*};
}
same_when_said_alike!(WaivesNothing, SpecUnreadable);

/// Where a restore was judged, as an incompatible refusal names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// In the pod alone: it names no node.
    InPod,
    /// On the node the pod names or is bound to.
    OnNode {
        /// The node, escaped and bounded.
        node: String,
        /// The source its inventory was read from.
        source: Source,
        /// Whether its GPUs are partitioned on demand (DynamicMIG): what it could make.
        on_demand: bool,
        /// The better sources passed over for `source`.
        passed_over: Vec<PassedOver>,
        /// On a binding: the allocated devices the exact check judged, escaped and bounded.
        exact_on: Option<String>,
    },
}

impl Place {
    /// On `node`, as its inventory says where it came from.
    pub fn on_node(node: &str, inventory: &Inventory, exact_on: Option<&str>) -> Box<Place> {
        Box::new(Place::OnNode {
            node: escape_within(node, 256).into_owned(),
            source: inventory.source,
            on_demand: inventory.supply.is_some(),
            passed_over: inventory.passed_over.clone(),
            exact_on: exact_on.map(|d| escape_within(d, 1024).into_owned()),
        })
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Place::OnNode {
            node,
            source,
            on_demand,
            passed_over,
            exact_on,
        } = self
        else {
            return f.write_str("in this pod");
        };
        write!(f, "on node {node} (inventory from {source}")?;
        if *on_demand {
            f.write_str(", DynamicMIG: partitions on demand")?;
        }
        for (i, why) in passed_over.iter().enumerate() {
            f.write_str(if i == 0 { ", passed over: " } else { "; " })?;
            why.fmt(f)?;
        }
        if let Some(devices) = exact_on {
            write!(f, ", exact check on the allocated devices {devices}")?;
        }
        f.write_str(")")
    }
}

/// What refused a restore, as counted (`miggate_admission_refusals_total{check}`) and logged:
/// a failing check, or a refusal that is not a check's.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefusedBy {
    /// A check that failed.
    Check(CheckName),
    /// The request, the store, the checkpoint or the node stopped the restore before a check.
    Reason(Reason),
}

impl RefusedBy {
    /// The metric label: the check's name, or the reason's.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusedBy::Check(c) => c.as_str(),
            RefusedBy::Reason(r) => r.as_str(),
        }
    }
}

impl fmt::Display for RefusedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// As the label, so a log's `refused_by=[gpu-request, mount]` reads as the metric does.
impl fmt::Debug for RefusedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Compared by label, so a test states what refused as an operator reads it.
impl PartialEq<&str> for RefusedBy {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A refusal that is not a check's, one per metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// `restore-from-invalid`: a restore annotation that names nothing, or not a valid name.
    RestoreFromInvalid,
    /// `restore-from-ambiguous`: both miggate's and the peer's restore annotation.
    RestoreFromAmbiguous,
    /// `container-map-invalid`: the peer's container map cannot be followed.
    ContainerMapInvalid,
    /// `snapshot-not-found`: no `PodSnapshot` of the name.
    SnapshotNotFound,
    /// `snapshot-content-mismatch`: the snapshot's content names another snapshot.
    SnapshotContentMismatch,
    /// `no-namespace`: a request without a namespace.
    NoNamespace,
    /// `pod-not-selected`: a restore pod without the labels of `--restore-pod-selector`.
    PodNotSelected,
    /// `store-not-synced`: the store has not listed everything yet.
    StoreNotSynced,
    /// `store-stale`: a watch cache has been behind too long.
    StoreStale,
    /// `skip-checks-invalid`: a waiver that names no check.
    SkipChecksInvalid,
    /// `checkpoint-not-found`: no checkpoint of the name.
    CheckpointNotFound,
    /// `pod-unreadable`: the pod's spec cannot be read.
    PodUnreadable,
    /// `container-not-found`: the restore container is not in the pod.
    ContainerNotFound,
    /// `node-not-found`: the pod's node has no usable inventory.
    NodeNotFound,
}

impl Reason {
    /// Every reason, for docs and tests.
    pub const ALL: [Reason; 14] = [
        Reason::RestoreFromInvalid,
        Reason::RestoreFromAmbiguous,
        Reason::ContainerMapInvalid,
        Reason::SnapshotNotFound,
        Reason::SnapshotContentMismatch,
        Reason::NoNamespace,
        Reason::PodNotSelected,
        Reason::StoreNotSynced,
        Reason::StoreStale,
        Reason::SkipChecksInvalid,
        Reason::CheckpointNotFound,
        Reason::PodUnreadable,
        Reason::ContainerNotFound,
        Reason::NodeNotFound,
    ];

    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::RestoreFromInvalid => "restore-from-invalid",
            Reason::RestoreFromAmbiguous => "restore-from-ambiguous",
            Reason::ContainerMapInvalid => "container-map-invalid",
            Reason::SnapshotNotFound => "snapshot-not-found",
            Reason::SnapshotContentMismatch => "snapshot-content-mismatch",
            Reason::NoNamespace => "no-namespace",
            Reason::PodNotSelected => "pod-not-selected",
            Reason::StoreNotSynced => "store-not-synced",
            Reason::StoreStale => "store-stale",
            Reason::SkipChecksInvalid => "skip-checks-invalid",
            Reason::CheckpointNotFound => "checkpoint-not-found",
            Reason::PodUnreadable => "pod-unreadable",
            Reason::ContainerNotFound => "container-not-found",
            Reason::NodeNotFound => "node-not-found",
        }
    }
}

impl Refusal {
    /// The reason of a refusal that is not a check's; `None` for failing checks, which count
    /// under each check's name ([`Refusal::refused_by`]).
    pub fn reason(&self) -> Option<Reason> {
        Some(match self {
            Refusal::RestoreFromEmpty { .. } | Refusal::RestoreFromInvalid { .. } => {
                Reason::RestoreFromInvalid
            }
            Refusal::RestoreFromBoth { .. } => Reason::RestoreFromAmbiguous,
            Refusal::ContainerMapInvalid { .. } => Reason::ContainerMapInvalid,
            Refusal::SnapshotNotFound { .. } => Reason::SnapshotNotFound,
            Refusal::SnapshotContentMismatch { .. } => Reason::SnapshotContentMismatch,
            Refusal::NoNamespace => Reason::NoNamespace,
            Refusal::NotSelected { .. } => Reason::PodNotSelected,
            Refusal::StoreNotSynced { .. } => Reason::StoreNotSynced,
            Refusal::StoreStale { .. } => Reason::StoreStale,
            Refusal::SkipChecksInvalid { .. } => Reason::SkipChecksInvalid,
            Refusal::CheckpointNotFound { .. } => Reason::CheckpointNotFound,
            Refusal::PodUnreadable { .. } => Reason::PodUnreadable,
            Refusal::ContainerNotFound { .. } => Reason::ContainerNotFound,
            Refusal::NodeNotFound { .. } => Reason::NodeNotFound,
            Refusal::Incompatible { .. } => return None,
        })
    }

    /// What refused, as counted and logged: the failing checks, or the reason.
    pub fn refused_by(&self) -> Vec<RefusedBy> {
        match self {
            Refusal::Incompatible { checks, .. } => checks.iter().copied().map(RefusedBy::Check).collect(),
            other => other.reason().map(RefusedBy::Reason).into_iter().collect(),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::RestoreFromEmpty { pod } => write!(
                f,
                "miggate: pod {pod}: annotation {RESTORE_FROM} is empty; name a GpuCheckpoint"
            ),
            Refusal::RestoreFromInvalid { pod, why } => {
                write!(f, "miggate: pod {pod}: {}", escape_within(&why.to_string(), 1024))
            }
            Refusal::RestoreFromBoth { pod } => write!(
                f,
                "miggate: pod {pod} names a checkpoint twice, by {RESTORE_FROM} and {}; keep the one that restores it",
                peer::RESTORE_FROM
            ),
            Refusal::ContainerMapInvalid { pod, why } => write!(
                f,
                "miggate: pod {pod}: annotation {} cannot be followed: {}",
                peer::RESTORE_CONTAINER_MAP,
                escape_within(&why.to_string(), 1024)
            ),
            Refusal::SnapshotNotFound {
                snapshot,
                namespace,
                binding,
            } => Missing::snapshot(snapshot, namespace, binding.as_ref()).fmt(f),
            Refusal::SnapshotContentMismatch { foreign, binding } => {
                content_mismatch(f, foreign, binding.as_ref())
            }
            Refusal::NoNamespace => {
                f.write_str("miggate: the request names no namespace to find the checkpoint in")
            }
            Refusal::NotSelected { pod, selector } => write!(
                f,
                "miggate: restore pod {pod} lacks the labels of the webhook's --restore-pod-selector ({selector}): the webhook checks the binding only of pods it selects; add them to the pod's labels"
            ),
            Refusal::StoreNotSynced { checkpoint } => write!(
                f,
                "miggate: cannot check checkpoint {checkpoint} yet: the webhook's caches have not finished their first list; retry shortly"
            ),
            Refusal::StoreStale {
                checkpoint,
                staleness,
            } => write!(
                f,
                "miggate: cannot check checkpoint {checkpoint} now: {staleness}; retry once the API server answers again"
            ),
            Refusal::SkipChecksInvalid { pod: None, why } => write!(f, "miggate: {why}"),
            Refusal::SkipChecksInvalid { pod: Some(pod), why } => write!(f, "miggate: pod {pod}: {why}"),
            Refusal::CheckpointNotFound {
                checkpoint,
                namespace,
                binding,
            } => Missing::checkpoint(checkpoint, namespace, binding.as_ref()).fmt(f),
            Refusal::PodUnreadable { pod, error } => {
                write!(f, "miggate: pod {pod}: spec cannot be read: {error}")
            }
            Refusal::ContainerNotFound {
                checkpoint,
                container,
                pod,
                containers,
                mapped,
            } => container_not_found(f, checkpoint, container, pod, containers, *mapped),
            Refusal::NodeNotFound {
                pod,
                node,
                has,
                checkpoint,
            } => write!(
                f,
                "miggate: pod {pod} is bound to node {node}, which has {has}; cannot check checkpoint {checkpoint} against it"
            ),
            Refusal::Incompatible {
                checkpoint,
                of_pod,
                place,
                reason,
                ..
            } => incompatible(f, checkpoint, of_pod.as_deref(), place, reason),
        }
    }
}

/// [`Refusal::ContainerNotFound`]'s message: the checkpoint's container (or, `mapped`, the one
/// `nvidia.com/restore-container-map` restores it into) and the pod's containers.
fn container_not_found(
    f: &mut fmt::Formatter<'_>,
    checkpoint: &str,
    container: &str,
    pod: &str,
    containers: &[String],
    mapped: bool,
) -> fmt::Result {
    write!(f, "miggate: checkpoint {checkpoint} ")?;
    if mapped {
        write!(
            f,
            "restores into container `{container}` ({})",
            peer::RESTORE_CONTAINER_MAP
        )?;
    } else {
        write!(f, "was taken from container `{container}`")?;
    }
    write!(
        f,
        ", which pod {pod} does not have (containers: {})",
        containers.join(", ")
    )
}

/// [`Refusal::Incompatible`]'s message: the checkpoint, the pod on the binding path, the place
/// and the report's reason.
fn incompatible(
    f: &mut fmt::Formatter<'_>,
    checkpoint: &str,
    of_pod: Option<&str>,
    place: &Place,
    reason: &str,
) -> fmt::Result {
    write!(f, "miggate: checkpoint {checkpoint}")?;
    if let Some(pod) = of_pod {
        write!(f, " of pod {pod}")?;
    }
    write!(f, " cannot be restored {place}: {reason}")
}

/// [`Refusal::SnapshotContentMismatch`]'s message, with the pod and node on the binding path.
fn content_mismatch(
    f: &mut fmt::Formatter<'_>,
    foreign: &crate::resolve::Foreign,
    binding: Option<&(String, String)>,
) -> fmt::Result {
    f.write_str("miggate: ")?;
    if let Some((pod, node)) = binding {
        write!(f, "cannot bind pod {pod} to node {node}: ")?;
    }
    write!(
        f,
        "{foreign}: not this snapshot's checkpoint, so it is not restored; the snapshot's status.boundSnapshotContentName must name a content made for it"
    )
}

/// A checkpoint or snapshot a restore names that does not exist: the same words for both,
/// with the pod and node on the binding path, or the namespace looked in on a pod's creation.
struct Missing<'a> {
    /// What the message calls it (`checkpoint`, `PodSnapshot`).
    what: &'static str,
    /// Its kind.
    kind: &'static str,
    /// The annotation that names it.
    annotation: &'static str,
    /// `namespace/name`.
    name: &'a str,
    /// The namespace looked in.
    namespace: &'a str,
    /// On the binding path: the pod and the node it was being bound to.
    binding: Option<&'a (String, String)>,
}

impl<'a> Missing<'a> {
    /// A `PodSnapshot` the peer's `restore-from` names.
    fn snapshot(name: &'a str, namespace: &'a str, binding: Option<&'a (String, String)>) -> Self {
        Missing {
            what: "PodSnapshot",
            kind: "PodSnapshot",
            annotation: peer::RESTORE_FROM,
            name,
            namespace,
            binding,
        }
    }

    /// A `GpuCheckpoint` miggate's `restore-from` names.
    fn checkpoint(name: &'a str, namespace: &'a str, binding: Option<&'a (String, String)>) -> Self {
        Missing {
            what: "checkpoint",
            kind: "GpuCheckpoint",
            annotation: RESTORE_FROM,
            name,
            namespace,
            binding,
        }
    }
}

impl fmt::Display for Missing<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Missing {
            what,
            kind,
            annotation,
            name,
            namespace,
            binding,
        } = self;
        match binding {
            None => write!(
                f,
                "miggate: {what} {name} named by annotation {annotation} does not exist (no {kind} of that name in namespace {namespace})"
            ),
            Some((pod, node)) => write!(
                f,
                "miggate: cannot bind pod {pod} to node {node}: {what} {name} named by annotation {annotation} does not exist"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::unwrap_used)]
    fn labels_list_every_reason_but_checks() {
        let all = [
            Refusal::RestoreFromEmpty { pod: "p".into() },
            Refusal::RestoreFromBoth { pod: "p".into() },
            Refusal::ContainerMapInvalid {
                pod: "p".into(),
                why: PeerError::NoSnapshotName,
            },
            Refusal::SnapshotNotFound {
                snapshot: "s".into(),
                namespace: "n".into(),
                binding: None,
            },
            Refusal::SnapshotContentMismatch {
                foreign: Box::new(crate::resolve::Foreign {
                    snapshot: "ml/s".into(),
                    content: "c".into(),
                    points_at: "belongs to PodSnapshot team-b/s (its spec.snapshotRef)".into(),
                    back: None,
                }),
                binding: None,
            },
            Refusal::NoNamespace,
            Refusal::NotSelected {
                pod: "p".into(),
                selector: "s".into(),
            },
            Refusal::StoreNotSynced {
                checkpoint: "c".into(),
            },
            Refusal::StoreStale {
                checkpoint: "c".into(),
                staleness: crate::lookup::Staleness {
                    kind: "GpuNode".into(),
                    seconds: 75,
                    max_seconds: 60,
                },
            },
            Refusal::SkipChecksInvalid {
                pod: None,
                why: WaivesNothing(Arc::new(miggate_compat::parse_skip("gpu-cuont").unwrap_err())),
            },
            Refusal::CheckpointNotFound {
                checkpoint: "c".into(),
                namespace: "n".into(),
                binding: None,
            },
            Refusal::PodUnreadable {
                pod: "p".into(),
                error: SpecUnreadable(Arc::new(serde_json::from_str::<u8>("e").unwrap_err())),
            },
            Refusal::ContainerNotFound {
                checkpoint: "c".into(),
                container: "w".into(),
                pod: "p".into(),
                containers: vec![],
                mapped: false,
            },
            Refusal::NodeNotFound {
                pod: "p".into(),
                node: "n".into(),
                has: NoInventory::default(),
                checkpoint: "c".into(),
            },
        ];
        let reasons: Vec<Reason> = all.iter().filter_map(Refusal::reason).collect();
        assert_eq!(reasons, Reason::ALL);
        let checks = Refusal::Incompatible {
            checkpoint: "c".into(),
            of_pod: None,
            place: Box::new(Place::InPod),
            reason: "r".into(),
            checks: vec![CheckName::MEMORY_LIMIT, CheckName::MOUNT],
        };
        assert_eq!(checks.reason(), None);
        assert_eq!(checks.refused_by(), ["memory-limit", "mount"]);
        assert_eq!(
            checks.to_string(),
            "miggate: checkpoint c cannot be restored in this pod: r"
        );
    }
}
