//! Steering at admission (`POST /mutate`, opt-in): a restore pod on the NVIDIA device plugin
//! gets required node affinity on the labels GPU Feature Discovery already publishes, so the
//! scheduler only considers nodes whose GPU product, driver major and architecture are the
//! checkpoint's, what resource requests alone cannot express.
//!
//! Pure and synchronous like [`decide`](crate::decide): a request and a store's lookups in, a
//! response out. It never refuses: a pod it cannot steer (no checkpoint, a store still
//! syncing, a pod on DRA, a checkpoint of several products) is allowed unchanged with a
//! warning saying why, since the validating webhook and the node agent still guard it. A pod
//! already steered (the [`STEERED`] annotation) is left alone, so a reinvocation changes
//! nothing.

use std::collections::BTreeSet;

use json_patch::PatchOperation;
use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use miggate_compat::escape::escape_within;
use miggate_compat::{DeviceKind, GpuManifest, SliceShape};
use miggate_inventory::gfd_product_name;
use serde_json::{Value, json};

use crate::decide::MAX_WARNING_BYTES;
use crate::lookup::Lookup;
use crate::patch::{add, annotation_path, path, replace};
use crate::resolve::{self, Reference, Resolved};
use crate::review::{Review, Spec};
use crate::selector::is_label_value;

pub use miggate_wire::annotations::{STEER, STEERED};
/// The audit annotation steering writes, with the same text.
pub const STEERED_AUDIT: &str = "steered";
/// GFD's driver-major labels, newer and older: a node carries one of them.
pub use miggate_wire::nvidia::DRIVER_MAJOR_LABELS;
/// GFD's product label.
pub use miggate_wire::nvidia::GPU_PRODUCT as PRODUCT_LABEL;
/// The kubelet's architecture label.
pub const ARCH_LABEL: &str = "kubernetes.io/arch";
/// At most this many node selector terms after steering: a pod's own terms are crossed with
/// the two driver labels, and a pod with very many terms is left alone rather than doubled.
pub const MAX_TERMS: usize = 64;

/// One node requirement: a label and the values it may have.
pub type Requirement = (String, Vec<String>);
/// Requirements a node must meet together (one node selector term).
pub type RequirementSet = Vec<Requirement>;

/// What a checkpoint asks of a node's labels: requirements every node must meet, and the
/// driver major, which GFD writes under one of two label names (so one term per name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirements {
    /// The product and, when recorded, the architecture.
    pub common: Vec<Requirement>,
    /// The driver's major version, when recorded.
    pub driver_major: Option<String>,
}

impl Requirements {
    /// The alternatives a node may meet: one set per driver label, or the common ones alone.
    pub fn sets(&self) -> Vec<RequirementSet> {
        match &self.driver_major {
            Some(major) => DRIVER_MAJOR_LABELS
                .iter()
                .map(|label| {
                    let mut set = self.common.clone();
                    set.push(((*label).to_string(), vec![major.clone()]));
                    set
                })
                .collect(),
            None => vec![self.common.clone()],
        }
    }

    /// What steering adds, in one line: `nvidia.com/gpu.product in (…), kubernetes.io/arch in
    /// (amd64), nvidia.com/cuda.driver-version.major|nvidia.com/cuda.driver.major in (580)`.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .common
            .iter()
            .map(|(key, values)| format!("{key} in ({})", values.join(", ")))
            .collect();
        if let Some(major) = &self.driver_major {
            parts.push(format!("{} in ({major})", DRIVER_MAJOR_LABELS.join("|")));
        }
        parts.join(", ")
    }
}

/// How a mutation request was answered, for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not a restore pod asking for steering, or one already steered.
    Ignored,
    /// Node affinity added.
    Steered,
    /// Asked for, but left unchanged; the warning says why.
    NotSteered,
}

/// A mutation's answer: always allowed.
#[derive(Debug)]
pub struct Steering {
    /// The response (uid echoed, allowed, with a JSON patch when steered).
    pub response: AdmissionResponse,
    /// How it was answered.
    pub outcome: Outcome,
}

/// The node requirements a checkpoint's devices and host give; or why there are none.
pub fn requirements(manifest: &GpuManifest) -> Result<Requirements, NotSteered> {
    let nvidia = manifest.nvidia.as_ref().ok_or(NotSteered::NoNvidia)?;
    let devices = nvidia.devices.as_deref().ok_or(NotSteered::NoDevices)?;
    let products: BTreeSet<&str> = devices.iter().filter_map(|d| d.model()).collect();
    let product = match (products.len(), products.first()) {
        (1, Some(p)) => *p,
        (0, _) => return Err(NotSteered::NoProduct),
        _ => return Err(NotSteered::SeveralProducts),
    };
    let mut values = vec![gfd_product_name(product)];
    // Under the single strategy GFD names a node's product with its one MIG profile.
    let profiles: BTreeSet<String> = devices
        .iter()
        .filter(|d| d.kind() == DeviceKind::Slice)
        .filter_map(|d| match d.slice_shape() {
            Some(SliceShape::Known(p)) => Some(p.to_string()),
            _ => None,
        })
        .collect();
    if let (1, Some(profile)) = (profiles.len(), profiles.first()) {
        values.push(format!("{}-MIG-{profile}", values[0]));
    }
    values.retain(|v| is_label_value(v));
    if values.is_empty() {
        return Err(NotSteered::NotALabel(quoted(product)));
    }
    let mut common = vec![(PRODUCT_LABEL.to_string(), values)];
    if let Some(arch) = manifest.host.as_ref().and_then(|h| h.cpu_arch.as_deref())
        && is_label_value(arch)
    {
        common.push((ARCH_LABEL.to_string(), vec![arch.to_string()]));
    }
    let major = nvidia
        .driver_version
        .as_ref()
        .and_then(|v| v.as_str().split('.').next().map(str::to_string))
        .filter(|m| !m.is_empty() && m.len() <= 9 && m.bytes().all(|b| b.is_ascii_digit()));
    Ok(Requirements {
        common,
        driver_major: major,
    })
}

fn quoted(text: &str) -> String {
    format!("`{}`", escape_within(text, 128))
}

/// Answers one mutation request decoded with kube's types.
pub fn steer(req: &AdmissionRequest<DynamicObject>, store: &(impl Lookup + ?Sized)) -> Steering {
    steer_review(&Review::from(req), store)
}

/// Answers one mutation request, read in place ([`crate::review::parse`]). The pod's whole
/// spec is decoded (kube's `PodSpec`): steering patches fields a decision never reads.
pub fn steer_review(review: &Review<'_>, store: &(impl Lookup + ?Sized)) -> Steering {
    let base = review.allowed();
    let Some((obj, reference)) = asks_for_steering(review) else {
        return Steering {
            response: base,
            outcome: Outcome::Ignored,
        };
    };
    let steered =
        steerable(review, obj, &reference, store).and_then(|(checkpoint, spec)| {
            match steer_by_claim(&base, &spec, &checkpoint, &reference.name) {
                Some(steering) => Ok(steering),
                None => steer_by_affinity(&base, &spec, &checkpoint),
            }
        });
    steered.unwrap_or_else(|why| not_steered(base, &why))
}

/// The pod left unchanged, with a warning saying why.
fn not_steered(base: AdmissionResponse, why: &NotSteered) -> Steering {
    let mut response = base;
    let warning = format!("miggate: not steered: {why}");
    response.warnings = Some(vec![escape_within(&warning, MAX_WARNING_BYTES).into_owned()]);
    Steering {
        response,
        outcome: Outcome::NotSteered,
    }
}

/// Why a pod asking for steering is left unchanged: the warning's words, after
/// `miggate: not steered: `.
#[derive(Debug, thiserror::Error)]
pub enum NotSteered {
    /// The request names no namespace.
    #[error("the request names no namespace")]
    NoNamespace,
    /// The caches have not finished their first list.
    #[error("the webhook's caches have not finished their first list")]
    NotSynced,
    /// The caches are too far behind the API server.
    #[error("{0}")]
    Stale(crate::lookup::Staleness),
    /// No such checkpoint (`namespace/name`, escaped).
    #[error("checkpoint {0} does not exist")]
    NoCheckpoint(String),
    /// The checkpoint cannot be looked up here (a `PodSnapshot`'s content unknown).
    #[error("{0}")]
    Unchecked(crate::resolve::Unresolved),
    /// The `PodSnapshot` is bound to another snapshot's content (the validating webhook
    /// refuses the pod).
    #[error("{0}")]
    Foreign(Box<crate::resolve::Foreign>),
    /// The pod has no spec.
    #[error("the pod has no spec")]
    NoSpec,
    /// The pod's spec cannot be read (why, escaped).
    #[error("the pod cannot be read: {0}")]
    Unreadable(String),
    /// The pod names DRA claims: they steer it.
    #[error("the pod uses DRA claims; its claim steers it (miggate claim writes one from the checkpoint)")]
    OwnClaims,
    /// The checkpoint records no nvidia section.
    #[error("the checkpoint records no nvidia section")]
    NoNvidia,
    /// The checkpoint does not record its devices.
    #[error("the checkpoint does not record its devices")]
    NoDevices,
    /// The checkpoint's devices name no product.
    #[error("the checkpoint's devices name no product")]
    NoProduct,
    /// The checkpoint's devices are of several products.
    #[error("the checkpoint's devices are of several products; one node label cannot name them")]
    SeveralProducts,
    /// The product's name (quoted) makes no label value.
    #[error("the product name {0} is no node label value")]
    NotALabel(String),
    /// Crossing the pod's own terms would give too many (the pod's count).
    #[error("the pod's own node affinity has too many terms to cross ({0})")]
    TooManyTerms(usize),
    /// The checkpoint's name makes no template name.
    #[error("the checkpoint's name is too long for a template name (miggate-<checkpoint>)")]
    TemplateNameTooLong,
    /// The checkpoint's claim template is impossible (why, escaped).
    #[error("{0}")]
    NoClaim(String),
    /// The patch could not be written.
    #[error("cannot write the patch: {0}")]
    Patch(kube::core::admission::SerializePatchError),
}

/// The object and the checkpoint it names (a `GpuCheckpoint` or the Go peer's `PodSnapshot`)
/// of a restore pod's CREATE that asks for steering (`miggate.io/steer: "true"`) and was not
/// steered already; `None` for anything else, which is allowed untouched (a reference that
/// cannot be read included: the validating webhook refuses it).
fn asks_for_steering<'r>(review: &'r Review<'_>) -> Option<(&'r crate::review::Object<'r>, Reference<'r>)> {
    let obj = crate::decide::parse::pod_create(review)?;
    let annotations = &obj.meta.annotations;
    let asked = annotations.steer.as_deref().is_some_and(|v| v.trim() == "true");
    let reference = crate::decide::parse::restore_reference(annotations)
        .ok()
        .flatten()?;
    (asked && !annotations.steered).then_some((obj, reference))
}

/// The checkpoint a pod asking for steering restores, and its whole spec; or why it cannot be
/// steered (no namespace, caches not synced, no such checkpoint, a spec that cannot be read, a
/// pod whose own DRA claims steer it).
fn steerable(
    review: &Review<'_>,
    obj: &crate::review::Object<'_>,
    reference: &Reference<'_>,
    store: &(impl Lookup + ?Sized),
) -> Result<
    (
        std::sync::Arc<crate::lookup::Checkpoint>,
        k8s_openapi::api::core::v1::PodSpec,
    ),
    NotSteered,
> {
    let Some(namespace) = review.namespace.as_deref() else {
        return Err(NotSteered::NoNamespace);
    };
    if !store.synced() {
        return Err(NotSteered::NotSynced);
    }
    if let Some(staleness) = store.too_stale() {
        return Err(NotSteered::Stale(staleness));
    }
    let checkpoint = match resolve::resolve(store, namespace, reference) {
        Resolved::Found { checkpoint } => checkpoint,
        Resolved::Missing => {
            return Err(NotSteered::NoCheckpoint(reference.display(namespace)));
        }
        Resolved::Foreign(foreign) => return Err(NotSteered::Foreign(Box::new(foreign))),
        Resolved::Unchecked(why) => return Err(NotSteered::Unchecked(why)),
    };
    // `review::parse` keeps every spec raw.
    let raw = match &obj.spec {
        Some(Spec::Raw(raw)) => Some(*raw),
        Some(Spec::Pod(_)) | None => None,
    };
    let spec = match raw
        .map(|raw| raw.decode::<k8s_openapi::api::core::v1::PodSpec>())
        .transpose()
    {
        Ok(Some(spec)) => spec,
        Ok(None) => return Err(NotSteered::NoSpec),
        Err(e) => {
            return Err(NotSteered::Unreadable(
                escape_within(&e.to_string(), 128).into_owned(),
            ));
        }
    };
    if spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty()) {
        return Err(NotSteered::OwnClaims);
    }
    Ok((checkpoint, spec))
}

/// Node affinity steering: the checkpoint's requirements crossed with the pod's own required
/// node affinity, as a JSON patch; or why not (no requirements, too many terms to cross).
fn steer_by_affinity(
    base: &AdmissionResponse,
    spec: &k8s_openapi::api::core::v1::PodSpec,
    checkpoint: &crate::lookup::Checkpoint,
) -> Result<Steering, NotSteered> {
    let wanted = requirements(&checkpoint.manifest)?;
    let existing: Vec<NodeSelectorTerm> = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref())
        .map(|r| r.node_selector_terms.clone())
        .unwrap_or_default();
    let terms = crossed(&existing, &wanted.sets());
    if terms.len() > MAX_TERMS {
        return Err(NotSteered::TooManyTerms(existing.len()));
    }
    let described = wanted.describe();
    let patch = patch(spec, &terms, &described);
    match crate::review::patched(base, patch, STEERED_AUDIT, described) {
        Ok(response) => Ok(Steering {
            response,
            outcome: Outcome::Steered,
        }),
        Err(e) => Err(NotSteered::Patch(e)),
    }
}

/// Claim steering ([`crate::steer_claim`]) when the restore container asks for no GPU;
/// `None` for a pod on the device plugin, which node affinity steers.
fn steer_by_claim(
    base: &AdmissionResponse,
    spec: &k8s_openapi::api::core::v1::PodSpec,
    stored: &crate::lookup::Checkpoint,
    checkpoint: &str,
) -> Option<Steering> {
    use crate::steer_claim::{describe, patch, restore_container, wants_claim};
    let unsteered = |why: NotSteered| not_steered(base.clone(), &why);
    let Some((index, c)) = restore_container(spec, stored.container_name.as_deref()) else {
        // Several containers and no name: only one asking for GPUs could tell, and a pod
        // on the device plugin says which; leave the pod to node-affinity steering.
        return None;
    };
    if !wants_claim(spec, c) {
        return None;
    }
    let Some(template) = miggate_crds::claim::template_name(checkpoint) else {
        return Some(unsteered(NotSteered::TemplateNameTooLong));
    };
    // The template `miggate claim` writes for this checkpoint must be possible at all.
    if let Err(e) = miggate_crds::claim::requests(&stored.manifest) {
        return Some(unsteered(NotSteered::NoClaim(
            escape_within(&e.to_string(), 200).into_owned(),
        )));
    }
    let described = describe(&template, &c.name);
    let ops = patch(spec, index, c, &template, &described);
    Some(
        match crate::review::patched(base, ops, STEERED_AUDIT, described) {
            Ok(response) => Steering {
                response,
                outcome: Outcome::Steered,
            },
            Err(e) => unsteered(NotSteered::Patch(e)),
        },
    )
}

/// The pod's own terms, each with every set's requirements added (terms are ORed, the
/// requirements of one term ANDed); the sets themselves when the pod has no terms.
fn crossed(existing: &[NodeSelectorTerm], sets: &[RequirementSet]) -> Vec<NodeSelectorTerm> {
    let requirement = |(key, values): &Requirement| NodeSelectorRequirement {
        key: key.clone(),
        operator: "In".into(),
        values: Some(values.clone()),
    };
    let base = if existing.is_empty() {
        vec![NodeSelectorTerm::default()]
    } else {
        existing.to_vec()
    };
    let mut out = Vec::with_capacity(base.len().saturating_mul(sets.len()));
    for term in &base {
        for set in sets {
            if out.len() > MAX_TERMS {
                return out;
            }
            let mut t = term.clone();
            let mut expressions = t.match_expressions.take().unwrap_or_default();
            expressions.extend(set.iter().map(requirement));
            t.match_expressions = Some(expressions);
            out.push(t);
        }
    }
    out
}

/// The JSON patch that sets the required node affinity to `terms` and adds the [`STEERED`]
/// annotation, adding each missing parent object on the way.
fn patch(
    spec: &k8s_openapi::api::core::v1::PodSpec,
    terms: &[NodeSelectorTerm],
    described: &str,
) -> Vec<PatchOperation> {
    let terms = serde_json::to_value(terms).unwrap_or(Value::Array(Vec::new()));
    let affinity = spec.affinity.as_ref();
    let node = affinity.and_then(|a| a.node_affinity.as_ref());
    const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";
    let required = || json!({"nodeSelectorTerms": terms});
    let op = match (
        affinity,
        node,
        node.and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref()),
    ) {
        (None, _, _) => add(
            path(["spec", "affinity"]),
            json!({"nodeAffinity": {REQUIRED: required()}}),
        ),
        (Some(_), None, _) => add(
            path(["spec", "affinity", "nodeAffinity"]),
            json!({REQUIRED: required()}),
        ),
        (Some(_), Some(_), None) => add(path(["spec", "affinity", "nodeAffinity", REQUIRED]), required()),
        (Some(_), Some(_), Some(_)) => replace(
            path(["spec", "affinity", "nodeAffinity", REQUIRED, "nodeSelectorTerms"]),
            terms.clone(),
        ),
    };
    // The restore annotation is there, so the annotations map is.
    let annotation = add(annotation_path(STEERED), Value::String(described.to_string()));
    vec![op, annotation]
}

impl From<crate::steer::Outcome> for crate::outcome::Outcome {
    fn from(outcome: crate::steer::Outcome) -> Self {
        use crate::steer::Outcome as Steer;
        match outcome {
            Steer::Ignored => crate::outcome::Outcome::SteerIgnored,
            Steer::Steered => crate::outcome::Outcome::Steered,
            Steer::NotSteered => crate::outcome::Outcome::NotSteered,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("NVIDIA-H100-80GB-HBM3", true)]
    #[case("NVIDIA-H100-80GB-HBM3-MIG-3g.40gb", true)]
    #[case("amd64", true)]
    #[case("-x", false)]
    #[case("x-", false)]
    #[case("a b", false)]
    #[case("", false)]
    fn label_values(#[case] v: &str, #[case] ok: bool) {
        assert_eq!(is_label_value(v), ok);
    }
}
