//! The exact check at a DRA pod's binding: by the time the scheduler binds a pod, its DRA
//! plugin has allocated the pod's `ResourceClaim`s (`status.allocation.devices.results`), so
//! the devices the restore will get are known. The checkpoint's node checks then run in
//! **exact** mode against just those devices (the node's inventory with its device list
//! replaced by the allocated ones, matched by pool and device name to the node's
//! `ResourceSlice`s), which is what the node agent will find, and the device map for
//! cuda-checkpoint follows from the same report.
//!
//! Whatever cannot be known (a claim not seen allocated yet, an allocation the slices no
//! longer describe) leaves the offer check against the whole node in place, with a warning:
//! the exact check can only make the binding check stricter where it knows more.

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::ResourceSlice;
use miggate_compat::escape::escape_within;
use miggate_compat::{CheckName, GpuManifest, Mode, Options, Report, Target, evaluate_target};
use miggate_inventory::{self as inventory, AllocatedDevice};

use crate::lookup::{Inventory, Lookup, RestorePod};

/// The most claims of one pod read: Kubernetes allows 32 per pod.
pub const MAX_CLAIMS: usize = 32;

/// What a binding can know of the pod's allocated devices.
#[derive(Debug)]
pub enum AtBinding {
    /// The pod uses no DRA claim of the NVIDIA driver (or the store keeps no claims): the
    /// offer check against the whole node is all there is.
    NoClaims,
    /// A claim is not known or not allocated in the webhook's cache: the offer check stands.
    NotAllocated(NotAllocated),
    /// The allocation cannot be matched to the node's devices: the offer check stands.
    Unmatched(miggate_inventory::Error),
    /// The exact check on the allocated devices.
    Judged {
        /// The checkpoint's checks in exact mode against just the allocated devices; its
        /// `device_map` is cuda-checkpoint's, when every device has a UUID.
        report: Report,
        /// The devices as `pool/device`, comma separated.
        devices: String,
    },
}

/// Every claim of `restore` allocated, their NVIDIA devices judged in exact mode against
/// the node's inventory restricted to them.
pub fn at_binding(
    store: &(impl Lookup + ?Sized),
    namespace: &str,
    restore: &RestorePod,
    node: &str,
    checkpoint: &GpuManifest,
    inventory: &Inventory,
    skip: &BTreeSet<CheckName>,
) -> AtBinding {
    let results = match allocation(store, namespace, restore) {
        Ok(Some(results)) => results,
        Ok(None) => return AtBinding::NoClaims,
        Err(why) => return AtBinding::NotAllocated(why),
    };
    let slices = store.slices(node);
    let refs: Vec<&ResourceSlice> = slices.iter().map(|s| &**s).collect();
    let allocated = match inventory::allocated(node, &refs, &results) {
        Ok(a) => a,
        Err(e) => return AtBinding::Unmatched(e),
    };
    if allocated.devices.is_empty() {
        return AtBinding::NoClaims;
    }
    let judged = inventory::restricted(&inventory.manifest, &allocated);
    let options = Options {
        skip: skip.clone(),
        ..Options::mode(Mode::Exact)
    };
    let report = evaluate_target(checkpoint, Target::node(&judged), &options);
    AtBinding::Judged {
        report,
        devices: allocated.describe(),
    }
}

/// Why the exact check on a DRA pod's allocated devices could not run at its binding: the
/// offer check against the whole node stands, and a warning says this.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ExactNotRun {
    /// A claim's allocation is not known.
    #[error(transparent)]
    NotAllocated(NotAllocated),
    /// The allocation cannot be matched to the node's devices.
    #[error(transparent)]
    Unmatched(std::sync::Arc<miggate_inventory::Error>),
}

/// As their words: the inventory error is not comparable, and a warning is judged by what it says.
impl PartialEq for ExactNotRun {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

/// A pod's claim whose allocation the webhook does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAllocated {
    /// The claim is not in the webhook's cache.
    #[error("ResourceClaim {} is not in the webhook's cache", claim_name(namespace, name))]
    NotCached {
        /// The pod's namespace.
        namespace: String,
        /// The claim's name.
        name: String,
    },
    /// The claim is cached without an allocation.
    #[error("ResourceClaim {} is not allocated", claim_name(namespace, name))]
    Unallocated {
        /// The pod's namespace.
        namespace: String,
        /// The claim's name.
        name: String,
    },
}

/// A claim as a message names it: `namespace/name`, escaped and cut.
fn claim_name(namespace: &str, name: &str) -> String {
    escape_within(&format!("{namespace}/{name}"), 256).into_owned()
}

/// Every claim's allocation results together; `Ok(None)` when the pod uses no claim or the
/// store keeps none; `Err` names the first claim not (yet) seen allocated.
fn allocation(
    store: &(impl Lookup + ?Sized),
    namespace: &str,
    restore: &RestorePod,
) -> Result<Option<Vec<AllocatedDevice>>, NotAllocated> {
    if restore.claims.is_empty() {
        return Ok(None);
    }
    let mut results = Vec::new();
    for name in restore.claims.iter().take(MAX_CLAIMS) {
        let Some(claim) = store.claim(namespace, name) else {
            if results.is_empty() && !store.keeps_claims() {
                return Ok(None);
            }
            return Err(NotAllocated::NotCached {
                namespace: namespace.to_string(),
                name: name.to_string(),
            });
        };
        let Some(devices) = claim.devices.as_ref() else {
            return Err(NotAllocated::Unallocated {
                namespace: namespace.to_string(),
                name: name.to_string(),
            });
        };
        results.extend(devices.iter().cloned());
    }
    Ok(Some(results))
}

/// The audit annotation naming the allocated devices a binding was judged on in exact mode.
pub const EXACT_ON_AUDIT: &str = "exact-on-allocated";

/// Records the devices judged (when the exact check ran) as the [`EXACT_ON_AUDIT`] annotation.
pub fn audit(response: &mut kube::core::admission::AdmissionResponse, devices: Option<&str>) {
    if let Some(d) = devices {
        response
            .audit_annotations
            .insert(EXACT_ON_AUDIT.to_string(), escape_within(d, 1024).into_owned());
    }
}
