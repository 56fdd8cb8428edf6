//! The device map at a DRA restore pod's binding (`POST /mutate-binding`): when the pod's
//! claims are allocated and the exact check on the allocated devices passes, the Binding gets
//! the [`DEVICE_MAP`] annotation, which the API server copies onto the pod as it binds it,
//! where the node agent reads it instead of recomputing the pairing.
//!
//! Pure and synchronous like [`decide`](crate::decide). It never refuses (the validating
//! binding check does that): a binding it cannot annotate is allowed unchanged, with a warning
//! only where the exact check ran and still gave no map.
//!
//! The node agent trusts the map, and a listed binder's account may be usable by others, so a
//! Binding that arrives carrying [`DEVICE_MAP`] keeps none of it: the webhook's own map
//! replaces it, or it is removed, with a warning, whatever the pod.

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use miggate_compat::escape::escape_within;
pub use miggate_wire::annotations::DEVICE_MAP;
use serde_json::{Value, json};

use crate::allocation::{AtBinding, at_binding};
use crate::decide::{Parsed, Subject};
use crate::lookup::Lookup;
use crate::patch::{add, annotation_path, path, remove};
use crate::resolve::{self, Kind, Resolved};
use crate::review::Review;

/// The audit annotation with the map written.
pub const DEVICE_MAP_AUDIT: &str = "device-map";
/// The audit annotation naming the binder whose map was removed.
pub const DEVICE_MAP_REMOVED_AUDIT: &str = "device-map-removed";

/// How a binding mutation was answered, for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not a restore pod's binding, or one whose claims give no exact view.
    Ignored,
    /// The device map annotation added.
    Mapped,
    /// The exact check ran but gave no map (refused, or devices without UUIDs); a warning says why.
    NotMapped,
    /// A restore pod's binding by a binder not listed (`--binder`): bound without a map, since
    /// the binding policy would refuse a map from it; the node agent pairs the devices itself.
    UnlistedBinder,
    /// A Binding that carried [`DEVICE_MAP`] and got no map of the webhook's: the binder's map
    /// removed, with a warning (any warning the outcome it replaces gave is kept).
    MapRemoved,
}

/// A binding mutation's answer: always allowed.
#[derive(Debug)]
pub struct Mapping {
    /// The response (uid echoed, allowed, with a JSON patch when mapped).
    pub response: AdmissionResponse,
    /// How it was answered.
    pub outcome: Outcome,
}

/// Answers one binding mutation request decoded with kube's types; `binders` are the user
/// names whose Bindings may carry the map (the binding policy's list).
pub fn map(
    req: &AdmissionRequest<DynamicObject>,
    store: &(impl Lookup + ?Sized),
    binders: &[String],
) -> Mapping {
    map_review(&Review::from(req), store, binders)
}

/// Answers one binding mutation request, read in place ([`crate::review::parse`]). Every
/// binding in the cluster passes through here: anything but a restore pod's with claims is
/// answered after one map lookup. The binding is read by the decision's own
/// [`parse`](crate::decide::parse), so the restore and its waiver are read by one rule: a
/// binding the validating check refuses (a waiver that does not parse) is not mapped. A map the
/// Binding already carries is replaced by the webhook's, or removed where it writes none.
pub fn map_review(review: &Review<'_>, store: &(impl Lookup + ?Sized), binders: &[String]) -> Mapping {
    let mapping = map_pod(review, store, binders);
    let carries_map =
        review.is_binding_create() && review.object.as_ref().is_some_and(|o| o.meta.has_device_map);
    // A map of the webhook's is an `add` at the key, which replaces the binder's value.
    if !carries_map || mapping.outcome == Outcome::Mapped {
        return mapping;
    }
    remove_map(review, mapping.response)
}

/// The answer to a Binding carrying [`DEVICE_MAP`] that the webhook does not map: `response`
/// (the answer it would get) with the map removed and a warning saying why.
fn remove_map(review: &Review<'_>, response: AdmissionResponse) -> Mapping {
    let pod = match review.bound_pod() {
        Some((namespace, name)) => escape_within(&format!("{namespace}/{name}"), 512).into_owned(),
        None => "(unnamed)".to_string(),
    };
    let binder = escape_within(&review.username, 256).into_owned();
    let ops = vec![remove(annotation_path(DEVICE_MAP))];
    let mut response = match crate::review::patched(&response, ops, DEVICE_MAP_REMOVED_AUDIT, binder) {
        Ok(response) => response,
        // Never reached (a patch of one path always serializes); were it, a map the node agent
        // would trust must not pass, so the binding is refused.
        Err(error) => {
            let why = MapRemoved::Unwritable { pod, error };
            let message = escape_within(&why.to_string(), crate::decide::MAX_MESSAGE_BYTES).into_owned();
            return Mapping {
                response: response.deny(message),
                outcome: Outcome::MapRemoved,
            };
        }
    };
    let warning = MapRemoved::Removed { pod }.to_string();
    response
        .warnings
        .get_or_insert_with(Vec::new)
        .push(escape_within(&warning, crate::decide::MAX_WARNING_BYTES).into_owned());
    Mapping {
        response,
        outcome: Outcome::MapRemoved,
    }
}

/// What the webhook maps of a binding, before a map the Binding carries is looked at.
fn map_pod(review: &Review<'_>, store: &(impl Lookup + ?Sized), binders: &[String]) -> Mapping {
    let base = review.allowed();
    let ignored = |response| Mapping {
        response,
        outcome: Outcome::Ignored,
    };
    let Ok(Parsed::Restore(restore)) = crate::decide::parse(review, store) else {
        return ignored(base);
    };
    // A GpuCheckpoint's restore only: the peer's PodSnapshotContent records no UUIDs, and its
    // agent pairs the devices itself.
    let (Subject::Binding(pod), Some(node), Kind::GpuCheckpoint) =
        (&restore.subject, restore.node.as_deref(), restore.reference.kind)
    else {
        return ignored(base);
    };
    if pod.claims.is_empty() {
        return ignored(base);
    }
    // The binding policy refuses a map in a Binding from anyone else: never block the binding,
    // bind it without one.
    if !binders.iter().any(|b| *b == *review.username) {
        return Mapping {
            response: base,
            outcome: Outcome::UnlistedBinder,
        };
    }
    let Resolved::Found { checkpoint } = resolve::resolve(store, restore.namespace, &restore.reference)
    else {
        return ignored(base);
    };
    let Ok(inventory) = store.inventory(node) else {
        return ignored(base);
    };
    let at = at_binding(
        store,
        restore.namespace,
        pod,
        node,
        &checkpoint.manifest,
        &inventory,
        &restore.waiver.checks,
    );
    let AtBinding::Judged { report, devices } = at else {
        return ignored(base);
    };
    let pod = restore.pod();
    let map = match (report.compatible, report.device_map) {
        (true, Some(map)) => map,
        (true, None) => return not_mapped(base, NotMapped::NoUuids { pod, devices }),
        (false, _) => return not_mapped(base, NotMapped::Refused { pod }),
    };
    let has_annotations = review.object.as_ref().is_some_and(|o| o.meta.has_annotations);
    let patch = if has_annotations {
        add(annotation_path(DEVICE_MAP), Value::String(map.clone()))
    } else {
        add(path(["metadata", "annotations"]), json!({DEVICE_MAP: map}))
    };
    match crate::review::patched(&base, vec![patch], DEVICE_MAP_AUDIT, map) {
        Ok(response) => Mapping {
            response,
            outcome: Outcome::Mapped,
        },
        Err(e) => not_mapped(base, NotMapped::Patch(e)),
    }
}

/// Why a binding whose exact check ran carries no device map: the warning's words.
#[derive(Debug, thiserror::Error)]
pub enum NotMapped {
    /// The check passed, but the allocated devices have no UUIDs yet.
    #[error(
        "miggate: no device map for pod {pod}: the allocated devices {} have no UUIDs yet (DynamicMIG makes them when the pod starts); the node agent pairs them",
        escape_within(devices, 512)
    )]
    NoUuids {
        /// `namespace/name` of the pod, escaped.
        pod: String,
        /// The allocated devices (`pool/device`, …).
        devices: String,
    },
    /// The exact check on the allocated devices refused.
    #[error("miggate: no device map for pod {pod}: the exact check on its allocated devices refused")]
    Refused {
        /// `namespace/name` of the pod, escaped.
        pod: String,
    },
    /// The patch could not be written.
    #[error("miggate: cannot write the device map patch: {0}")]
    Patch(kube::core::admission::SerializePatchError),
}

/// A map a binder wrote into a Binding, removed: the warning's words, or why it could not be.
#[derive(Debug, thiserror::Error)]
pub enum MapRemoved {
    /// Removed.
    #[error(
        "miggate: removed annotation {DEVICE_MAP} from the Binding of pod {pod}: only miggate writes it, from the devices the pod was allocated"
    )]
    Removed {
        /// `namespace/name` of the pod, escaped.
        pod: String,
    },
    /// The patch could not be written: the binding is refused.
    #[error(
        "miggate: cannot remove annotation {DEVICE_MAP}, which only miggate writes, from the Binding of pod {pod}: {error}"
    )]
    Unwritable {
        /// `namespace/name` of the pod, escaped.
        pod: String,
        /// Why.
        error: kube::core::admission::SerializePatchError,
    },
}

fn not_mapped(base: AdmissionResponse, why: NotMapped) -> Mapping {
    let mut response = base;
    response.warnings = Some(vec![
        escape_within(&why.to_string(), crate::decide::MAX_WARNING_BYTES).into_owned(),
    ]);
    Mapping {
        response,
        outcome: Outcome::NotMapped,
    }
}

impl From<crate::device_map::Outcome> for crate::outcome::Outcome {
    fn from(outcome: crate::device_map::Outcome) -> Self {
        use crate::device_map::Outcome as Map;
        match outcome {
            Map::Ignored => crate::outcome::Outcome::MapIgnored,
            Map::Mapped => crate::outcome::Outcome::Mapped,
            Map::NotMapped => crate::outcome::Outcome::NotMapped,
            Map::UnlistedBinder => crate::outcome::Outcome::UnlistedBinder,
            Map::MapRemoved => crate::outcome::Outcome::MapRemoved,
        }
    }
}
