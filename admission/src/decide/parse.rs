//! Stage one: the review (and for a binding, the pod cache) read into a [`RestoreRequest`],
//! or the [`Refusal`] of the request itself. The one place a restore's annotations are read:
//! its reference, its waiver (`miggate.io/skip-checks` and the peer's skip) and the peer's
//! container map. The mutating paths read a binding through here too.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use miggate_compat::escape::escape_within;
use miggate_compat::parse_skip;

use super::warnings::Warning;
use super::{Parsed, PodSpec, RestoreRequest, Subject, Waiver, pod_name};
use crate::lookup::Lookup;
use crate::refusal::{Refusal, SpecUnreadable, WaivesNothing};
use crate::resolve::{self, Kind, Reference, ReferenceError};
use crate::restore_annotations::RestoreAnnotations;
use crate::review::{Object, Operation, Review, Spec};
use crate::selector::RestorePodSelector;

impl Waiver {
    /// The waiver a pod's annotations give: `miggate.io/skip-checks` (read strictly) for any
    /// restore, and for a `PodSnapshot` restore the peer's `nvidia.com/snapshot-skip-compat-check`.
    fn read<V: AsRef<str>>(annotations: &RestoreAnnotations<V>, kind: Kind) -> Result<Waiver, WaivesNothing> {
        let mut waiver = waiver(annotations.skip_checks.as_ref().map(AsRef::as_ref))?;
        if kind == Kind::PodSnapshot
            && let Some(value) = annotations.peer_skip.as_ref().map(AsRef::as_ref)
        {
            waiver.all_by_peer = miggate_crds::peer::skip_compat_check(Some(value));
            if !miggate_crds::peer::parses_as_bool(value) {
                waiver.peer_unreadable = Some(escape_within(value.trim(), 64).into_owned());
            }
        }
        Ok(waiver)
    }
}

/// The checks a `miggate.io/skip-checks` value waives, read strictly (a typo never looks like
/// a waiver); the error says why it waives nothing, for the refusal.
fn waiver(annotation: Option<&str>) -> Result<Waiver, WaivesNothing> {
    let Some(list) = annotation else {
        return Ok(Waiver::default());
    };
    match parse_skip(list) {
        Ok(checks) => Ok(Waiver {
            checks,
            annotated: true,
            ..Waiver::default()
        }),
        Err(e) => Err(WaivesNothing(Arc::new(e))),
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
    let Some(obj) = pod_create(review) else {
        return Ok(Parsed::Ignored);
    };
    let meta = &obj.meta;
    let reference = match restore_reference(&meta.annotations) {
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
    let waiver = Waiver::read(&meta.annotations, reference.kind)
        .map_err(|why| Refusal::SkipChecksInvalid { pod: None, why })?;
    let container_map = container_map(
        reference.kind,
        meta.annotations.peer_container_map.as_deref(),
        || pod_name(review),
    )?;
    let spec: Cow<'a, PodSpec<'a>> = match &obj.spec {
        Some(Spec::Pod(spec)) => Cow::Borrowed(&**spec),
        Some(Spec::Raw(raw)) => match raw.decode() {
            Ok(spec) => Cow::Owned(spec),
            Err(e) => {
                return Err(Refusal::PodUnreadable {
                    pod: pod_name(review),
                    error: SpecUnreadable(Arc::new(e)),
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

/// The refusal of a restore pod's creation that `selector` does not select: the pod watch
/// sends only the pods it selects, so the binding check would never see this one. `None` for
/// a selected pod, for a binding (its pod came from that watch), and without a selector.
pub(crate) fn unselected(
    restore: &RestoreRequest<'_>,
    selector: Option<&RestorePodSelector>,
) -> Option<Refusal> {
    let selector = selector.filter(|s| !s.selects_all())?;
    if !matches!(restore.subject, Subject::Pod(_)) {
        return None;
    }
    // Read only here: a restore pod's creation under a selector. Labels that are not a map
    // of strings never come from the API server; such a pod is not taken as selected.
    let selected = match restore.review.object.as_ref().and_then(|o| o.meta.labels) {
        None => selector.matches(&BTreeMap::new()),
        Some(labels) => labels.decode().is_ok_and(|labels| selector.matches(&labels)),
    };
    (!selected).then(|| Refusal::NotSelected {
        pod: restore.pod(),
        selector: escape_within(selector.as_str(), 1024).into_owned(),
    })
}

/// The object of a pod's own CREATE (not a subresource): how a restore pod's creation
/// arrives, for the decision and for steering alike. `None` for any other request.
pub(crate) fn pod_create<'r>(review: &'r Review<'_>) -> Option<&'r Object<'r>> {
    let is_pod = review.kind.group.is_empty() && review.kind.kind == "Pod" && review.sub_resource.is_none();
    (review.operation == Operation::Create && is_pod)
        .then_some(review.object.as_ref())
        .flatten()
}

/// What a pod's restore annotations name: `miggate.io/restore-from` or the peer's
/// `nvidia.com/restore-from`, at most one of them; `None` for a pod that restores nothing.
/// The same reading for a pod's creation (its annotations from the review) and its binding
/// (from the pod cache).
pub(crate) fn restore_reference<V: AsRef<str>>(
    annotations: &RestoreAnnotations<V>,
) -> Result<Option<Reference<'_>>, ReferenceError> {
    resolve::reference(
        annotations.restore_from.as_ref().map(AsRef::as_ref),
        annotations.peer_restore_from.as_ref().map(AsRef::as_ref),
    )
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
    miggate_crds::peer::check_container_map(map)
        .map_err(|why| Refusal::ContainerMapInvalid { pod: pod(), why })?;
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
        return Ok(Parsed::Unchecked(vec![Warning::BindingNotSynced]));
    }
    // The pod of the Binding's UID: one deleted and made again under its name while the pod
    // watch lags is not the cached one, and is passed as a pod not seen yet is.
    let Some(restore) = store.bound_restore_pod(namespace, name, review.bound_uid()) else {
        return Ok(Parsed::Ignored);
    };
    // After the lookup: every binding in the cluster passes here, and only a restore pod's
    // needs the caches' staleness (eight clocks read).
    if let Some(staleness) = store.too_stale() {
        return Ok(Parsed::Unchecked(vec![Warning::BindingStale(staleness)]));
    }
    let pod = || escape_within(&format!("{namespace}/{name}"), 512).into_owned();
    let Some(node) = review.binding_node() else {
        return Ok(Parsed::Unchecked(vec![Warning::BindingNoNode { pod: pod() }]));
    };
    let annotations = &restore.annotations;
    let reference = match restore_reference(annotations) {
        Ok(Some(reference)) => reference.into_owned(),
        Ok(None) => return Ok(Parsed::Ignored),
        Err(e) => return Err(reference_refusal(e, pod())),
    };
    let waiver = Waiver::read(annotations, reference.kind).map_err(|why| Refusal::SkipChecksInvalid {
        pod: Some(pod()),
        why,
    })?;
    // The peer's map, as at creation: the binding judges each destination it names. (A map
    // that cannot be read was refused at creation.)
    let container_map = annotations
        .peer_container_map
        .clone()
        .filter(|_| reference.kind == Kind::PodSnapshot)
        .map(Cow::Owned);
    Ok(Parsed::Restore(RestoreRequest {
        subject: Subject::Binding(restore.clone()),
        review,
        namespace,
        reference,
        waiver,
        node: Some(node),
        container_map,
    }))
}
