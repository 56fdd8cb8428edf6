//! The admission decision in three stages, shared by a restore pod's CREATE and its
//! `pods/binding`: **parse** (the review, and for a binding the pod cache, into a
//! [`RestoreRequest`], or a [`Refusal`] of the request itself), **evaluate** (the checkpoint
//! and the node's inventory looked up, `miggate-compat`'s checks run, a [`Judgement`]) and
//! **render** (the judgement as kube's `AdmissionResponse`, warnings bounded). Pure and
//! synchronous: no I/O, no clock, so every answer can be tested from recorded reviews.
//!
//! A pod's CREATE gets the pod checks, and the node checks when the pod names its node; a
//! binding of a restore pod gets the node checks in offer mode against the chosen node's
//! inventory. Every decision that reads a node inventory names its source: in the refusal
//! message, in a warning when the source is not a `GpuNode`, in the `inventory-source` audit
//! annotation and in the log.
//!
//! One file per stage: `parse.rs` (the review into a [`RestoreRequest`]), `pod.rs` (a restore
//! pod's creation evaluated), `binding.rs` (its binding evaluated, the DRA exact check
//! included), `warnings.rs` (every warning's words, one enum) and `render.rs` (the
//! `AdmissionResponse`). This file holds the types they share and the entry points.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Arc;

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use miggate_compat::CheckName;
use miggate_compat::escape::escape_within;

use crate::lookup::{Lookup, Source};
pub use crate::pod::{Container, Spec as PodSpec};
pub use crate::refusal::{Reason, Refusal, RefusedBy};
use crate::resolve::{self, Kind, Reference, Resolved};
use crate::review::{Review, Text};
pub use crate::selector::RestorePodSelector;

pub use miggate_wire::annotations::{RESTORE_FROM, SKIP_CHECKS};
pub use parse::parse;
pub use render::render;
pub use warnings::Warning;

pub mod audit;
mod binding;
pub(crate) mod parse;
mod pod;
mod render;
mod warnings;

/// At most this many warnings go back to the client: the apiserver may truncate a long list.
pub const MAX_WARNINGS: usize = 12;
/// Each warning is cut to this many bytes, the length Kubernetes keeps.
pub const MAX_WARNING_BYTES: usize = 256;
/// A refusal message is cut to this many bytes.
pub const MAX_MESSAGE_BYTES: usize = 8 * 1024;
/// The audit annotation naming the inventory source a decision read.
pub const INVENTORY_SOURCE: &str = "inventory-source";

/// How a request was answered, for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Not a restore pod's creation: allowed without a look.
    Ignored,
    /// A restore pod, compatible, nothing unknown.
    Allowed,
    /// A restore pod, compatible, with warnings (unknown facts, waived checks).
    Warned,
    /// A restore pod refused.
    Refused,
}

impl Verdict {
    /// The label value used in metrics and logs ([`crate::outcome::Outcome`] spells it).
    pub fn as_str(self) -> &'static str {
        crate::outcome::Outcome::from(self).as_str()
    }
}

/// An answer with what it rests on.
#[derive(Debug)]
pub struct Decision {
    /// The response to send (uid echoed).
    pub response: AdmissionResponse,
    /// How it was answered.
    pub verdict: Verdict,
    /// What refused: check names, or a reason such as `checkpoint-not-found`
    /// ([`Refusal::refused_by`]).
    pub refused_by: Vec<RefusedBy>,
    /// The node inventory's source, when the decision read one.
    pub inventory_source: Option<Source>,
}

/// Decides one admission request, decoded with kube's types, against a store's lookups, with
/// no `--restore-pod-selector`.
pub fn decide(req: &AdmissionRequest<DynamicObject>, store: &(impl Lookup + ?Sized)) -> Decision {
    decide_with(req, store, None)
}

/// [`decide`] under `--restore-pod-selector` (`None`: every pod is watched).
pub fn decide_with(
    req: &AdmissionRequest<DynamicObject>,
    store: &(impl Lookup + ?Sized),
    selector: Option<&RestorePodSelector>,
) -> Decision {
    decide_review_with(&Review::from(req), store, selector)
}

/// Decides one admission request, read in place from its body ([`crate::review::parse`]),
/// with no `--restore-pod-selector`.
pub fn decide_review(review: &Review<'_>, store: &(impl Lookup + ?Sized)) -> Decision {
    decide_review_with(review, store, None)
}

/// [`decide_review`] under `--restore-pod-selector` (`None`: every pod is watched): a restore
/// pod's creation the selector does not select is refused, since the pod watch would never
/// send it and its binding would pass unchecked.
pub fn decide_review_with(
    review: &Review<'_>,
    store: &(impl Lookup + ?Sized),
    selector: Option<&RestorePodSelector>,
) -> Decision {
    let judgement = match parse(review, store) {
        Ok(Parsed::Ignored) => return render(review, None),
        Ok(Parsed::Unchecked(warnings)) => Judgement::unchecked(warnings),
        Ok(Parsed::Restore(restore)) => {
            let mut judgement = match parse::unselected(&restore, selector) {
                Some(refusal) => Judgement::refused(refusal, Vec::new()),
                None => evaluate(&restore, store),
            };
            judgement.subject = audit::Subject::of(&restore);
            judgement
        }
        Err(refusal) => Judgement::refused(refusal, Vec::new()),
    };
    render(review, Some(judgement))
}

/// What a request asks for: which pod restores which checkpoint, with which waiver, where.
#[derive(Debug)]
pub struct RestoreRequest<'a> {
    /// A pod's creation, or its binding to a node.
    pub subject: Subject<'a>,
    /// The request, for the names messages give.
    pub review: &'a Review<'a>,
    /// The namespace of the pod and of its checkpoint.
    pub namespace: &'a str,
    /// What the pod restores: a `GpuCheckpoint` or the Go peer's `PodSnapshot`, by name.
    pub reference: Reference<'a>,
    /// The checks `miggate.io/skip-checks` (or the peer's skip) waives.
    pub waiver: Waiver,
    /// The node the pod names (its `spec.nodeName`) or is being bound to.
    pub node: Option<Text<'a>>,
    /// `nvidia.com/restore-container-map` of a `PodSnapshot` restore, when present.
    pub container_map: Option<Cow<'a, str>>,
}

impl RestoreRequest<'_> {
    /// `namespace/name` of the pod, escaped, for messages (built only when one is written).
    pub fn pod(&self) -> String {
        match (&self.subject, self.review.bound_pod()) {
            (Subject::Binding(_), Some((namespace, name))) => {
                escape_within(&format!("{namespace}/{name}"), 512).into_owned()
            }
            _ => pod_name(self.review),
        }
    }

    /// `namespace/name` of the checkpoint, escaped, for messages (the kind named when it is
    /// the peer's `PodSnapshot`).
    pub fn checkpoint_ref(&self) -> String {
        self.reference.display(self.namespace)
    }
}

/// A pod's creation or its binding, with what each path reads.
#[derive(Debug)]
pub enum Subject<'a> {
    /// A restore pod's CREATE, with its spec (borrowed when the review was read with it
    /// decoded, [`crate::review::parse_restore`]).
    Pod(Cow<'a, PodSpec<'a>>),
    /// A `pods/binding` CREATE of a restore pod the pod cache knows (what the cache keeps of
    /// it: its claims, for the exact check on a DRA allocation).
    Binding(Arc<crate::lookup::RestorePod>),
}

/// The checks a pod waives, and whether it carries the annotation at all (an annotation that
/// waives only what does not apply still gets its warning).
#[derive(Debug, Default)]
pub struct Waiver {
    /// The checks `miggate.io/skip-checks` names, read strictly; empty without the annotation.
    pub checks: BTreeSet<CheckName>,
    /// Whether `miggate.io/skip-checks` is present.
    pub annotated: bool,
    /// A `PodSnapshot` restore with `nvidia.com/snapshot-skip-compat-check` true (Go's
    /// `ParseBool`): every check waived, as the peer's agent waives them.
    pub all_by_peer: bool,
    /// The peer's skip annotation present with a value Go's `ParseBool` does not read: it
    /// waives nothing, and a warning says so.
    pub peer_unreadable: Option<String>,
}

impl Waiver {
    /// The warnings the waiver gives before any check ran.
    fn notes(&self, warnings: &mut Vec<Warning>) {
        if let Some(value) = &self.peer_unreadable {
            warnings.push(Warning::PeerSkipUnreadable { value: value.clone() });
        }
    }
}

/// The result of [`parse`].
#[derive(Debug)]
pub enum Parsed<'a> {
    /// Not a restore: allowed without a look.
    Ignored,
    /// A restore binding that cannot be checked (caches not synced, no node named): allowed,
    /// with these warnings.
    Unchecked(Vec<Warning>),
    /// A restore to evaluate.
    Restore(RestoreRequest<'a>),
}

/// The result of [`evaluate`]: allowed (no refusal) with warnings, or refused.
#[derive(Debug)]
pub struct Judgement {
    /// Why it is refused; `None` when allowed.
    pub refusal: Option<Refusal>,
    /// Unknown facts, waivers, inventory notes; rendered to text only in the response.
    pub warnings: Vec<Warning>,
    /// The node inventory's source, when one was read.
    pub source: Option<Source>,
    /// A DRA pod's binding judged in exact mode: the allocated devices (`pool/device`, …),
    /// for the `exact-on-allocated` audit annotation.
    pub exact_on: Option<String>,
    /// The checkpoint and node the request names, for the audit annotations.
    pub subject: audit::Subject,
}

impl Judgement {
    /// Refused before any inventory was read.
    fn refused(refusal: Refusal, warnings: Vec<Warning>) -> Self {
        Judgement {
            refusal: Some(refusal),
            warnings,
            source: None,
            exact_on: None,
            subject: audit::Subject::default(),
        }
    }

    /// Allowed without the node checks (nothing to check against), with why.
    fn unchecked(warnings: Vec<Warning>) -> Self {
        Judgement {
            refusal: None,
            warnings,
            source: None,
            exact_on: None,
            subject: audit::Subject::default(),
        }
    }
}

/// Stage two: the checkpoint and the node's inventory looked up, the checks run.
pub fn evaluate(restore: &RestoreRequest<'_>, store: &(impl Lookup + ?Sized)) -> Judgement {
    let mut warnings = Vec::new();
    restore.waiver.notes(&mut warnings);
    let checkpoint = match resolve::resolve(store, restore.namespace, &restore.reference) {
        Resolved::Found { checkpoint } => checkpoint,
        Resolved::Missing => return Judgement::refused(not_found(restore), Vec::new()),
        Resolved::Foreign(foreign) => {
            let refusal = Refusal::SnapshotContentMismatch {
                foreign: Box::new(foreign),
                binding: binding_of(restore),
            };
            return Judgement::refused(refusal, Vec::new());
        }
        Resolved::Unchecked(why) => {
            warnings.push(Warning::RestoreUnchecked { why });
            return Judgement::unchecked(warnings);
        }
    };
    if restore.waiver.all_by_peer {
        warnings.push(Warning::AllWaivedByPeer {
            checkpoint: restore.checkpoint_ref(),
        });
        return Judgement::unchecked(warnings);
    }
    let mut judgement = match &restore.subject {
        Subject::Pod(spec) => pod::evaluate(restore, spec, &checkpoint, store),
        Subject::Binding(pod) => binding::evaluate(restore, pod, &checkpoint, store),
    };
    if !warnings.is_empty() {
        warnings.append(&mut judgement.warnings);
        judgement.warnings = warnings;
    }
    judgement
}

/// On the binding path, the pod and the node it is being bound to, for a refusal's words.
fn binding_of(restore: &RestoreRequest<'_>) -> Option<(String, String)> {
    match (&restore.subject, restore.node.as_deref()) {
        (Subject::Binding(_), Some(node)) => Some((restore.pod(), escape_within(node, 256).into_owned())),
        _ => None,
    }
}

/// The refusal of a restore whose checkpoint does not exist.
fn not_found(restore: &RestoreRequest<'_>) -> Refusal {
    let binding = binding_of(restore);
    let namespace = escape_within(restore.namespace, 256).into_owned();
    match restore.reference.kind {
        Kind::GpuCheckpoint => Refusal::CheckpointNotFound {
            checkpoint: restore.checkpoint_ref(),
            namespace,
            binding,
        },
        Kind::PodSnapshot => Refusal::SnapshotNotFound {
            snapshot: format!("{namespace}/{}", escape_within(&restore.reference.name, 256)),
            namespace,
            binding,
        },
    }
}

/// `namespace/name` of the pod, or its generateName, for messages.
fn pod_name(review: &Review<'_>) -> String {
    let meta = review.object.as_ref().map(|o| &o.meta);
    let ns = review
        .namespace
        .as_deref()
        .or(meta.and_then(|m| m.namespace.as_deref()))
        .unwrap_or("");
    let name = meta
        .and_then(|m| m.name.as_deref())
        .filter(|n| !n.is_empty())
        .or((!review.name.is_empty()).then_some(review.name.as_ref()))
        .map(|n| n.to_string())
        .or_else(|| {
            meta.and_then(|m| m.generate_name.as_ref())
                .map(|g| format!("{g}*"))
        })
        .unwrap_or_else(|| "(unnamed)".to_string());
    escape_within(&format!("{ns}/{name}"), 512).into_owned()
}

impl From<crate::decide::Verdict> for crate::outcome::Outcome {
    fn from(verdict: crate::decide::Verdict) -> Self {
        use crate::decide::Verdict;
        match verdict {
            Verdict::Ignored => crate::outcome::Outcome::Ignored,
            Verdict::Allowed => crate::outcome::Outcome::Allowed,
            Verdict::Warned => crate::outcome::Outcome::Warned,
            Verdict::Refused => crate::outcome::Outcome::Refused,
        }
    }
}
