//! The device map at a DRA restore pod's binding (`POST /mutate-binding`): when the pod's
//! claims are allocated and the exact check on the allocated devices passes, the Binding gets
//! the [`DEVICE_MAP`] annotation, which the API server copies onto the pod as it binds it,
//! where the node agent reads it instead of recomputing the pairing.
//!
//! Pure and synchronous like [`decide`](crate::decide). It never refuses (the validating
//! binding check does that): a binding it cannot annotate is allowed unchanged, with a warning
//! only where the exact check ran and still gave no map.

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use miggate_compat::escape::escape_within;
pub use miggate_wire::annotations::DEVICE_MAP;
use serde_json::json;

use crate::allocation::{AtBinding, at_binding};
use crate::lookup::Lookup;
use crate::review::Review;

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

/// Answers one binding mutation request decoded with kube's types.
pub fn map(req: &AdmissionRequest<DynamicObject>, store: &(impl Lookup + ?Sized)) -> Mapping {
    map_review(&Review::from(req), store)
}

/// Answers one binding mutation request, read in place ([`crate::review::parse`]). Every
/// binding in the cluster passes through here: anything but a restore pod's with claims is
/// answered after one map lookup.
pub fn map_review(review: &Review<'_>, store: &(impl Lookup + ?Sized)) -> Mapping {
    let base = review.allowed();
    let ignored = |response| Mapping {
        response,
        outcome: Outcome::Ignored,
    };
    let Some((namespace, pod)) = review.bound_pod() else {
        return ignored(base);
    };
    if !store.synced() {
        return ignored(base);
    }
    let Some(restore) = store.restore_pod(namespace, pod) else {
        return ignored(base);
    };
    if restore.claims.is_empty() || store.too_stale().is_some() {
        return ignored(base);
    }
    let Some(node) = review.binding_node() else {
        return ignored(base);
    };
    // A GpuCheckpoint's restore only: the peer's PodSnapshotContent records no UUIDs, and its
    // agent pairs the devices itself.
    let Some(from) = restore.restore_from.as_deref().filter(|_| restore.peer.is_none()) else {
        return ignored(base);
    };
    let Some(checkpoint) = store.checkpoint(namespace, from.trim()) else {
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
    let has_annotations = review.object.as_ref().is_some_and(|o| o.meta.has_annotations);
    let patch = if has_annotations {
        json!([{"op": "add", "path": "/metadata/annotations/miggate.io~1device-map", "value": map}])
    } else {
        json!([{"op": "add", "path": "/metadata/annotations", "value": {DEVICE_MAP: map}}])
    };
    match crate::review::patched(&base, patch, DEVICE_MAP_AUDIT, map) {
        Ok(response) => Mapping {
            response,
            outcome: Outcome::Mapped,
        },
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
