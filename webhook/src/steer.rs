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

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use miggate_compat::escape::escape_within;
use miggate_compat::{DeviceKind, GpuManifest, SliceShape};
use miggate_crds::inventory::gfd_product_name;
use serde_json::{Value, json};

use crate::decide::MAX_WARNING_BYTES;
use crate::lookup::Lookup;
use crate::resolve::{self, Reference, Resolved};
use crate::review::{Operation, Review, Spec};

pub use miggate_wire::annotations::{STEER, STEERED};
/// The audit annotation steering writes, with the same text.
pub const STEERED_AUDIT: &str = "steered";
/// GFD's product label.
pub const PRODUCT_LABEL: &str = "nvidia.com/gpu.product";
/// GFD's driver-major labels, newer and older: a node carries one of them.
pub const DRIVER_MAJOR_LABELS: [&str; 2] = [
    "nvidia.com/cuda.driver-version.major",
    "nvidia.com/cuda.driver.major",
];
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

impl Outcome {
    /// The label value used in metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ignored => "steer-ignored",
            Outcome::Steered => "steered",
            Outcome::NotSteered => "not-steered",
        }
    }
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
pub fn requirements(manifest: &GpuManifest) -> Result<Requirements, String> {
    let nvidia = manifest
        .nvidia
        .as_ref()
        .ok_or("the checkpoint records no nvidia section")?;
    let devices = nvidia
        .devices
        .as_deref()
        .ok_or("the checkpoint does not record its devices")?;
    let products: BTreeSet<&str> = devices.iter().filter_map(|d| d.model()).collect();
    let product = match (products.len(), products.first()) {
        (1, Some(p)) => *p,
        (0, _) => return Err("the checkpoint's devices name no product".into()),
        _ => {
            return Err(
                "the checkpoint's devices are of several products; one node label cannot name them".into(),
            );
        }
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
        return Err(format!(
            "the product name {} is no node label value",
            quoted(product)
        ));
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

/// A Kubernetes label value: at most 63 bytes of `[A-Za-z0-9._-]`, alphanumeric at both ends.
fn is_label_value(v: &str) -> bool {
    let b = v.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
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
    steered.unwrap_or_else(|why| {
        let mut response = base;
        let warning = format!("miggate: not steered: {why}");
        response.warnings = Some(vec![escape_within(&warning, MAX_WARNING_BYTES).into_owned()]);
        Steering {
            response,
            outcome: Outcome::NotSteered,
        }
    })
}

/// The object and the checkpoint it names (a `GpuCheckpoint` or the Go peer's `PodSnapshot`)
/// of a restore pod's CREATE that asks for steering (`miggate.io/steer: "true"`) and was not
/// steered already; `None` for anything else, which is allowed untouched (a reference that
/// cannot be read included: the validating webhook refuses it).
fn asks_for_steering<'r>(review: &'r Review<'_>) -> Option<(&'r crate::review::Object<'r>, Reference<'r>)> {
    let is_pod = review.kind.group.is_empty() && review.kind.kind == "Pod" && review.sub_resource.is_none();
    if review.operation != Operation::Create || !is_pod {
        return None;
    }
    let obj = review.object.as_ref()?;
    let asked = obj.meta.steer.as_deref().is_some_and(|v| v.trim() == "true");
    let reference = resolve::reference(
        obj.meta.restore_from.as_deref(),
        obj.meta.peer.restore_from.as_deref(),
    )
    .ok()
    .flatten()?;
    (asked && !obj.meta.steered).then_some((obj, reference))
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
        std::sync::Arc<crate::store::Checkpoint>,
        k8s_openapi::api::core::v1::PodSpec,
    ),
    String,
> {
    let Some(namespace) = review.namespace.as_deref() else {
        return Err("the request names no namespace".into());
    };
    if !store.synced() {
        return Err("the webhook's caches have not finished their first list".into());
    }
    if let Some(staleness) = store.too_stale() {
        return Err(staleness.to_string());
    }
    let checkpoint = match resolve::resolve(store, namespace, reference) {
        Resolved::Found { checkpoint, .. } => checkpoint,
        Resolved::Missing => {
            return Err(format!(
                "checkpoint {} does not exist",
                reference.display(namespace)
            ));
        }
        Resolved::Unchecked(why) => return Err(why),
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
        Ok(None) => return Err("the pod has no spec".into()),
        Err(e) => {
            return Err(format!(
                "the pod cannot be read: {}",
                escape_within(&e.to_string(), 128)
            ));
        }
    };
    if spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty()) {
        return Err(
            "the pod uses DRA claims; its claim steers it (miggate claim writes one from the checkpoint)"
                .into(),
        );
    }
    Ok((checkpoint, spec))
}

/// Node affinity steering: the checkpoint's requirements crossed with the pod's own required
/// node affinity, as a JSON patch; or why not (no requirements, too many terms to cross).
fn steer_by_affinity(
    base: &AdmissionResponse,
    spec: &k8s_openapi::api::core::v1::PodSpec,
    checkpoint: &crate::store::Checkpoint,
) -> Result<Steering, String> {
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
        return Err(format!(
            "the pod's own node affinity has too many terms to cross ({})",
            existing.len()
        ));
    }
    let described = wanted.describe();
    let patch = patch(spec, &terms, &described);
    match crate::review::patched(base, patch, STEERED_AUDIT, described) {
        Ok(response) => Ok(Steering {
            response,
            outcome: Outcome::Steered,
        }),
        Err(e) => Err(format!("cannot write the patch: {e}")),
    }
}

/// Claim steering ([`crate::steer_claim`]) when the restore container asks for no GPU;
/// `None` for a pod on the device plugin, which node affinity steers.
fn steer_by_claim(
    base: &AdmissionResponse,
    spec: &k8s_openapi::api::core::v1::PodSpec,
    stored: &crate::store::Checkpoint,
    checkpoint: &str,
) -> Option<Steering> {
    use crate::steer_claim::{describe, patch, restore_container, wants_claim};
    let not_steered = |why: String| {
        let mut response = base.clone();
        let warning = format!("miggate: not steered: {why}");
        response.warnings = Some(vec![escape_within(&warning, MAX_WARNING_BYTES).into_owned()]);
        Steering {
            response,
            outcome: Outcome::NotSteered,
        }
    };
    let Some((index, c)) = restore_container(spec, stored.container_name.as_deref()) else {
        // Several containers and no name: only one asking for GPUs could tell, and a pod
        // on the device plugin says which; leave the pod to node-affinity steering.
        return None;
    };
    if !wants_claim(spec, c) {
        return None;
    }
    let Some(template) = miggate_crds::claim::template_name(checkpoint) else {
        return Some(not_steered(
            "the checkpoint's name is too long for a template name (miggate-<checkpoint>)".into(),
        ));
    };
    // The template `miggate claim` writes for this checkpoint must be possible at all.
    if let Err(e) = miggate_crds::claim::requests(&stored.manifest) {
        return Some(not_steered(escape_within(&e.to_string(), 200).into_owned()));
    }
    let described = describe(&template, &c.name);
    let ops = patch(spec, index, c, &template, &described);
    Some(
        match crate::review::patched(base, ops, STEERED_AUDIT, described) {
            Ok(response) => Steering {
                response,
                outcome: Outcome::Steered,
            },
            Err(e) => not_steered(format!("cannot write the patch: {e}")),
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
fn patch(spec: &k8s_openapi::api::core::v1::PodSpec, terms: &[NodeSelectorTerm], described: &str) -> Value {
    let terms = serde_json::to_value(terms).unwrap_or(Value::Array(Vec::new()));
    let required = json!({"nodeSelectorTerms": terms});
    let affinity = spec.affinity.as_ref();
    let node = affinity.and_then(|a| a.node_affinity.as_ref());
    let op = match (
        affinity,
        node,
        node.and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref()),
    ) {
        (None, _, _) => {
            json!({"op": "add", "path": "/spec/affinity", "value": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}})
        }
        (Some(_), None, _) => {
            json!({"op": "add", "path": "/spec/affinity/nodeAffinity", "value": {"requiredDuringSchedulingIgnoredDuringExecution": required}})
        }
        (Some(_), Some(_), None) => {
            json!({"op": "add", "path": "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution", "value": required})
        }
        (Some(_), Some(_), Some(_)) => {
            json!({"op": "replace", "path": "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms", "value": required["nodeSelectorTerms"]})
        }
    };
    // The restore annotation is there, so the annotations map is; `/` in a key is `~1`.
    let annotation = json!({"op": "add", "path": format!("/metadata/annotations/{}", STEERED.replace('~', "~0").replace('/', "~1")), "value": described});
    json!([op, annotation])
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
