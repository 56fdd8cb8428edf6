//! Steering a DRA restore pod (opt-in, in the `/mutate` path): a restore pod asking for
//! steering whose restore container asks for no GPU at all (no `nvidia.com/…` resource, no
//! claim) gets its GPUs through a claim made from the checkpoint's `ResourceClaimTemplate`:
//! a `spec.resourceClaims` entry [`CLAIM_NAME`] naming the template
//! `miggate-<checkpoint>` ([`template_name`](miggate_crds::claim::template_name)) and the
//! restore container's `resources.claims` entry for it. The scheduler then places the pod only
//! where the checkpoint's devices exist.
//!
//! The webhook creates nothing: the user makes the template from the checkpoint with
//! `miggate claim`. A pod whose spec already names a claim is left alone (its claim steers
//! it), and a pod on the device plugin (an `nvidia.com/…` request) is steered by node
//! affinity instead ([`steer`](crate::steer)).

use json_patch::PatchOperation;
use k8s_openapi::api::core::v1::{Container, PodSpec};
use serde_json::{Value, json};

use crate::patch::{add, annotation_path, path};

/// The name of the claim entry added to the pod, what the container's `resources.claims`
/// names.
pub const CLAIM_NAME: &str = "miggate-gpus";

/// Whether the pod gets its GPUs from neither the device plugin nor a claim: then steering
/// gives it the checkpoint's claim. `container` is the restore container.
pub fn wants_claim(spec: &PodSpec, container: &Container) -> bool {
    let no_pod_claims = spec.resource_claims.as_ref().is_none_or(Vec::is_empty);
    let Some(r) = container.resources.as_ref() else {
        return no_pod_claims;
    };
    let nvidia = |m: &Option<std::collections::BTreeMap<String, _>>| {
        m.as_ref().is_some_and(|m| {
            m.keys()
                .any(|k: &String| k.starts_with(miggate_wire::NVIDIA_RESOURCE_PREFIX))
        })
    };
    no_pod_claims && !nvidia(&r.limits) && !nvidia(&r.requests) && r.claims.as_ref().is_none_or(Vec::is_empty)
}

/// The restore container for claim steering: the one the checkpoint names, else the pod's
/// only container. `None` when neither tells.
pub fn restore_container<'a>(spec: &'a PodSpec, named: Option<&str>) -> Option<(usize, &'a Container)> {
    match named {
        Some(name) => spec.containers.iter().enumerate().find(|(_, c)| c.name == name),
        None if spec.containers.len() == 1 => spec.containers.first().map(|c| (0, c)),
        None => None,
    }
}

/// What claim steering adds, in one line, for the `miggate.io/steered` annotation.
pub fn describe(template: &str, container: &str) -> String {
    format!(
        "resourceClaims {CLAIM_NAME} from ResourceClaimTemplate {template}, claimed by container {container}"
    )
}

/// The JSON patch: the pod's `resourceClaims` entry, the container's `resources.claims`
/// entry (adding each missing parent), and the `miggate.io/steered` annotation.
pub fn patch(
    spec: &PodSpec,
    index: usize,
    container: &Container,
    template: &str,
    described: &str,
) -> Vec<PatchOperation> {
    let entry = json!({"name": CLAIM_NAME, "resourceClaimTemplateName": template});
    let claims = if spec.resource_claims.is_some() {
        add(path(["spec", "resourceClaims", "-"]), entry)
    } else {
        add(path(["spec", "resourceClaims"]), json!([entry]))
    };
    let claim = json!({"name": CLAIM_NAME});
    let index = index.to_string();
    let at = |tail: &[&'static str]| {
        path(
            ["spec", "containers", index.as_str()]
                .into_iter()
                .chain(tail.iter().copied()),
        )
    };
    let resources = container.resources.as_ref();
    let uses = match (resources, resources.and_then(|r| r.claims.as_ref())) {
        (None, _) => add(at(&["resources"]), json!({"claims": [claim]})),
        (Some(_), None) => add(at(&["resources", "claims"]), json!([claim])),
        (Some(_), Some(_)) => add(at(&["resources", "claims", "-"]), claim),
    };
    let annotation = add(
        annotation_path(miggate_wire::annotations::STEERED),
        Value::String(described.to_string()),
    );
    vec![claims, uses, annotation]
}
