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

use std::borrow::Cow;
use std::sync::Arc;

use miggate_compat::escape::escape_within;
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
    Invalid(String),
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
            .map_err(|why| ReferenceError::Invalid(escape_within(&why.to_string(), 1024).into_owned())),
    }
}

/// A reference followed.
#[derive(Debug, Clone)]
pub enum Resolved {
    /// The checkpoint to compare, with notes on how it was found (warnings).
    Found {
        /// Its facts and captured container.
        checkpoint: Arc<Checkpoint>,
        /// What the decision should say about where the facts came from.
        notes: Vec<String>,
    },
    /// No object of that name: refused, since a restore of it cannot happen.
    Missing,
    /// Nothing to compare, and why (escaped, for a warning): admitted, the peer's agent
    /// decides.
    Unchecked(String),
}

/// Follows `reference` in `namespace` through `store`.
pub fn resolve(store: &(impl Lookup + ?Sized), namespace: &str, reference: &Reference<'_>) -> Resolved {
    match reference.kind {
        Kind::GpuCheckpoint => match store.checkpoint(namespace, &reference.name) {
            Some(checkpoint) => Resolved::Found {
                checkpoint,
                notes: Vec::new(),
            },
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
    let unchecked = Resolved::Unchecked;
    match store.snapshot(namespace, &reference.name) {
        SnapshotLookup::NotServed => unchecked(format!(
            "PodSnapshot {} cannot be looked up, this cluster does not serve {} PodSnapshots",
            snap(),
            peer::API_VERSION
        )),
        SnapshotLookup::Missing => Resolved::Missing,
        SnapshotLookup::Unbound => unchecked(format!(
            "PodSnapshot {} is not bound to a PodSnapshotContent yet, nothing compared",
            snap()
        )),
        SnapshotLookup::ContentMissing(content) => unchecked(format!(
            "PodSnapshot {} is bound to PodSnapshotContent {}, which does not exist",
            snap(),
            escape_within(&content, 256)
        )),
        SnapshotLookup::Bound(content) => {
            let name = escape_within(&content.name, 256).into_owned();
            let checkpoint = match &content.checkpoint {
                Ok(checkpoint) => checkpoint.clone(),
                Err(why) => {
                    return unchecked(format!("PodSnapshotContent {name} {why}, nothing compared"));
                }
            };
            let mut notes = Vec::new();
            let points_back = content
                .snapshot_ref
                .as_ref()
                .is_none_or(|(ns, n)| ns == namespace && *n == *reference.name);
            if !points_back {
                notes.push(format!(
                    "miggate: PodSnapshotContent {name} of PodSnapshot {} points back to another snapshot; compared all the same",
                    snap()
                ));
            }
            Resolved::Found { checkpoint, notes }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            matches!(reference(None, Some("Snap_1")), Err(ReferenceError::Invalid(why)) if why.contains("not a valid PodSnapshot name"))
        );
        assert!(
            matches!(reference(None, Some("")), Err(ReferenceError::Invalid(why)) if why.contains("must name a PodSnapshot"))
        );
    }
}
