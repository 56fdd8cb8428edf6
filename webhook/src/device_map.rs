//! The device map at a DRA restore pod's binding (`POST /mutate-binding`): when the pod's
//! claims are allocated and the exact check on the allocated devices passes, the Binding gets
//! the [`DEVICE_MAP`] annotation, which the API server copies onto the pod as it binds it,
//! where the node agent reads it instead of recomputing the pairing.
//!
//! Pure and synchronous like [`decide`](crate::decide). It never refuses (the validating
//! binding check does that): a binding it cannot annotate is allowed unchanged, with a warning
//! only where the exact check ran and still gave no map.

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use miggate_compat::escape::escape_within;
pub use miggate_wire::annotations::DEVICE_MAP;
use serde::Deserialize;
use serde_json::json;

use crate::allocation::{AtBinding, at_binding};
use crate::lookup::Lookup;

/// The audit annotation with the map written.
pub const DEVICE_MAP_AUDIT: &str = "device-map";

/// How a binding mutation was answered, for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not a restore pod's binding, or one whose claims give no exact view.
    Ignored,
    /// The device map annotation added.
    Mapped,
    /// The exact check ran but gave no map (refused, or devices without UUIDs); a warning says why.
    NotMapped,
}

impl Outcome {
    /// The label value used in metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ignored => "map-ignored",
            Outcome::Mapped => "mapped",
            Outcome::NotMapped => "not-mapped",
        }
    }
}

/// A binding mutation's answer: always allowed.
#[derive(Debug)]
pub struct Mapping {
    /// The response (uid echoed, allowed, with a JSON patch when mapped).
    pub response: AdmissionResponse,
    /// How it was answered.
    pub outcome: Outcome,
}

#[derive(Deserialize)]
struct BindingObject {
    #[serde(default)]
    target: Option<BindingTarget>,
}

#[derive(Deserialize)]
struct BindingTarget {
    #[serde(default)]
    name: String,
}

/// Whether `req` is a binding CREATE (`pods/binding`, or the legacy `bindings` resource).
pub fn is_binding(req: &AdmissionRequest<DynamicObject>) -> bool {
    let core = req.resource.group.is_empty();
    req.operation == Operation::Create
        && core
        && ((req.resource.resource == "pods" && req.sub_resource.as_deref() == Some("binding"))
            || (req.resource.resource == "bindings" && req.sub_resource.is_none()))
}

/// The restore pod a binding places, as `(namespace, name)`.
pub fn bound_pod(req: &AdmissionRequest<DynamicObject>) -> Option<(&str, &str)> {
    let namespace = req.namespace.as_deref()?;
    let name = Some(req.name.as_str())
        .filter(|n| !n.is_empty())
        .or_else(|| req.object.as_ref().and_then(|o| o.metadata.name.as_deref()))?;
    Some((namespace, name))
}

/// Answers one binding mutation request.
pub fn map(req: &AdmissionRequest<DynamicObject>, store: &(impl Lookup + ?Sized)) -> Mapping {
    let base = AdmissionResponse::from(req);
    let ignored = |response| Mapping {
        response,
        outcome: Outcome::Ignored,
    };
    if !is_binding(req) || !store.synced() {
        return ignored(base);
    }
    let Some((namespace, pod)) = bound_pod(req) else {
        return ignored(base);
    };
    let Some(restore) = store.restore_pod(namespace, pod) else {
        return ignored(base);
    };
    if restore.claims.is_empty() {
        return ignored(base);
    }
    let obj = req.object.as_ref();
    let node = obj
        .and_then(|o| BindingObject::deserialize(&o.data).ok())
        .and_then(|b| b.target)
        .map(|t| t.name)
        .filter(|n| !n.is_empty());
    let Some(node) = node else {
        return ignored(base);
    };
    let Some(checkpoint) = store.checkpoint(namespace, restore.restore_from.trim()) else {
        return ignored(base);
    };
    let Ok(inventory) = store.inventory(&node) else {
        return ignored(base);
    };
    // A waiver that does not parse waives nothing here; the validating check refuses it.
    let skip = restore
        .skip_checks
        .as_deref()
        .map(|s| miggate_compat::parse_skip(s).unwrap_or_default())
        .unwrap_or_default();
    let at = at_binding(
        store,
        namespace,
        &restore,
        &node,
        &checkpoint.manifest,
        &inventory,
        &skip,
    );
    let AtBinding::Judged { report, devices } = at else {
        return ignored(base);
    };
    let pod_name = escape_within(&format!("{namespace}/{pod}"), 512).into_owned();
    let map = match (report.compatible, report.device_map) {
        (true, Some(map)) => map,
        (true, None) => {
            return not_mapped(
                base,
                format!(
                    "miggate: no device map for pod {pod_name}: the allocated devices {} have no UUIDs yet (DynamicMIG makes them when the pod starts); the node agent pairs them",
                    escape_within(&devices, 512)
                ),
            );
        }
        (false, _) => {
            return not_mapped(
                base,
                format!(
                    "miggate: no device map for pod {pod_name}: the exact check on its allocated devices refused"
                ),
            );
        }
    };
    let has_annotations = obj.and_then(|o| o.metadata.annotations.as_ref()).is_some();
    let patch = if has_annotations {
        json!([{"op": "add", "path": "/metadata/annotations/miggate.io~1device-map", "value": map}])
    } else {
        json!([{"op": "add", "path": "/metadata/annotations", "value": {DEVICE_MAP: map}}])
    };
    let patch: json_patch::Patch = match serde_json::from_value(patch) {
        Ok(p) => p,
        Err(e) => return not_mapped(base, format!("miggate: cannot write the device map patch: {e}")),
    };
    match base.clone().with_patch(patch) {
        Ok(mut response) => {
            response
                .audit_annotations
                .insert(DEVICE_MAP_AUDIT.to_string(), map);
            Mapping {
                response,
                outcome: Outcome::Mapped,
            }
        }
        Err(e) => not_mapped(base, format!("miggate: cannot write the device map patch: {e}")),
    }
}

fn not_mapped(base: AdmissionResponse, warning: String) -> Mapping {
    let mut response = base;
    response.warnings = Some(vec![
        escape_within(&warning, crate::decide::MAX_WARNING_BYTES).into_owned(),
    ]);
    Mapping {
        response,
        outcome: Outcome::NotMapped,
    }
}
