//! The checkpoint a restore pod names, through either contract: miggate's `GpuCheckpoint`
//! (`miggate.io/restore-from`) or the Go peer's `PodSnapshot` (`nvidia.com/restore-from`),
//! followed through `status.boundSnapshotContentName` to its `PodSnapshotContent`.
//!
//! One home for how a reference is read and followed, so the validating decision, steering
//! and the device map agree on which checkpoint a pod restores, and on when there is none to
//! compare: a missing `GpuCheckpoint` or `PodSnapshot` is refused (a misspelled name never
//! restores), while a snapshot not bound yet, a content without `status.source` or a cluster
//! without the peer's API is admitted with a warning (the peer's own agent still gates it):
//! a missing fact is never a refusal.
//!
//! A binding is held both ways: the content a `PodSnapshot` names must name it back
//! (`spec.snapshotRef`: namespace, name, and UID where both record one). A snapshot whose
//! status a tenant could write would otherwise borrow another namespace's content, and be
//! compared against (and shown the values of) a checkpoint that is not its own; such a
//! restore is refused, naming both ([`Foreign`]).

use std::borrow::Cow;
use std::sync::Arc;

use miggate_compat::escape::escape_within;
use miggate_crds::peer::{NoSource, PeerError, SnapshotRef};
use miggate_wire::annotations::RESTORE_FROM;
use miggate_wire::peer;

use crate::lookup::{Checkpoint, Lookup, SnapshotLookup};

/// Which kind of object a restore pod names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// miggate's `GpuCheckpoint`, by `miggate.io/restore-from`.
    GpuCheckpoint,
    /// The Go peer's `PodSnapshot`, by `nvidia.com/restore-from`.
    PodSnapshot,
}

impl Kind {
    /// The annotation that names it.
    pub fn annotation(self) -> &'static str {
        match self {
            Kind::GpuCheckpoint => RESTORE_FROM,
            Kind::PodSnapshot => peer::RESTORE_FROM,
        }
    }

    /// The kind's name, for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::GpuCheckpoint => "GpuCheckpoint",
            Kind::PodSnapshot => peer::POD_SNAPSHOT,
        }
    }
}

/// What a restore pod names: the kind, and the name (trimmed) in the pod's namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference<'a> {
    /// `GpuCheckpoint` or `PodSnapshot`.
    pub kind: Kind,
    /// The object's name, trimmed.
    pub name: Cow<'a, str>,
}

impl Reference<'_> {
    /// `namespace/name` for messages, escaped, with the kind when it is the peer's (miggate's
    /// own messages have always said `checkpoint ns/name` of a `GpuCheckpoint`).
    pub fn display(&self, namespace: &str) -> String {
        let at = format!(
            "{}/{}",
            escape_within(namespace, 256),
            escape_within(&self.name, 256)
        );
        match self.kind {
            Kind::GpuCheckpoint => at,
            Kind::PodSnapshot => format!("{at} (PodSnapshot)"),
        }
    }

    /// An owned copy, for a request that outlives the annotation it was read from.
    pub fn into_owned(self) -> Reference<'static> {
        Reference {
            kind: self.kind,
            name: Cow::Owned(self.name.into_owned()),
        }
    }
}

/// Why a pod's annotations name no checkpoint that can be looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReferenceError {
    /// `miggate.io/restore-from` is blank.
    Empty,
    /// `nvidia.com/restore-from` is not a `PodSnapshot` name: the peer's words.
    Invalid(PeerError),
    /// Both annotations: one pod restores one checkpoint.
    Both,
}

/// The reference a pod's annotations make, if any. `ours` is `miggate.io/restore-from`,
/// `theirs` `nvidia.com/restore-from` (read as the peer reads it).
pub fn reference<'a>(
    ours: Option<&'a str>,
    theirs: Option<&'a str>,
) -> Result<Option<Reference<'a>>, ReferenceError> {
    match (ours, theirs) {
        (None, None) => Ok(None),
        (Some(_), Some(_)) => Err(ReferenceError::Both),
        (Some(name), None) => {
            let name = name.trim();
            if name.is_empty() {
                return Err(ReferenceError::Empty);
            }
            Ok(Some(Reference {
                kind: Kind::GpuCheckpoint,
                name: Cow::Borrowed(name),
            }))
        }
        (None, Some(value)) => miggate_crds::peer::snapshot_name(value)
            .map(|name| {
                Some(Reference {
                    kind: Kind::PodSnapshot,
                    name: Cow::Borrowed(name),
                })
            })
            .map_err(ReferenceError::Invalid),
    }
}

/// A reference followed.
#[derive(Debug, Clone)]
pub enum Resolved {
    /// The checkpoint to compare.
    Found {
        /// Its facts and captured container.
        checkpoint: Arc<Checkpoint>,
    },
    /// No object of that name: refused, since a restore of it cannot happen.
    Missing,
    /// A `PodSnapshot` bound to a content that does not point back to it: refused.
    Foreign(Foreign),
    /// Nothing to compare, and why: admitted, the peer's agent decides.
    Unchecked(Unresolved),
}

/// Why a `PodSnapshot` has nothing to compare. Every text is escaped, for messages; the
/// display is the webhook's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unresolved {
    /// The store keeps no `PodSnapshot`s: the cluster does not serve the peer's API.
    NotServed {
        /// `namespace/name` of the snapshot.
        snapshot: String,
    },
    /// The snapshot is not bound to a content yet.
    Unbound {
        /// `namespace/name` of the snapshot.
        snapshot: String,
    },
    /// The snapshot is bound to a content that does not exist.
    ContentMissing {
        /// `namespace/name` of the snapshot.
        snapshot: String,
        /// The content's name.
        content: String,
    },
    /// The content records no checkpoint that can be compared.
    NoSource {
        /// `namespace/name` of the snapshot.
        snapshot: String,
        /// The content's name.
        content: String,
        /// What its `status.source` lacks.
        why: NoSource,
    },
}

impl std::fmt::Display for Unresolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unresolved::NotServed { snapshot } => write!(
                f,
                "PodSnapshot {snapshot} cannot be looked up, this cluster does not serve {} PodSnapshots",
                peer::API_VERSION
            ),
            Unresolved::Unbound { snapshot } => write!(
                f,
                "PodSnapshot {snapshot} is not bound to a PodSnapshotContent yet, nothing compared"
            ),
            Unresolved::ContentMissing { snapshot, content } => write!(
                f,
                "PodSnapshot {snapshot} is bound to PodSnapshotContent {content}, which does not exist"
            ),
            Unresolved::NoSource { content, why, .. } => {
                write!(f, "PodSnapshotContent {content} {why}, nothing compared")
            }
        }
    }
}

/// A `PodSnapshot` and the content it is bound to, which belongs to another snapshot (or to
/// none): every text escaped, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Foreign {
    /// `namespace/name` of the snapshot the pod names.
    pub snapshot: String,
    /// The content's name (`status.boundSnapshotContentName`).
    pub content: String,
    /// What the content's `spec.snapshotRef` says instead, as the clause after "which".
    pub points_at: String,
    /// The content's `spec.snapshotRef` itself (unescaped), for callers with words of their
    /// own.
    pub back: Option<SnapshotRef>,
}

impl Foreign {
    /// What the content's back-pointer says, against the snapshot `namespace/name` of `uid`.
    fn points_at(back: Option<&SnapshotRef>, namespace: &str, name: &str, uid: Option<&str>) -> String {
        let Some(back) = back else {
            return "points back to no PodSnapshot (it has no spec.snapshotRef)".to_string();
        };
        let part = |p: Option<&str>| escape_within(p.unwrap_or("(none)"), 256).into_owned();
        let (ns, n) = (back.namespace.as_deref(), back.name.as_deref());
        if ns == Some(namespace) && n == Some(name) {
            // Only the UIDs differ: the snapshot was deleted and made again under its name.
            return format!(
                "belongs to an earlier PodSnapshot {}/{} (spec.snapshotRef.uid {}, this snapshot's uid {})",
                part(ns),
                part(n),
                part(back.uid.as_deref()),
                part(uid)
            );
        }
        format!(
            "belongs to PodSnapshot {}/{} (its spec.snapshotRef)",
            part(ns),
            part(n)
        )
    }
}

impl std::fmt::Display for Foreign {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PodSnapshot {} is bound to PodSnapshotContent {}, which {}",
            self.snapshot, self.content, self.points_at
        )
    }
}

/// Follows `reference` in `namespace` through `store`.
pub fn resolve(store: &(impl Lookup + ?Sized), namespace: &str, reference: &Reference<'_>) -> Resolved {
    match reference.kind {
        Kind::GpuCheckpoint => match store.checkpoint(namespace, &reference.name) {
            Some(checkpoint) => Resolved::Found { checkpoint },
            None => Resolved::Missing,
        },
        Kind::PodSnapshot => snapshot(store, namespace, reference),
    }
}

fn snapshot(store: &(impl Lookup + ?Sized), namespace: &str, reference: &Reference<'_>) -> Resolved {
    let snap = || {
        format!(
            "{}/{}",
            escape_within(namespace, 256),
            escape_within(&reference.name, 256)
        )
    };
    match store.snapshot(namespace, &reference.name) {
        SnapshotLookup::NotServed => Resolved::Unchecked(Unresolved::NotServed { snapshot: snap() }),
        SnapshotLookup::Missing => Resolved::Missing,
        SnapshotLookup::Unbound => Resolved::Unchecked(Unresolved::Unbound { snapshot: snap() }),
        SnapshotLookup::ContentMissing(content) => Resolved::Unchecked(Unresolved::ContentMissing {
            snapshot: snap(),
            content: escape_within(&content, 256).into_owned(),
        }),
        SnapshotLookup::Bound {
            content,
            snapshot_uid,
        } => {
            let name = escape_within(&content.name, 256).into_owned();
            let back = content.snapshot_ref.as_ref();
            if !back.is_some_and(|r| r.names(namespace, &reference.name, snapshot_uid.as_deref())) {
                return Resolved::Foreign(Foreign {
                    snapshot: snap(),
                    content: name,
                    points_at: Foreign::points_at(back, namespace, &reference.name, snapshot_uid.as_deref()),
                    back: back.cloned(),
                });
            }
            match &content.checkpoint {
                Ok(checkpoint) => Resolved::Found {
                    checkpoint: checkpoint.clone(),
                },
                Err(why) => Resolved::Unchecked(Unresolved::NoSource {
                    snapshot: snap(),
                    content: name,
                    why: why.clone(),
                }),
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::lookup::{Content, Inventory, NoInventory, RestorePod, SnapshotLookup};
    use rstest::rstest;

    /// A store of one `PodSnapshot` `ml/snap` of UID `snapshot_uid`, bound to content `c-1`
    /// whose back-pointer is `back`.
    struct Bound {
        back: Option<SnapshotRef>,
        snapshot_uid: Option<String>,
    }

    impl Lookup for Bound {
        fn checkpoint(&self, _: &str, _: &str) -> Option<Arc<Checkpoint>> {
            None
        }
        fn inventory(&self, _: &str) -> Result<Inventory, NoInventory> {
            Err(NoInventory::default())
        }
        fn restore_pod(&self, _: &str, _: &str) -> Option<Arc<RestorePod>> {
            None
        }
        fn snapshot(&self, namespace: &str, name: &str) -> SnapshotLookup {
            if (namespace, name) != ("ml", "snap") {
                return SnapshotLookup::Missing;
            }
            SnapshotLookup::Bound {
                content: Arc::new(Content {
                    name: "c-1".into(),
                    snapshot_ref: self.back.clone(),
                    checkpoint: Ok(Arc::new(Checkpoint {
                        manifest: miggate_compat::GpuManifest::default(),
                        container_name: Some("engine".into()),
                        origin: "PodSnapshotContent c-1".into(),
                    })),
                }),
                snapshot_uid: self.snapshot_uid.clone(),
            }
        }
    }

    fn back(namespace: &str, name: &str, uid: Option<&str>) -> Option<SnapshotRef> {
        Some(SnapshotRef {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            uid: uid.map(str::to_string),
        })
    }

    /// The content a snapshot is bound to must name it back; otherwise the restore is refused
    /// with what the content names instead (`None`: compared).
    #[rstest]
    #[case::ref_matches(back("ml", "snap", Some("u-1")), Some("u-1"), None)]
    #[case::other_name(
        back("ml", "other", Some("u-1")),
        Some("u-1"),
        Some("belongs to PodSnapshot ml/other (its spec.snapshotRef)")
    )]
    #[case::other_namespace(
        back("team-b", "snap", Some("u-9")),
        Some("u-1"),
        Some("belongs to PodSnapshot team-b/snap (its spec.snapshotRef)")
    )]
    #[case::uid_mismatch(
        back("ml", "snap", Some("u-old")),
        Some("u-1"),
        Some(
            "belongs to an earlier PodSnapshot ml/snap (spec.snapshotRef.uid u-old, this snapshot's uid u-1)"
        )
    )]
    #[case::uid_absent_on_the_content(back("ml", "snap", None), Some("u-1"), None)]
    #[case::uid_absent_on_the_snapshot(back("ml", "snap", Some("u-1")), None, None)]
    #[case::no_snapshot_ref(
        None,
        Some("u-1"),
        Some("points back to no PodSnapshot (it has no spec.snapshotRef)")
    )]
    fn a_snapshot_restores_only_a_content_that_names_it_back(
        #[case] back: Option<SnapshotRef>,
        #[case] snapshot_uid: Option<&str>,
        #[case] foreign: Option<&str>,
    ) {
        let store = Bound {
            back: back.clone(),
            snapshot_uid: snapshot_uid.map(str::to_string),
        };
        let reference = reference(None, Some("snap")).unwrap().unwrap();
        match (resolve(&store, "ml", &reference), foreign) {
            (Resolved::Found { checkpoint }, None) => assert_eq!(checkpoint.origin, "PodSnapshotContent c-1"),
            (Resolved::Foreign(f), Some(points_at)) => {
                assert_eq!(
                    f,
                    Foreign {
                        snapshot: "ml/snap".into(),
                        content: "c-1".into(),
                        points_at: points_at.into(),
                        back,
                    }
                );
            }
            (got, want) => panic!("got {got:?}, want {want:?}"),
        }
    }

    /// What a content names is quoted escaped: a tenant's snapshot cannot forge the message.
    #[test]
    fn a_foreign_back_pointer_is_quoted_escaped() {
        let store = Bound {
            back: back("b\nforged", "x\u{1b}[31m", None),
            snapshot_uid: None,
        };
        let reference = reference(None, Some("snap")).unwrap().unwrap();
        let Resolved::Foreign(f) = resolve(&store, "ml", &reference) else {
            panic!("not refused");
        };
        assert!(
            !f.points_at.contains('\n') && !f.points_at.contains('\u{1b}'),
            "{f:?}"
        );
    }

    #[test]
    fn a_pod_names_one_checkpoint_at_most() {
        assert_eq!(reference(None, None), Ok(None));
        assert_eq!(reference(Some(" "), None), Err(ReferenceError::Empty));
        assert_eq!(reference(Some("a"), Some("b")), Err(ReferenceError::Both));
        let ours = reference(Some(" ck "), None).ok().flatten();
        assert_eq!(
            ours.map(|r| (r.kind, r.name.into_owned())),
            Some((Kind::GpuCheckpoint, "ck".into()))
        );
        let theirs = reference(None, Some(" snap-1\n")).ok().flatten();
        assert_eq!(
            theirs.map(|r| (r.kind, r.name.into_owned())),
            Some((Kind::PodSnapshot, "snap-1".into()))
        );
        assert!(
            matches!(reference(None, Some("Snap_1")), Err(ReferenceError::Invalid(why)) if why.to_string().contains("not a valid PodSnapshot name"))
        );
        assert!(
            matches!(reference(None, Some("")), Err(ReferenceError::Invalid(why)) if why.to_string().contains("must name a PodSnapshot"))
        );
    }
}
