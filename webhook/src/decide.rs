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

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::sync::Arc;

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::response::Status;
use miggate_compat::escape::{escape, escape_within};
use miggate_compat::{
    CheckName, Mode, Options, Outcome, Report, Scope, Target, evaluate_target, parse_skip, reduce_digest,
};

use crate::lookup::{Lookup, NoInventory, NodeInventory, Source};
use crate::pod::{self, Choice};
pub use crate::pod::{Container, Spec as PodSpec};
pub use crate::refusal::Refusal;
use crate::resolve::{self, Kind, Reference, ReferenceError, Resolved};
use crate::review::{Operation, Review, Spec, Text};
use crate::store::Checkpoint;

pub use miggate_wire::annotations::{RESTORE_FROM, SKIP_CHECKS};
use miggate_wire::peer::SKIP_COMPAT_CHECK;
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
    /// The label value used in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ignored => "ignored",
            Verdict::Allowed => "allowed",
            Verdict::Warned => "warned",
            Verdict::Refused => "refused",
        }
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
    pub refused_by: Vec<&'static str>,
    /// The node inventory's source, when the decision read one.
    pub inventory_source: Option<Source>,
}

/// Decides one admission request, decoded with kube's types, against a store's lookups.
pub fn decide(req: &AdmissionRequest<DynamicObject>, store: &(impl Lookup + ?Sized)) -> Decision {
    decide_review(&Review::from(req), store)
}

/// Decides one admission request, read in place from its body ([`crate::review::parse`]).
pub fn decide_review(review: &Review<'_>, store: &(impl Lookup + ?Sized)) -> Decision {
    let judgement = match parse(review, store) {
        Ok(Parsed::Ignored) => return render(review, None),
        Ok(Parsed::Unchecked(warnings)) => Judgement::unchecked(warnings),
        Ok(Parsed::Restore(restore)) => evaluate(&restore, store),
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
    /// The waiver a pod's annotations give: `skip_checks` (`miggate.io/skip-checks`, read
    /// strictly) for any restore, and for a `PodSnapshot` restore the peer's `peer_skip`.
    fn read(skip_checks: Option<&str>, kind: Kind, peer_skip: Option<&str>) -> Result<Waiver, String> {
        let mut waiver = waiver(skip_checks)?;
        if kind == Kind::PodSnapshot
            && let Some(value) = peer_skip
        {
            waiver.all_by_peer = miggate_crds::peer::skip_compat_check(Some(value));
            if !miggate_crds::peer::parses_as_bool(value) {
                waiver.peer_unreadable = Some(escape_within(value.trim(), 64).into_owned());
            }
        }
        Ok(waiver)
    }

    /// The warnings the waiver gives before any check ran.
    fn notes(&self, warnings: &mut Vec<String>) {
        if let Some(value) = &self.peer_unreadable {
            warnings.push(format!(
                "miggate: annotation {SKIP_COMPAT_CHECK} \"{value}\" is not a boolean (Go's ParseBool): it waives nothing"
            ));
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
    Unchecked(Vec<String>),
    /// A restore to evaluate.
    Restore(RestoreRequest<'a>),
}

/// The result of [`evaluate`]: allowed (no refusal) with warnings, or refused.
#[derive(Debug)]
pub struct Judgement {
    /// Why it is refused; `None` when allowed.
    pub refusal: Option<Refusal>,
    /// Unknown facts, waivers, inventory notes.
    pub warnings: Vec<String>,
    /// The node inventory's source, when one was read.
    pub source: Option<Source>,
    /// A DRA pod's binding judged in exact mode: the allocated devices (`pool/device`, …),
    /// for the `exact-on-allocated` audit annotation.
    pub exact_on: Option<String>,
}

impl Judgement {
    /// Refused before any inventory was read.
    fn refused(refusal: Refusal, warnings: Vec<String>) -> Self {
        Judgement {
            refusal: Some(refusal),
            warnings,
            source: None,
            exact_on: None,
        }
    }

    /// Allowed without the node checks (nothing to check against), with why.
    fn unchecked(warnings: Vec<String>) -> Self {
        Judgement {
            refusal: None,
            warnings,
            source: None,
            exact_on: None,
        }
    }
}

/// The checks a `miggate.io/skip-checks` value waives, read strictly (a typo never looks like
/// a waiver); the error says why it waives nothing, for the refusal.
fn waiver(annotation: Option<&str>) -> Result<Waiver, String> {
    let Some(list) = annotation else {
        return Ok(Waiver::default());
    };
    match parse_skip(list) {
        Ok(checks) => Ok(Waiver {
            checks,
            annotated: true,
            ..Waiver::default()
        }),
        Err(e) => Err(format!(
            "annotation {SKIP_CHECKS} waives nothing: {}",
            escape(&e.to_string())
        )),
    }
}

/// Stage one: what the request asks, or why the request itself is refused. Reads the store
/// only for what the request cannot say: whether its caches are synced, and for a binding
/// (a Binding carries no annotations) the restore pod the pod cache knows.
pub fn parse<'a>(review: &'a Review<'a>, store: &(impl Lookup + ?Sized)) -> Result<Parsed<'a>, Refusal> {
    if review.operation != Operation::Create {
        return Ok(Parsed::Ignored);
    }
    if review.is_binding_create() {
        return parse_binding(review, store);
    }
    let is_pod = review.kind.group.is_empty() && review.kind.kind == "Pod" && review.sub_resource.is_none();
    let Some(obj) = review.object.as_ref().filter(|_| is_pod) else {
        return Ok(Parsed::Ignored);
    };
    let meta = &obj.meta;
    let reference = match resolve::reference(meta.restore_from.as_deref(), meta.peer.restore_from.as_deref())
    {
        Ok(Some(reference)) => reference,
        Ok(None) => return Ok(Parsed::Ignored),
        Err(e) => return Err(reference_refusal(e, pod_name(review))),
    };
    let Some(namespace) = review.namespace.as_deref().or(meta.namespace.as_deref()) else {
        return Err(Refusal::NoNamespace);
    };
    if !store.synced() {
        return Err(Refusal::StoreNotSynced {
            checkpoint: reference.display(namespace),
        });
    }
    if let Some(staleness) = store.too_stale() {
        return Err(Refusal::StoreStale {
            checkpoint: reference.display(namespace),
            staleness,
        });
    }
    let waiver = Waiver::read(
        meta.skip_checks.as_deref(),
        reference.kind,
        meta.peer.skip.as_deref(),
    )
    .map_err(|why| Refusal::SkipChecksInvalid { pod: None, why })?;
    let container_map = container_map(reference.kind, meta.peer.container_map.as_deref(), || {
        pod_name(review)
    })?;
    let spec: Cow<'a, PodSpec<'a>> = match &obj.spec {
        Some(Spec::Pod(spec)) => Cow::Borrowed(&**spec),
        Some(Spec::Raw(raw)) => match raw.decode() {
            Ok(spec) => Cow::Owned(spec),
            Err(e) => {
                return Err(Refusal::PodUnreadable {
                    pod: pod_name(review),
                    error: escape(&e.to_string()).into_owned(),
                });
            }
        },
        None => Cow::Owned(PodSpec::default()),
    };
    let node = spec.node_name.clone().filter(|n| !n.is_empty());
    Ok(Parsed::Restore(RestoreRequest {
        subject: Subject::Pod(spec),
        review,
        namespace,
        reference,
        waiver,
        node,
        container_map,
    }))
}

/// Why a pod's restore annotations name nothing to look up, as the refusal.
fn reference_refusal(e: ReferenceError, pod: String) -> Refusal {
    match e {
        ReferenceError::Empty => Refusal::RestoreFromEmpty { pod },
        ReferenceError::Invalid(why) => Refusal::RestoreFromInvalid { pod, why },
        ReferenceError::Both => Refusal::RestoreFromBoth { pod },
    }
}

/// A `PodSnapshot` restore's container map, its syntax checked now (which destinations it
/// may name waits for the content's captured container); ignored on any other restore.
fn container_map<'v>(
    kind: Kind,
    map: Option<&'v str>,
    pod: impl FnOnce() -> String,
) -> Result<Option<Cow<'v, str>>, Refusal> {
    let Some(map) = map.filter(|_| kind == Kind::PodSnapshot) else {
        return Ok(None);
    };
    miggate_crds::peer::check_container_map(map).map_err(|why| Refusal::ContainerMapInvalid {
        pod: pod(),
        why: escape_within(&why, 1024).into_owned(),
    })?;
    Ok(Some(Cow::Borrowed(map)))
}

/// A `pods/binding` CREATE: the scheduler (or a client) chose a node. The store says whether
/// the pod restores a checkpoint; everything else is ignored at the cost of one map lookup,
/// since every binding in the cluster passes through here.
fn parse_binding<'a>(review: &'a Review<'a>, store: &(impl Lookup + ?Sized)) -> Result<Parsed<'a>, Refusal> {
    let Some((namespace, name)) = review.bound_pod() else {
        return Ok(Parsed::Ignored);
    };
    if !store.synced() {
        return Ok(Parsed::Unchecked(vec![
            "miggate: binding not checked: the webhook's caches have not finished their first list".into(),
        ]));
    }
    let Some(restore) = store.restore_pod(namespace, name) else {
        return Ok(Parsed::Ignored);
    };
    // After the lookup: every binding in the cluster passes here, and only a restore pod's
    // needs the caches' staleness (eight clocks read).
    if let Some(staleness) = store.too_stale() {
        return Ok(Parsed::Unchecked(vec![format!(
            "miggate: binding not checked: {staleness}"
        )]));
    }
    let pod = || escape_within(&format!("{namespace}/{name}"), 512).into_owned();
    let Some(node) = review.binding_node() else {
        return Ok(Parsed::Unchecked(vec![format!(
            "miggate: binding of restore pod {} names no node; not checked",
            pod()
        )]));
    };
    let peer = restore.peer.as_ref();
    let reference = match resolve::reference(
        restore.restore_from.as_deref(),
        peer.map(|p| p.restore_from.as_str()),
    ) {
        Ok(Some(reference)) => reference.into_owned(),
        Ok(None) => return Ok(Parsed::Ignored),
        Err(e) => return Err(reference_refusal(e, pod())),
    };
    let waiver = Waiver::read(
        restore.skip_checks.as_deref(),
        reference.kind,
        peer.and_then(|p| p.skip.as_deref()),
    )
    .map_err(|why| Refusal::SkipChecksInvalid {
        pod: Some(pod()),
        why,
    })?;
    Ok(Parsed::Restore(RestoreRequest {
        subject: Subject::Binding(restore.clone()),
        review,
        namespace,
        reference,
        waiver,
        node: Some(node),
        container_map: None,
    }))
}

/// Stage two: the checkpoint and the node's inventory looked up, the checks run.
pub fn evaluate(restore: &RestoreRequest<'_>, store: &(impl Lookup + ?Sized)) -> Judgement {
    let mut warnings = Vec::new();
    restore.waiver.notes(&mut warnings);
    let (checkpoint, notes) = match resolve::resolve(store, restore.namespace, &restore.reference) {
        Resolved::Found { checkpoint, notes } => (checkpoint, notes),
        Resolved::Missing => return Judgement::refused(not_found(restore), Vec::new()),
        Resolved::Unchecked(why) => {
            warnings.push(format!(
                "miggate: restore not checked: {why}; the peer's agent decides"
            ));
            return Judgement::unchecked(warnings);
        }
    };
    warnings.extend(notes);
    if restore.waiver.all_by_peer {
        warnings.push(format!(
            "miggate: every check waived by {SKIP_COMPAT_CHECK}; checkpoint {} not compared",
            restore.checkpoint_ref()
        ));
        return Judgement::unchecked(warnings);
    }
    let mut judgement = match &restore.subject {
        Subject::Pod(spec) => evaluate_pod(restore, spec, &checkpoint, store),
        Subject::Binding(pod) => evaluate_binding(restore, pod, &checkpoint, store),
    };
    if !warnings.is_empty() {
        warnings.append(&mut judgement.warnings);
        judgement.warnings = warnings;
    }
    judgement
}

/// The refusal of a restore whose checkpoint does not exist.
fn not_found(restore: &RestoreRequest<'_>) -> Refusal {
    let binding = match (&restore.subject, restore.node.as_deref()) {
        (Subject::Binding(_), Some(node)) => Some((restore.pod(), escape_within(node, 256).into_owned())),
        _ => None,
    };
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

/// A restore pod's creation: the pod checks on each restore container, and the node checks
/// when it names a node. A `PodSnapshot` restore names each destination container in its
/// reason, as the peer's agent does (`engine-1: memory-limit: …`).
fn evaluate_pod(
    restore: &RestoreRequest<'_>,
    spec: &PodSpec<'_>,
    checkpoint: &Arc<Checkpoint>,
    store: &(impl Lookup + ?Sized),
) -> Judgement {
    let mut warnings = Vec::new();
    let containers = match restore_containers(restore, spec, checkpoint, &mut warnings) {
        Ok(containers) => containers,
        Err(refusal) => return Judgement::refused(refusal, Vec::new()),
    };
    let node_name = restore.node.as_deref();
    let node = match named_node(restore, store, &mut warnings) {
        Ok(node) => node,
        Err(refusal) => return Judgement::refused(refusal, warnings),
    };
    let judged = node.as_ref().map(|n| n.manifest_for(&checkpoint.manifest));
    let mut reasons: Vec<String> = Vec::new();
    let mut checks: Vec<&'static str> = Vec::new();
    for (destination, pod_facts) in &containers {
        let pod_known = *pod_facts != miggate_compat::Pod::default();
        let mut skip = restore.waiver.checks.clone();
        let digests = Digests::compare(checkpoint, pod_facts, &mut skip, &mut warnings);
        let target = match (node.as_ref(), judged.as_deref()) {
            (Some(node), Some(manifest)) => {
                Target::pod_on_node(pod_facts, manifest).with_slices_listed(node.slices_listed)
            }
            _ => Target::pod(pod_facts),
        };
        let options = Options {
            skip,
            ..Options::mode(Mode::Offer)
        };
        let report = evaluate_target(&checkpoint.manifest, target, &options);
        pod_report_warnings(restore, &report, &digests, pod_known, &mut warnings);
        if !report.compatible {
            reasons.push(match destination {
                Some(d) => format!("{d}: {}", report.reason),
                None => report.reason.clone(),
            });
            for check in report.refusals().map(|r| r.check.as_str()) {
                if !checks.contains(&check) {
                    checks.push(check);
                }
            }
        }
    }
    if containers.len() > 1 {
        dedup_in_order(&mut warnings);
    }
    let refusal = (!reasons.is_empty()).then(|| {
        let place = match (node_name, node.as_ref()) {
            (Some(n), Some(inv)) => format!(
                "on node {} (inventory from {}{})",
                escape_within(n, 256),
                inv.source.as_str(),
                fallback(inv)
            ),
            _ => "in this pod".to_string(),
        };
        Refusal::Incompatible {
            checkpoint: restore.checkpoint_ref(),
            of_pod: None,
            place,
            reason: reasons.join("; "),
            checks,
        }
    });
    Judgement {
        refusal,
        warnings,
        source: node.as_ref().map(|n| n.source),
        exact_on: None,
    }
}

/// Drops repeated warnings, keeping the first of each: several destinations of one restore
/// give the same node and source notes.
fn dedup_in_order(warnings: &mut Vec<String>) {
    let mut seen = std::collections::HashSet::new();
    warnings.retain(|w| seen.insert(w.clone()));
}

/// The containers a restore is compared with, each with the name its reasons carry: for a
/// `GpuCheckpoint`, the one restore container (unnamed in reasons, as always); for a
/// `PodSnapshot`, every destination of its container map, or the captured container itself.
fn restore_containers(
    restore: &RestoreRequest<'_>,
    spec: &PodSpec<'_>,
    checkpoint: &Checkpoint,
    warnings: &mut Vec<String>,
) -> Result<Vec<(Option<String>, miggate_compat::Pod)>, Refusal> {
    let captured = checkpoint.container_name.as_deref();
    let (Kind::PodSnapshot, Some(captured)) = (restore.reference.kind, captured) else {
        return restore_container_facts(restore, spec, checkpoint, warnings).map(|facts| vec![(None, facts)]);
    };
    let map = restore.container_map.as_deref();
    let destinations =
        miggate_crds::peer::destinations(map, captured).map_err(|why| Refusal::ContainerMapInvalid {
            pod: restore.pod(),
            why: escape_within(&why, 1024).into_owned(),
        })?;
    destinations
        .iter()
        .map(
            |name| match spec.containers.iter().find(|c| c.name == name.as_str()) {
                Some(c) => Ok((Some(escape_within(name, 128).into_owned()), pod::facts(c))),
                None => Err(container_not_found(restore, spec, name, map.is_some())),
            },
        )
        .collect()
}

/// The refusal of a restore into `name`, a container the pod does not have.
fn container_not_found(
    restore: &RestoreRequest<'_>,
    spec: &PodSpec<'_>,
    name: &str,
    mapped: bool,
) -> Refusal {
    Refusal::ContainerNotFound {
        checkpoint: restore.checkpoint_ref(),
        container: escape_within(name, 256).into_owned(),
        pod: restore.pod(),
        containers: spec
            .containers
            .iter()
            .map(|c| escape_within(&c.name, 128).into_owned())
            .collect(),
        mapped,
    }
}

/// The restore container's facts: the container the checkpoint names (refused when the pod
/// has none of that name), else the only one asking for GPUs; with neither, no facts and a
/// warning, since the node agent sees which container restores.
fn restore_container_facts(
    restore: &RestoreRequest<'_>,
    spec: &PodSpec<'_>,
    checkpoint: &Checkpoint,
    warnings: &mut Vec<String>,
) -> Result<miggate_compat::Pod, Refusal> {
    match pod::choose(spec, checkpoint.container_name.as_deref()) {
        Choice::Container(c) => Ok(pod::facts(c)),
        Choice::Missing(name) => Err(container_not_found(restore, spec, name, false)),
        Choice::Unknown(n) => {
            warnings.push(format!(
                "miggate: the restore container is unknown: checkpoint {} names none and {n} containers ask for GPUs; pod facts are not checked here, the node agent decides",
                restore.checkpoint_ref()
            ));
            Ok(miggate_compat::Pod::default())
        }
    }
}

/// The image digests of the checkpoint and of the pod's spec, compared.
struct Digests {
    /// The checkpoint's digest, reduced to `sha256:…`.
    source: Option<String>,
    /// The digest the restore container's image pins, if it pins one.
    target: Option<String>,
    /// Whether `image-digest` was waived here because they differ (not by the pod's waiver).
    waived_here: bool,
}

impl Digests {
    /// The spec pins an image by digest at best; the checkpoint holds the runtime's image id,
    /// which may be an index digest of the same image. A difference is not proof of another
    /// image, so it is waived here, with a warning, and left to the node agent, which sees the
    /// runtime's id: `skip` (the pod's waiver) gains `image-digest`.
    fn compare(
        checkpoint: &Checkpoint,
        pod_facts: &miggate_compat::Pod,
        skip: &mut BTreeSet<CheckName>,
        warnings: &mut Vec<String>,
    ) -> Digests {
        let source = checkpoint
            .manifest
            .pod
            .as_ref()
            .and_then(|p| p.image_digest.as_deref())
            .and_then(reduce_digest);
        let target = pod_facts.image_digest.as_deref().and_then(reduce_digest);
        let mut waived_here = false;
        if let (Some(s), Some(t)) = (&source, &target)
            && s != t
            && !skip.contains(&CheckName::IMAGE_DIGEST)
        {
            waived_here = true;
            skip.insert(CheckName::IMAGE_DIGEST);
            warnings.push(format!(
                "miggate: image-digest unknown: pod pins {t}, checkpoint has {s}; may be an index digest, the node agent decides"
            ));
        }
        Digests {
            source,
            target,
            waived_here,
        }
    }
}

/// The inventory of the node the pod names, with its notes as warnings; refused when no
/// source describes that node. `None` when the pod names no node.
fn named_node(
    restore: &RestoreRequest<'_>,
    store: &(impl Lookup + ?Sized),
    warnings: &mut Vec<String>,
) -> Result<Option<NodeInventory>, Refusal> {
    let Some(n) = restore.node.as_deref() else {
        return Ok(None);
    };
    match store.inventory(n) {
        Ok(inventory) => {
            inventory_warnings(n, &inventory, warnings);
            Ok(Some(inventory))
        }
        Err(missing) => {
            passed_over_warnings(n, &missing.passed_over, warnings);
            Err(Refusal::NodeNotFound {
                pod: restore.pod(),
                node: escape_within(n, 256).into_owned(),
                has: no_inventory(&missing),
                checkpoint: restore.checkpoint_ref(),
            })
        }
    }
}

/// The warnings a pod's report gives: the waived checks (when the pod waives any), the
/// unknowns (pod checks only when the pod's facts are known, an unpinned image said in its own
/// words) and the report's own.
fn pod_report_warnings(
    restore: &RestoreRequest<'_>,
    report: &Report,
    digests: &Digests,
    pod_known: bool,
    warnings: &mut Vec<String>,
) {
    if restore.waiver.annotated {
        waived_warning(report, warnings, |r| {
            !(digests.waived_here && r.check == CheckName::IMAGE_DIGEST)
        });
    }
    for r in report.results.iter().filter(|r| r.outcome == Outcome::Unknown) {
        if !pod_known && r.check.scope() == Scope::Pod {
            continue;
        }
        if r.check == CheckName::IMAGE_DIGEST && digests.target.is_none() && digests.source.is_some() {
            warnings.push(
                "miggate: image-digest unknown: the pod names its image without an @sha256: digest; the node agent compares the runtime's image id".into(),
            );
            continue;
        }
        unknown_warning(r, warnings);
    }
    report_warnings(report, warnings);
}

/// A restore pod's binding: the node checks in offer mode against the chosen node's
/// inventory. A node without one is allowed with warnings: the node agent decides.
fn evaluate_binding(
    restore: &RestoreRequest<'_>,
    pod_cached: &crate::lookup::RestorePod,
    checkpoint: &Arc<Checkpoint>,
    store: &(impl Lookup + ?Sized),
) -> Judgement {
    let node = restore.node.as_deref().unwrap_or_default();
    let inventory = match store.inventory(node) {
        Ok(inventory) => inventory,
        Err(missing) => return binding_unchecked(restore, node, &missing),
    };
    let mut warnings = Vec::new();
    inventory_warnings(node, &inventory, &mut warnings);
    let options = Options {
        skip: restore.waiver.checks.clone(),
        ..Options::mode(Mode::Offer)
    };
    // --- DRA (issue 20): exact mode on the devices the pod's claims were allocated, when
    // known (crate::allocation); otherwise offer mode against the whole node.
    let at = crate::allocation::at_binding(
        store,
        restore.namespace,
        pod_cached,
        node,
        &checkpoint.manifest,
        &inventory,
        &options.skip,
    );
    let (report, exact_on) = crate::allocation::binding_report(
        at,
        || {
            let judged = inventory.manifest_for(&checkpoint.manifest);
            let target = Target::node(&judged).with_slices_listed(inventory.slices_listed);
            evaluate_target(&checkpoint.manifest, target, &options)
        },
        &mut warnings,
    );
    let on_devices = exact_on
        .as_deref()
        .map(|d| {
            format!(
                ", exact check on the allocated devices {}",
                escape_within(d, 1024)
            )
        })
        .unwrap_or_default();
    // --- end DRA
    binding_report_warnings(restore, &report, &mut warnings);
    let requests = binding_gpu_requests(restore, pod_cached, checkpoint, &inventory, &options.skip);
    let mut checks: Vec<&'static str> = report.refusals().map(|r| r.check.as_str()).collect();
    let mut reasons: Vec<String> = Vec::new();
    if !report.compatible {
        reasons.push(report.reason.clone());
    }
    if !requests.is_empty() {
        if !checks.contains(&CheckName::GPU_REQUEST.as_str()) {
            checks.push(CheckName::GPU_REQUEST.as_str());
        }
        reasons.extend(requests);
    }
    let refusal = (!reasons.is_empty()).then(|| Refusal::Incompatible {
        checkpoint: restore.checkpoint_ref(),
        of_pod: Some(restore.pod()),
        place: format!(
            "on node {} (inventory from {}{}{on_devices})",
            escape_within(node, 256),
            inventory.source.as_str(),
            fallback(&inventory)
        ),
        reason: reasons.join("; "),
        checks,
    });
    Judgement {
        refusal,
        warnings,
        source: Some(inventory.source),
        exact_on,
    }
}

/// `gpu-request` of each restore container against the node it is being bound to: the node's
/// MIG strategy, which the pod's creation could not know, decides what `nvidia.com/gpu` gives
/// (whole GPUs only under `mixed` and `none`, slices only under `single`), so a one-slice
/// checkpoint asking `nvidia.com/gpu: 1` is refused on a mixed-strategy node. The containers
/// are the creation's: the one the checkpoint names (or the only one asking for GPUs), or each
/// destination of a `PodSnapshot`'s container map; one that asks for no GPU was judged at
/// creation. The refusals' reasons, each prefixed with its destination for the peer's pods;
/// none when the node's strategy is unknown or the pod's waiver covers `gpu-request`.
fn binding_gpu_requests(
    restore: &RestoreRequest<'_>,
    pod_cached: &crate::lookup::RestorePod,
    checkpoint: &Checkpoint,
    inventory: &NodeInventory,
    skip: &BTreeSet<CheckName>,
) -> Vec<String> {
    let judged = inventory.manifest_for(&checkpoint.manifest);
    let strategy_known = judged.nvidia.as_ref().and_then(|n| n.mig_strategy).is_some();
    if skip.contains(&CheckName::GPU_REQUEST) || !strategy_known || pod_cached.gpu_asks.is_empty() {
        return Vec::new();
    }
    let asks = &pod_cached.gpu_asks;
    let find = |name: &str| asks.iter().find(|a| a.container == name);
    let chosen: Vec<(Option<&str>, &crate::lookup::GpuAsk)> =
        match (restore.reference.kind, checkpoint.container_name.as_deref()) {
            (Kind::PodSnapshot, Some(captured)) => {
                let Ok(destinations) =
                    miggate_crds::peer::destinations(restore.container_map.as_deref(), captured)
                else {
                    // A map that cannot be read was refused at creation.
                    return Vec::new();
                };
                destinations
                    .iter()
                    .filter_map(|d| find(d).map(|a| (Some(a.container.as_str()), a)))
                    .collect()
            }
            (_, Some(named)) => find(named).map(|a| (None, a)).into_iter().collect(),
            (_, None) => match asks.as_slice() {
                [only] => vec![(None, only)],
                _ => Vec::new(),
            },
        };
    let options = Options {
        skip: CheckName::ALL
            .into_iter()
            .filter(|c| *c != CheckName::GPU_REQUEST)
            .collect(),
        ..Options::mode(Mode::Offer)
    };
    let mut reasons = Vec::new();
    for (destination, ask) in chosen {
        let pod = ask.pod_facts();
        let target = Target::pod_on_node(&pod, &judged).with_slices_listed(inventory.slices_listed);
        let report = evaluate_target(&checkpoint.manifest, target, &options);
        if !report.compatible {
            reasons.push(match destination {
                Some(d) => format!("{}: {}", escape_within(d, 128), report.reason),
                None => report.reason,
            });
        }
    }
    reasons
}

/// A binding to a node no source describes: allowed unchecked, with why as warnings (cut to
/// 256 bytes each, so the unusable sources follow one per warning).
fn binding_unchecked(restore: &RestoreRequest<'_>, node: &str, missing: &NoInventory) -> Judgement {
    let has = if missing.passed_over.is_empty() {
        format!("no GPU inventory ({NO_INVENTORY})")
    } else {
        "no usable GPU inventory (the sources present cannot be read, as follows)".to_string()
    };
    let mut warnings = vec![format!(
        "miggate: node {} has {has}; binding of restore pod {} not checked, the node agent decides",
        escape_within(node, 256),
        restore.pod()
    )];
    passed_over_warnings(node, &missing.passed_over, &mut warnings);
    Judgement::unchecked(warnings)
}

/// The warnings a binding's report gives: the waived node checks (when the pod waives any),
/// every unknown and the report's own.
fn binding_report_warnings(restore: &RestoreRequest<'_>, report: &Report, warnings: &mut Vec<String>) {
    if restore.waiver.annotated {
        waived_warning(report, warnings, |r| r.check.scope() != Scope::Pod);
    }
    for r in report.results.iter().filter(|r| r.outcome == Outcome::Unknown) {
        unknown_warning(r, warnings);
    }
    report_warnings(report, warnings);
}

/// "waived by …" naming the skipped checks `keep` accepts, when there are any.
fn waived_warning(
    report: &Report,
    warnings: &mut Vec<String>,
    keep: impl Fn(&miggate_compat::CheckResult) -> bool,
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
        warnings.push(format!("miggate: waived by {SKIP_CHECKS}: {line}"));
    }
}

fn unknown_warning(r: &miggate_compat::CheckResult, warnings: &mut Vec<String>) {
    warnings.push(format!(
        "miggate: {} unknown: {} (source {}, target {})",
        r.check, r.message, r.source, r.target
    ));
}

fn report_warnings(report: &Report, warnings: &mut Vec<String>) {
    for w in &report.warnings {
        warnings.push(format!("miggate: {w}"));
    }
}

/// The sources a missing inventory was looked for in, for messages.
const NO_INVENTORY: &str = "no GpuNode, DRA ResourceSlices or GFD labels";

/// What a node without an inventory has, for messages: nothing at all, or sources present
/// but unreadable, with why (an operator told "no GpuNode" while one exists would look in
/// the wrong place).
fn no_inventory(missing: &NoInventory) -> String {
    if missing.passed_over.is_empty() {
        format!("no GPU inventory ({NO_INVENTORY})")
    } else {
        format!("no usable GPU inventory: {}", missing.passed_over.join("; "))
    }
}

/// The tail of "inventory from X" when better sources were passed over for X.
/// Under DynamicMIG the refusal says so too: the node's slices are what it could make.
fn fallback(inventory: &NodeInventory) -> String {
    let on_demand = if inventory.supply.is_some() {
        ", DynamicMIG: partitions on demand"
    } else {
        ""
    };
    if inventory.passed_over.is_empty() {
        on_demand.to_string()
    } else {
        format!("{on_demand}, passed over: {}", inventory.passed_over.join("; "))
    }
}

/// One warning per source passed over (each is cut to a warning's length on its own).
fn passed_over_warnings(node: &str, passed_over: &[String], warnings: &mut Vec<String>) {
    for why in passed_over {
        warnings.push(format!("miggate: node {}: {why}", escape_within(node, 256)));
    }
}

/// Warnings an inventory brings: its source when it is not a `GpuNode` (a partial view), and
/// what the source could not say.
fn inventory_warnings(node: &str, inventory: &NodeInventory, warnings: &mut Vec<String>) {
    if inventory.source != Source::GpuNode {
        let why = if inventory.passed_over.is_empty() {
            "no GpuNode"
        } else {
            "a better source cannot be read"
        };
        warnings.push(format!(
            "miggate: node {} inventory from {} ({why}): facts it does not publish are unknown",
            escape_within(node, 256),
            inventory.source.as_str()
        ));
    }
    for note in &inventory.notes {
        warnings.push(format!("miggate: node {}: {note}", escape_within(node, 256)));
    }
}

/// Stage three: the judgement as the response to send; `None` for a request not looked at.
pub fn render(review: &Review<'_>, judgement: Option<Judgement>) -> Decision {
    let mut response = review.allowed();
    let Some(judgement) = judgement else {
        return Decision {
            response,
            verdict: Verdict::Ignored,
            refused_by: Vec::new(),
            inventory_source: None,
        };
    };
    response.warnings = bounded(judgement.warnings);
    let (verdict, refused_by) = match &judgement.refusal {
        Some(refusal) => {
            response.allowed = false;
            response.result = Status::failure(
                &escape_within(&refusal.to_string(), MAX_MESSAGE_BYTES),
                "Forbidden",
            )
            .with_code(403);
            (Verdict::Refused, refusal.refused_by())
        }
        None if response.warnings.is_none() => (Verdict::Allowed, Vec::new()),
        None => (Verdict::Warned, Vec::new()),
    };
    if let Some(src) = judgement.source {
        response
            .audit_annotations
            .insert(INVENTORY_SOURCE.to_string(), src.as_str().to_string());
    }
    crate::allocation::audit(&mut response, judgement.exact_on.as_deref());
    Decision {
        response,
        verdict,
        refused_by,
        inventory_source: judgement.source,
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

/// At most [`MAX_WARNINGS`] warnings of at most [`MAX_WARNING_BYTES`] each, escaped; the last
/// says how many were left out.
fn bounded(warnings: Vec<String>) -> Option<Vec<String>> {
    if warnings.is_empty() {
        return None;
    }
    let total = warnings.len();
    let keep = if total > MAX_WARNINGS {
        MAX_WARNINGS - 1
    } else {
        total
    };
    let mut out: Vec<String> = warnings
        .iter()
        .take(keep)
        .map(|w| escape_within(w, MAX_WARNING_BYTES).into_owned())
        .collect();
    if total > keep {
        let mut more = String::new();
        let _ = write!(more, "miggate: {} more warnings not shown", total - keep);
        out.push(more);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_bounded() {
        let many: Vec<String> = (0..30).map(|i| format!("w{i} {}", "x".repeat(400))).collect();
        let out = bounded(many).unwrap_or_default();
        assert_eq!(out.len(), MAX_WARNINGS);
        assert!(out.iter().all(|w| w.len() <= MAX_WARNING_BYTES + 40));
        assert_eq!(out[MAX_WARNINGS - 1], "miggate: 19 more warnings not shown");
        assert!(bounded(Vec::new()).is_none());
    }
}
