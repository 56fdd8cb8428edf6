//! What a decision reads: checkpoints, node inventories and restore pods, by name. The file
//! store (`miggate_store::file_store::Snapshot`) and the Kubernetes watch caches
//! (`miggate_store::kube_store::KubeStore`) both answer it, so [`decide`](crate::decide)
//! stays pure and is tested once for both.

use std::collections::BTreeMap;
use std::sync::Arc;

use miggate_compat::GpuManifest;

pub use crate::restore_annotations::RestoreAnnotations;

/// A node's inventory as a decision reads it: the one type every source gives, shared (its
/// manifest behind an `Arc`) so a cached inventory costs no copy per request.
pub use miggate_inventory::{Inventory, NoInventory, Note, PassedOver, Source};

/// A checkpoint's manifest and the container it was taken from.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// The source manifest body.
    pub manifest: GpuManifest,
    /// The container the checkpoint names (`spec.containerName`), when it does.
    pub container_name: Option<String>,
    /// Where it came from, for logs: a file under the store root, or `GpuCheckpoint ns/name`.
    pub origin: String,
}

/// What the pod cache keeps of a restore pod: only what a binding decision needs, so a
/// cluster of many pods costs little memory.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RestorePod {
    /// `metadata.uid`: a pod deleted and made again under the same name is another pod, and a
    /// Binding names the one it places by UID ([`RestorePod::is`]).
    pub uid: Option<String>,
    /// Its restore annotations, miggate's and the Go peer's, as the pod watch kept them (a
    /// value past the watch's bound is its marker, which no reader accepts).
    pub annotations: RestoreAnnotations<String>,
    /// The names of the `ResourceClaim`s the pod uses (`spec.resourceClaims[].resourceClaimName`,
    /// and `status.resourceClaimStatuses` for claims made from a template), so a binding can
    /// find their allocation. Empty for a pod without DRA claims.
    pub claims: Vec<String>,
    /// What each container asking for GPUs asks (see [`GpuAsk`]), so a binding can judge
    /// `gpu-request` under the node's MIG strategy, which a pod's creation cannot know. Empty
    /// for a pod whose containers ask for none, and for one past the bounds (then the binding
    /// does not judge the requests).
    pub gpu_asks: Vec<GpuAsk>,
}

impl RestorePod {
    /// Whether this is the pod of UID `uid`: any pod when `uid` is `None` or empty (a Binding
    /// made by hand may carry none, and the API server then binds whichever pod has the name),
    /// otherwise only a cached pod of that very UID.
    pub fn is(&self, uid: Option<&str>) -> bool {
        match uid.filter(|u| !u.is_empty()) {
            None => true,
            Some(uid) => self.uid.as_deref() == Some(uid),
        }
    }
}

/// One container's GPU asks, as `gpu-request` reads them: its `nvidia.com/…` requests and
/// limits (a limit standing for its request) and its resource claims.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GpuAsk {
    /// The container's name.
    pub container: String,
    /// `nvidia.com/…` resource → quantity.
    pub requests: BTreeMap<String, miggate_compat::Quantity>,
    /// The names of the resource claims the container uses.
    pub claims: Vec<String>,
}

impl GpuAsk {
    /// The most containers, and resources per container, a cached restore pod keeps: far above
    /// any real pod, a bound on what a pod's author can make the cache hold.
    pub const MAX: usize = 16;

    /// The container's facts for `gpu-request`: its requests and claims, nothing else.
    pub fn pod_facts(&self) -> miggate_compat::Pod {
        miggate_compat::Pod {
            gpu_requests: Some(self.requests.clone()),
            resource_claims: Some(self.claims.clone()),
            ..miggate_compat::Pod::default()
        }
    }
}

/// What the content cache keeps of a `PodSnapshotContent`: the checkpoint its `status.source`
/// describes (translated once, as it arrives), or why it cannot be compared.
#[derive(Debug, Clone, PartialEq)]
pub struct Content {
    /// The content's name.
    pub name: String,
    /// `spec.snapshotRef`: the `PodSnapshot` the content belongs to.
    pub snapshot_ref: Option<miggate_crds::peer::SnapshotRef>,
    /// The checkpoint (its container the one `spec.source.podRef` captured), or why not.
    pub checkpoint: Result<Arc<Checkpoint>, miggate_crds::peer::NoSource>,
}

impl From<miggate_crds::peer::SnapshotContent> for Content {
    fn from(c: miggate_crds::peer::SnapshotContent) -> Self {
        let origin = format!("PodSnapshotContent {}", c.name);
        Content {
            checkpoint: c.source.map(|manifest| {
                Arc::new(Checkpoint {
                    manifest,
                    container_name: c.container,
                    origin,
                })
            }),
            name: c.name,
            snapshot_ref: c.snapshot_ref,
        }
    }
}

/// A `PodSnapshot` looked up and followed to its content.
#[derive(Debug, Clone)]
pub enum SnapshotLookup {
    /// The store does not watch PodSnapshots: the peer's CRDs are not installed, or the store
    /// keeps none (the file store).
    NotServed,
    /// No `PodSnapshot` of that name.
    Missing,
    /// The snapshot is not bound to a content yet.
    Unbound,
    /// Bound to a content the cache does not hold.
    ContentMissing(String),
    /// Bound to this content (which may or may not point back to the snapshot).
    Bound {
        /// The content `status.boundSnapshotContentName` names.
        content: Arc<Content>,
        /// The snapshot's own `metadata.uid`, to hold against the content's back-pointer.
        snapshot_uid: Option<String>,
    },
}

/// What the claim cache keeps of a `ResourceClaim`: its allocation's devices, once the
/// scheduler has allocated it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClaimAllocation {
    /// `status.allocation.devices.results`; `None` while the claim is not allocated.
    pub devices: Option<Vec<miggate_inventory::AllocatedDevice>>,
}

/// A watch cache behind the API server for longer than the store allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staleness {
    /// The cached kind (`GpuNode`, `Pod`, ...).
    pub kind: std::borrow::Cow<'static, str>,
    /// Whole seconds it has been behind.
    pub seconds: u64,
    /// The bound it is over (`--max-staleness`), in whole seconds.
    pub max_seconds: u64,
}

impl std::fmt::Display for Staleness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the webhook's {} cache has been behind the API server for {} s (its watch is failing; --max-staleness is {} s)",
            self.kind, self.seconds, self.max_seconds
        )
    }
}

/// Lookups by name. Implementations answer from memory: a decision never waits on I/O.
pub trait Lookup {
    /// Whether the store holds the complete picture (every watch cache listed once). A store
    /// that is not synced cannot tell "absent" from "not seen yet".
    fn synced(&self) -> bool {
        true
    }

    /// The cache furthest behind the API server, when one has been behind longer than the
    /// store allows: what it holds is too old to decide on. `None` for a current store.
    fn too_stale(&self) -> Option<Staleness> {
        None
    }

    /// The checkpoint `name` in `namespace`.
    fn checkpoint(&self, namespace: &str, name: &str) -> Option<Arc<Checkpoint>>;

    /// The best inventory known for node `node`, or why there is none: the sources present
    /// but unreadable (empty when no source knows the node).
    fn inventory(&self, node: &str) -> Result<Inventory, NoInventory>;

    /// The `PodSnapshot` `name` in `namespace`, followed to its `PodSnapshotContent`.
    /// [`SnapshotLookup::NotServed`] for a store that keeps none.
    fn snapshot(&self, _namespace: &str, _name: &str) -> SnapshotLookup {
        SnapshotLookup::NotServed
    }

    /// The restore pod `name` in `namespace`, when the store knows it as one, whatever its UID.
    /// `None` means not a restore pod, or a store that keeps no pods (the file store). A
    /// binding reads [`Lookup::bound_restore_pod`] instead.
    fn restore_pod(&self, namespace: &str, name: &str) -> Option<Arc<RestorePod>>;

    /// The restore pod a Binding places: the one cached as `namespace/name` whose UID is the
    /// Binding's `metadata.uid` ([`RestorePod::is`]). A pod deleted and made again under the
    /// same name while the watch lags is not the cached one: `None`, as for a pod not seen yet.
    fn bound_restore_pod(&self, namespace: &str, name: &str, uid: Option<&str>) -> Option<Arc<RestorePod>> {
        self.restore_pod(namespace, name).filter(|pod| pod.is(uid))
    }

    /// The `ResourceClaim` `name` in `namespace`, when the store keeps claims. `None`: not
    /// known (or a store that keeps none, the file store).
    fn claim(&self, _namespace: &str, _name: &str) -> Option<Arc<ClaimAllocation>> {
        None
    }

    /// Whether the store watches `ResourceClaim`s at all (the kube store on a cluster that
    /// serves them): a claim it does not hold is then one not seen yet, not one it never keeps.
    fn keeps_claims(&self) -> bool {
        false
    }

    /// The DRA driver's `ResourceSlice`s for node `node` (empty for a store that keeps none),
    /// to match an allocation's device names to the node's devices.
    fn slices(&self, _node: &str) -> Vec<Arc<k8s_openapi::api::resource::v1::ResourceSlice>> {
        Vec::new()
    }
}
