//! The Kubernetes store (`--store kube`): watch caches over `GpuCheckpoint`, `GpuNode`, restore
//! pods, Nodes, the NVIDIA DRA driver's `ResourceSlice`s and `ResourceClaim`s, and the Go
//! peer's `PodSnapshot`s and `PodSnapshotContent`s, filled by kube-runtime's `watcher` and read
//! by admission without a request to the API server.
//!
//! Each kind has one [`watcher`] stream (list, then watch from the list's `resourceVersion`,
//! bookmarks on), wrapped in a backoff (`WatchBackoff`): a watch that ends is resumed from
//! its last version, one answered `410 Gone` (or an error) is re-listed after a backoff
//! (0.8 s doubling to [`WATCH_RETRY_MAX`], each wait plus up to as much again of jitter, so
//! never 5 s; reset by the first event received, and by a watch the server accepts). A re-list is buffered and swapped in whole when it
//! completes, so a decision never sees half a list. Each cache converts objects as they
//! arrive and keeps only what decisions read: a restore pod is its restore annotations, a Node
//! its labels, capacity and `nodeInfo`, a `PodSnapshot` the content it is bound to, a content
//! its `status.source` translated; pods without `miggate.io/restore-from` or
//! `nvidia.com/restore-from` are dropped. Pods are read as a `WatchedPod`, which skips
//! every field and annotation a restore pod's binding does not read as it is parsed (a kept
//! value is bounded by [`MAX_KEPT_ANNOTATION_BYTES`]), and are listed in pages of
//! [`POD_PAGE_SIZE`]: a cluster's other pods, however large, are never held whole.
//!
//! The store is [synced](KubeStore::synced) once every cache has completed its first list;
//! `/readyz` reports ready only then, and until then a restore pod is refused (the webhook
//! cannot tell a missing checkpoint from one not seen yet).
//!
//! After that, each cache tracks how far behind the server it may be ([`crate::freshness`]):
//! from a watch's first failure until an event, a completed re-list or a watch the server
//! accepted and kept open says it caught up. Through a short outage the caches keep
//! answering; once one has been behind longer than [`KubeOptions::max_staleness`], `/readyz`
//! reports not ready and restores are refused as if unsynced, until it catches up.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, NodeStatus};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource, ResourceExt};
use miggate_crds::{GpuCheckpoint, GpuNode};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde::de::DeserializeOwned;

pub use crate::cache_status::CacheStatus;
use crate::freshness::{DEFAULT_MAX_STALENESS, Freshness, WatchStartLayer, WatchStarts};
use crate::lookup::Checkpoint;
use crate::lookup::{
    ClaimAllocation, Content, GpuAsk, Lookup, NoInventory, NodeInventory, PeerRestore, RestorePod,
    SnapshotLookup, Staleness,
};
use crate::metrics::{KindLabel, Metrics};
pub use crate::watched_pod::MAX_KEPT_ANNOTATION_BYTES;
use crate::watched_pod::{Kept, WatchedContainer, WatchedPod};
use miggate_crds::inventory::best_or_why;
use miggate_crds::peer::{PodSnapshot, PodSnapshotContent, SnapshotContent};

/// The DRA driver whose `ResourceSlice`s describe NVIDIA GPUs.
pub use miggate_wire::dra::DRIVER as NVIDIA_DRA_DRIVER;

/// How the caches select what they watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeOptions {
    /// A label selector for restore pods (`--restore-pod-selector`). Annotations cannot be
    /// selected by the API server, so without one every pod is watched and all but restore
    /// pods are dropped on arrival; with one, only matching pods are sent at all.
    pub restore_pod_selector: Option<String>,
    /// The kubeconfig file (`--kubeconfig`); `None`: the environment's cluster.
    pub kubeconfig: Option<std::path::PathBuf>,
    /// The kubeconfig context (`--context`); `None`: its current context.
    pub context: Option<String>,
    /// How long a cache may be behind the API server (its watch failing) before `/readyz`
    /// reports not ready and restores are refused (`--max-staleness`).
    pub max_staleness: Duration,
}

impl Default for KubeOptions {
    fn default() -> Self {
        KubeOptions {
            restore_pod_selector: None,
            kubeconfig: None,
            context: None,
            max_staleness: DEFAULT_MAX_STALENESS,
        }
    }
}

/// Pods per page of the pod watch's list. kube-client reads a page whole, holding its body
/// twice at the peak (collected, then copied into the text it parses), before any pod is
/// converted, so the page bounds the list's passing memory. Measured with 400 pods of
/// 200 KiB of annotations (`examples/pod_memory.rs`, debug build, medians of 3): peak 44 MiB
/// without those pods, 115 MiB at 100 a page (83 MiB at 50). At the API server's annotation
/// limit (256 KiB a pod) a page of 100 is 25 MiB of JSON; kube-runtime's default page of 500
/// is 125 MiB, under a 256 MiB memory limit. A cluster of 10,000 pods is listed in 100
/// requests.
pub const POD_PAGE_SIZE: u32 = 100;

/// The kinds cached, as named in metrics, logs and `/readyz`.
pub const KINDS: [&str; 8] = [
    "GpuCheckpoint",
    "GpuNode",
    "Pod",
    "Node",
    "ResourceSlice",
    "ResourceClaim",
    "PodSnapshot",
    "PodSnapshotContent",
];

/// The kinds a cluster may not serve: DRA's before Kubernetes 1.34, the Go peer's where its
/// CRDs are not installed. A server that answers their list `404` counts as an empty, synced
/// cache, and the watch keeps retrying, so kinds installed later are picked up.
const OPTIONAL: [&str; 4] = [
    "ResourceSlice",
    "ResourceClaim",
    "PodSnapshot",
    "PodSnapshotContent",
];

/// What every cache shares to tell how current it is.
#[derive(Debug, Clone)]
pub(crate) struct Tracking {
    starts: Arc<WatchStarts>,
    max_staleness: Duration,
}

impl Tracking {
    #[cfg(test)]
    pub(crate) fn for_tests() -> Self {
        Tracking {
            starts: Arc::default(),
            max_staleness: DEFAULT_MAX_STALENESS,
        }
    }
}

/// The plural a watch of `K` names on the wire.
fn plural<K: Resource<DynamicType = ()>>() -> String {
    K::plural(&()).into_owned()
}

/// A value a cache holds, with an optional secondary key (a slice's node).
pub(crate) trait Entry: Send + Sync + 'static {
    /// The secondary key, for caches looked up by something other than the name.
    fn index_key(&self) -> Option<&str> {
        None
    }
}

impl Entry for Checkpoint {}
impl Entry for GpuNode {}
impl Entry for Node {}
impl Entry for RestorePod {}
impl Entry for ClaimAllocation {}
impl Entry for SnapshotEntry {}
impl Entry for Content {}

/// What the snapshot cache keeps of a `PodSnapshot`: the content it is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SnapshotEntry {
    /// `status.boundSnapshotContentName`, when bound.
    bound: Option<String>,
}
impl Entry for ResourceSlice {
    fn index_key(&self) -> Option<&str> {
        self.spec.node_name.as_deref()
    }
}

#[derive(Debug)]
struct Contents<V> {
    items: HashMap<String, Arc<V>>,
    /// Secondary key to primary keys.
    index: HashMap<String, BTreeSet<String>>,
    /// A re-list in progress, swapped in whole at its end.
    pending: Option<HashMap<String, Arc<V>>>,
    /// Lists started, the first included.
    lists: u64,
}

/// One kind's cache, fed by one watcher.
#[derive(Debug)]
pub(crate) struct Cache<V> {
    kind: &'static str,
    contents: RwLock<Contents<V>>,
    synced: AtomicBool,
    /// Whether a source the webhook can do without (ResourceSlices): a server that does not
    /// serve its API counts as an empty, synced cache instead of one never ready.
    optional: bool,
    /// False while the server answers the list `404 NotFound` (an optional kind only).
    served: AtomicBool,
    last_event: Mutex<Option<Instant>>,
    errors: AtomicU64,
    /// Since when the cache may be missing changes.
    freshness: Freshness,
    /// The resource's plural, as watch requests name it.
    plural: String,
    /// The watches the server accepted, recorded by the client's [`WatchStartLayer`].
    starts: Arc<WatchStarts>,
    /// How long the cache may be behind before it counts as failing.
    max_staleness: Duration,
    restarts: Family<KindLabel, Counter>,
    error_count: Family<KindLabel, Counter>,
}

impl<V: Entry> Cache<V> {
    fn new(kind: &'static str, plural: &str, tracking: &Tracking, metrics: &Metrics) -> Self {
        Cache {
            kind,
            optional: OPTIONAL.contains(&kind),
            served: AtomicBool::new(true),
            contents: RwLock::new(Contents {
                items: HashMap::new(),
                index: HashMap::new(),
                pending: None,
                lists: 0,
            }),
            synced: AtomicBool::new(false),
            last_event: Mutex::new(None),
            errors: AtomicU64::new(0),
            freshness: Freshness::default(),
            plural: plural.to_string(),
            starts: tracking.starts.clone(),
            max_staleness: tracking.max_staleness,
            restarts: metrics.watch_restarts.clone(),
            error_count: metrics.watch_errors.clone(),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, Contents<V>> {
        self.contents.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Contents<V>> {
        self.contents.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Something arrived from the server: the cache is current.
    fn touch(&self) {
        *self.last_event.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        self.freshness.current();
    }

    /// How long the cache may have been missing changes: zero while current, and for a kind
    /// the server does not serve (there is nothing to miss).
    fn staleness(&self) -> Duration {
        if !self.served.load(Ordering::Acquire) {
            return Duration::ZERO;
        }
        let now = Instant::now();
        self.freshness
            .behind(now, self.starts.last(&self.plural))
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since))
    }

    /// Whether the cache has been behind longer than the bound: too old to decide on.
    fn failing(&self) -> bool {
        self.staleness() > self.max_staleness
    }

    fn get(&self, key: &str) -> Option<Arc<V>> {
        self.read().items.get(key).cloned()
    }

    fn by_index(&self, key: &str) -> Vec<Arc<V>> {
        let c = self.read();
        c.index
            .get(key)
            .into_iter()
            .flatten()
            .filter_map(|k| c.items.get(k).cloned())
            .collect()
    }

    fn len(&self) -> usize {
        self.read().items.len()
    }

    /// A list starts: buffer until it is done. Every list after the first is a restart.
    fn begin(&self) {
        let mut c = self.write();
        c.pending = Some(HashMap::new());
        c.lists += 1;
        if c.lists > 1 {
            self.restarts.get_or_create(&KindLabel { kind: self.kind }).inc();
            tracing::info!(kind = self.kind, "watch cache re-listing");
        }
    }

    fn buffer(&self, key: String, value: Option<V>) {
        let mut c = self.write();
        if let (Some(pending), Some(v)) = (c.pending.as_mut(), value) {
            pending.insert(key, Arc::new(v));
        }
    }

    fn done(&self) {
        let mut c = self.write();
        let items = c.pending.take().unwrap_or_default();
        let mut index: HashMap<String, BTreeSet<String>> = HashMap::new();
        for (k, v) in &items {
            if let Some(i) = v.index_key() {
                index.entry(i.to_string()).or_default().insert(k.clone());
            }
        }
        c.items = items;
        c.index = index;
        let count = c.items.len();
        drop(c);
        self.touch();
        if !self.served.swap(true, Ordering::AcqRel) {
            tracing::info!(kind = self.kind, "API now served and listed");
        }
        if !self.synced.swap(true, Ordering::AcqRel) {
            tracing::info!(kind = self.kind, objects = count, "watch cache synced");
        }
    }

    fn unindex(c: &mut Contents<V>, key: &str) {
        let old = c.items.get(key).and_then(|v| v.index_key().map(str::to_string));
        if let Some(i) = old
            && let Some(set) = c.index.get_mut(&i)
        {
            set.remove(key);
            if set.is_empty() {
                c.index.remove(&i);
            }
        }
    }

    /// An object added or changed: stored, or dropped when it no longer qualifies (a pod
    /// whose annotation was removed).
    fn upsert(&self, key: String, value: Option<V>) {
        let mut c = self.write();
        Self::unindex(&mut c, &key);
        match value {
            Some(v) => {
                if let Some(i) = v.index_key() {
                    c.index.entry(i.to_string()).or_default().insert(key.clone());
                }
                c.items.insert(key, Arc::new(v));
            }
            None => {
                c.items.remove(&key);
            }
        }
        drop(c);
        self.touch();
    }

    fn remove(&self, key: &str) {
        let mut c = self.write();
        Self::unindex(&mut c, key);
        c.items.remove(key);
        drop(c);
        self.touch();
    }

    /// The server does not serve this optional kind's API: nothing to wait for. The cache
    /// is empty and synced; the watcher keeps retrying, and a list that succeeds later fills
    /// it as usual.
    fn not_served(&self) {
        if !self.optional {
            return;
        }
        let was_served = self.served.swap(false, Ordering::AcqRel);
        let mut c = self.write();
        c.items.clear();
        c.index.clear();
        c.pending = None;
        drop(c);
        self.touch();
        self.synced.store(true, Ordering::Release);
        if was_served {
            tracing::warn!(
                kind = self.kind,
                "API not served by this cluster; that inventory source is skipped until it is"
            );
        }
    }

    fn error(&self) {
        self.freshness
            .failed(Instant::now(), self.starts.last(&self.plural));
        self.errors.fetch_add(1, Ordering::Relaxed);
        self.error_count
            .get_or_create(&KindLabel { kind: self.kind })
            .inc();
    }

    fn status(&self) -> CacheStatus {
        let age = self
            .last_event
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .map(|t| t.elapsed());
        let c = self.read();
        CacheStatus {
            kind: self.kind,
            synced: self.synced.load(Ordering::Acquire),
            served: self.served.load(Ordering::Acquire),
            failing: self.failing(),
            stale_seconds: self.staleness().as_secs_f64(),
            objects: c.items.len(),
            age_seconds: age.map(|d| d.as_secs_f64()),
            lists: c.lists,
            errors: self.errors.load(Ordering::Relaxed),
        }
    }
}

/// What the store reads of every cache alike, whatever it holds: so that readiness, status
/// and staleness are one loop over [`KubeStore::caches`], not a list per question.
trait Watched: Sync {
    fn synced(&self) -> bool;
    fn kind(&self) -> &'static str;
    fn staleness(&self) -> Duration;
    fn max_staleness(&self) -> Duration;
    fn failing(&self) -> bool;
    fn status(&self) -> CacheStatus;
}

impl<V: Entry> Watched for Cache<V> {
    fn synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }
    fn kind(&self) -> &'static str {
        self.kind
    }
    fn staleness(&self) -> Duration {
        Cache::staleness(self)
    }
    fn max_staleness(&self) -> Duration {
        self.max_staleness
    }
    fn failing(&self) -> bool {
        Cache::failing(self)
    }
    fn status(&self) -> CacheStatus {
        Cache::status(self)
    }
}

/// The watch caches and the tasks filling them. Dropping it stops the tasks.
#[derive(Debug)]
pub struct KubeStore {
    checkpoints: Arc<Cache<Checkpoint>>,
    gpu_nodes: Arc<Cache<GpuNode>>,
    pods: Arc<Cache<RestorePod>>,
    nodes: Arc<Cache<Node>>,
    slices: Arc<Cache<ResourceSlice>>,
    /// Every `ResourceClaim`'s allocation (a claim is a few device names): a DRA restore
    /// pod's binding is judged on the devices its claims were allocated.
    claims: Arc<Cache<ClaimAllocation>>,
    /// The Go peer's `PodSnapshot`s (what each is bound to) and `PodSnapshotContent`s (what
    /// each records, translated as it arrives): a peer restore pod's checkpoint.
    snapshots: Arc<Cache<SnapshotEntry>>,
    contents: Arc<Cache<Content>>,
    /// Each node's inventory as last read, with the cached objects it was read from: reading
    /// is redone only when one of them was replaced, not on every admission request.
    inventories: Mutex<HashMap<String, Memo>>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// Memos kept beyond twice the nodes known before those of vanished nodes are dropped.
const MEMO_SLACK: usize = 64;

/// A node's inventory and the objects it was read from. Holding the `Arc`s keeps their
/// addresses from being reused, so pointer equality says "the same object".
#[derive(Debug)]
struct Memo {
    gpu_node: Option<Arc<GpuNode>>,
    node: Option<Arc<Node>>,
    slices: Vec<Arc<ResourceSlice>>,
    inventory: Result<NodeInventory, NoInventory>,
}

impl Memo {
    fn read_from(
        &self,
        gpu_node: &Option<Arc<GpuNode>>,
        node: &Option<Arc<Node>>,
        slices: &[Arc<ResourceSlice>],
    ) -> bool {
        fn same<T>(a: Option<&Arc<T>>, b: Option<&Arc<T>>) -> bool {
            match (a, b) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (a, b) => a.is_none() && b.is_none(),
            }
        }
        same(self.gpu_node.as_ref(), gpu_node.as_ref())
            && same(self.node.as_ref(), node.as_ref())
            && self.slices.len() == slices.len()
            && self.slices.iter().zip(slices).all(|(a, b)| Arc::ptr_eq(a, b))
    }
}

impl Drop for KubeStore {
    fn drop(&mut self) {
        for t in self.tasks.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            t.abort();
        }
    }
}

fn key_of<K: Resource>(obj: &K) -> String {
    let meta = obj.meta();
    let name = meta.name.as_deref().unwrap_or("");
    match meta.namespace.as_deref() {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

fn checkpoint_of(c: GpuCheckpoint) -> Option<Checkpoint> {
    let origin = format!(
        "GpuCheckpoint {}/{}",
        c.namespace().unwrap_or_default(),
        c.name_any()
    );
    Some(Checkpoint {
        manifest: c.spec.manifest,
        container_name: c.spec.container_name,
        origin,
    })
}

fn gpu_node_of(mut n: GpuNode) -> Option<GpuNode> {
    n.metadata.managed_fields = None;
    n.metadata.annotations = None;
    Some(n)
}

/// What a Node contributes to an inventory: its name, labels (GPU Feature Discovery's),
/// capacity and allocatable (extended resources) and `nodeInfo` (kernel, architecture).
fn node_of(n: Node) -> Option<Node> {
    let status = n.status.map(|s| NodeStatus {
        node_info: s.node_info,
        capacity: s.capacity,
        allocatable: s.allocatable,
        ..NodeStatus::default()
    });
    Some(Node {
        metadata: ObjectMeta {
            name: n.metadata.name,
            labels: n.metadata.labels,
            resource_version: n.metadata.resource_version,
            ..ObjectMeta::default()
        },
        spec: None,
        status,
    })
}

/// What a restore pod contributes (see [`RestorePod`]); `None` for a pod without
/// `miggate.io/restore-from` or `nvidia.com/restore-from`. An annotation value past
/// [`MAX_KEPT_ANNOTATION_BYTES`] is its marker ([`Kept::into_value`]), so the pod is still
/// a restore pod and its binding refused, never passed unchecked.
fn restore_pod_of(p: WatchedPod) -> Option<RestorePod> {
    let annotations = p.annotations;
    let restore_from = annotations.restore_from.map(Kept::into_value);
    let peer = annotations.peer_restore_from.map(|restore_from| PeerRestore {
        restore_from: restore_from.into_value(),
        container_map: annotations.peer_container_map.map(Kept::into_value),
        skip: annotations.peer_skip.map(Kept::into_value),
    });
    if restore_from.is_none() && peer.is_none() {
        return None;
    }
    // A claim named in the spec, or made from a template (its name in the status).
    let named = p
        .spec
        .iter()
        .flat_map(|s| s.resource_claims.iter().flatten())
        .filter_map(|c| c.resource_claim_name.clone());
    let made = p
        .status
        .iter()
        .flat_map(|s| s.resource_claim_statuses.iter().flatten())
        .filter_map(|c| c.resource_claim_name.clone());
    let mut claims: Vec<String> = Vec::new();
    for name in named.chain(made) {
        if claims.len() >= crate::allocation::MAX_CLAIMS {
            break;
        }
        if !claims.contains(&name) {
            claims.push(name);
        }
    }
    Some(RestorePod {
        restore_from,
        skip_checks: annotations.skip_checks.map(Kept::into_value),
        peer,
        claims,
        gpu_asks: p
            .spec
            .as_ref()
            .and_then(|s| s.containers.as_deref())
            .map(gpu_asks)
            .unwrap_or_default(),
    })
}

/// The GPU asks of a restore pod's containers (see [`GpuAsk`]); none when the pod has more
/// containers asking, or a container more resources, than [`GpuAsk::MAX`]: the binding then
/// leaves `gpu-request` to the creation's check rather than judge part of the pod.
fn gpu_asks(containers: &[WatchedContainer]) -> Vec<GpuAsk> {
    let mut asks = Vec::new();
    for c in containers {
        let resources = c.resources.as_ref();
        let mut requests = BTreeMap::new();
        // Extended resources are limits; a request alone stands for an equal limit.
        for map in [
            resources.and_then(|r| r.requests.as_ref()),
            resources.and_then(|r| r.limits.as_ref()),
        ]
        .into_iter()
        .flatten()
        {
            for (k, v) in map
                .iter()
                .filter(|(k, _)| k.starts_with(crate::pod::NVIDIA_PREFIX))
            {
                requests.insert(k.clone(), miggate_compat::Quantity::new(v.0.as_str()));
            }
        }
        let claims: Vec<String> = resources
            .and_then(|r| r.claims.as_ref())
            .map(|cs| cs.iter().map(|c| c.name.clone()).collect())
            .unwrap_or_default();
        if requests.is_empty() && claims.is_empty() {
            continue;
        }
        if asks.len() >= GpuAsk::MAX || requests.len() > GpuAsk::MAX || claims.len() > GpuAsk::MAX {
            return Vec::new();
        }
        asks.push(GpuAsk {
            container: c.name.clone(),
            requests,
            claims,
        });
    }
    asks
}

/// What a claim contributes: its allocation's devices (request, driver, pool, device), at
/// most [`MAX_RESULTS`](miggate_crds::inventory::MAX_RESULTS) + 1 of them (more is refused when
/// matched).
fn claim_of(c: ResourceClaim) -> Option<ClaimAllocation> {
    let devices = c
        .status
        .and_then(|s| s.allocation)
        .and_then(|a| a.devices)
        .map(|d| {
            d.results
                .into_iter()
                .flatten()
                .take(miggate_crds::inventory::MAX_RESULTS + 1)
                .map(|r| miggate_crds::inventory::AllocatedDevice {
                    request: r.request,
                    driver: r.driver,
                    pool: r.pool,
                    device: r.device,
                })
                .collect()
        });
    Some(ClaimAllocation { devices })
}

/// What a `PodSnapshot` contributes: the content it is bound to.
fn snapshot_of(s: PodSnapshot) -> Option<SnapshotEntry> {
    Some(SnapshotEntry {
        bound: s.bound_content().map(str::to_string),
    })
}

/// What a `PodSnapshotContent` contributes: its `status.source` translated once, here.
fn content_of(c: PodSnapshotContent) -> Option<Content> {
    Some(Content::from(SnapshotContent::read(&c)))
}

fn slice_of(mut s: ResourceSlice) -> Option<ResourceSlice> {
    s.metadata.managed_fields = None;
    Some(s)
}

/// The cap on the wait between two tries of a failed watch, before jitter adds up to as much
/// again (so every wait is under twice this, 5 s). kube-runtime's default caps at 30 s (up to
/// 60 s with its jitter) and resets only after 120 s without an error: a webhook then stays
/// unready for half a minute after the API server is back, and a kind whose CRD is installed
/// after the webhook started (the Go peer's) goes unseen as long. A list every few seconds per
/// failing kind is nothing to an API server, and the jitter keeps replicas out of step.
pub const WATCH_RETRY_MAX: Duration = Duration::from_millis(2500);
/// The first wait after a watch fails, doubled at each failure in a row.
const WATCH_RETRY_MIN: Duration = Duration::from_millis(800);

/// The watches' backoff: exponential from [`WATCH_RETRY_MIN`] to [`WATCH_RETRY_MAX`], each
/// wait lengthened by a random share of itself (below 100%), never giving up. It starts over
/// when kube-runtime's `StreamBackoff` resets it (the watch yielded an event) and when the
/// server has accepted a watch of the kind since the last wait: after an outage, the first
/// accepted watch of a restarted server is answered `410` at once, and the re-list that
/// follows then waits the shortest time, not the capped one the outage built up.
pub(crate) struct WatchBackoff {
    builder: backon::ExponentialBuilder,
    current: backon::ExponentialBackoff,
    starts: Arc<WatchStarts>,
    plural: String,
    /// The accepted watch last seen, to tell a new one.
    seen: Option<Instant>,
}

impl WatchBackoff {
    pub(crate) fn new(starts: Arc<WatchStarts>, plural: String) -> Self {
        use backon::BackoffBuilder;
        let builder = backon::ExponentialBuilder::default()
            .with_min_delay(WATCH_RETRY_MIN)
            .with_max_delay(WATCH_RETRY_MAX)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times();
        let seen = starts.last(&plural);
        WatchBackoff {
            current: builder.build(),
            builder,
            starts,
            plural,
            seen,
        }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        use backon::BackoffBuilder;
        let accepted = self.starts.last(&self.plural);
        if accepted.is_some() && accepted != self.seen {
            self.seen = accepted;
            self.current = self.builder.build();
        }
        self.current.next()
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        use backon::BackoffBuilder;
        self.current = self.builder.build();
    }
}

/// Feeds `cache` from a watcher over `api` until the task is aborted.
async fn feed<K, V>(api: Api<K>, config: watcher::Config, cache: Arc<Cache<V>>, convert: fn(K) -> Option<V>)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    V: Entry,
{
    let backoff = WatchBackoff::new(cache.starts.clone(), cache.plural.clone());
    let stream = watcher::watcher(api, config).backoff(backoff);
    let mut stream = std::pin::pin!(stream);
    while let Some(item) = stream.next().await {
        match item {
            Ok(Event::Init) => cache.begin(),
            Ok(Event::InitApply(obj)) => cache.buffer(key_of(&obj), convert(obj)),
            Ok(Event::InitDone) => cache.done(),
            Ok(Event::Apply(obj)) => cache.upsert(key_of(&obj), convert(obj)),
            Ok(Event::Delete(obj)) => cache.remove(&key_of(&obj)),
            Err(e) => {
                if matches!(&e, watcher::Error::InitialListFailed(kube::Error::Api(s)) if s.code == 404) {
                    cache.not_served();
                }
                cache.error();
                tracing::warn!(kind = cache.kind, error = %e, "watch failed; retrying after a backoff");
            }
        }
    }
}

impl KubeStore {
    /// Creates the caches over the cluster `config` names and starts one watcher task per
    /// kind on the current runtime. Restarts are counted in `metrics`. The client is built
    /// here, with a [`WatchStartLayer`] in its stack, so that a resumed watch on a quiet kind
    /// is seen to have caught up.
    pub fn start(
        config: kube::Config,
        options: &KubeOptions,
        metrics: &Metrics,
    ) -> Result<Arc<Self>, crate::Error> {
        let layer = WatchStartLayer::new();
        let client = crate::cluster::client_with(config, &layer)?;
        let tracking = Tracking {
            starts: layer.starts(),
            max_staleness: options.max_staleness,
        };
        let t = &tracking;
        let store = KubeStore {
            checkpoints: Arc::new(Cache::new(KINDS[0], &plural::<GpuCheckpoint>(), t, metrics)),
            gpu_nodes: Arc::new(Cache::new(KINDS[1], &plural::<GpuNode>(), t, metrics)),
            pods: Arc::new(Cache::new(KINDS[2], &plural::<WatchedPod>(), t, metrics)),
            nodes: Arc::new(Cache::new(KINDS[3], &plural::<Node>(), t, metrics)),
            slices: Arc::new(Cache::new(KINDS[4], &plural::<ResourceSlice>(), t, metrics)),
            claims: Arc::new(Cache::new(KINDS[5], &plural::<ResourceClaim>(), t, metrics)),
            snapshots: Arc::new(Cache::new(KINDS[6], &plural::<PodSnapshot>(), t, metrics)),
            contents: Arc::new(Cache::new(KINDS[7], &plural::<PodSnapshotContent>(), t, metrics)),
            inventories: Mutex::new(HashMap::new()),
            tasks: Mutex::new(Vec::new()),
        };
        let base = watcher::Config::default();
        let mut pods = base.clone().page_size(POD_PAGE_SIZE);
        if let Some(sel) = options.restore_pod_selector.as_deref().filter(|s| !s.is_empty()) {
            pods = pods.labels(sel);
        }
        let slices = base.clone().fields(&format!("spec.driver={NVIDIA_DRA_DRIVER}"));
        let tasks = vec![
            tokio::spawn(feed(
                Api::<GpuCheckpoint>::all(client.clone()),
                base.clone(),
                store.checkpoints.clone(),
                checkpoint_of,
            )),
            tokio::spawn(feed(
                Api::<GpuNode>::all(client.clone()),
                base.clone(),
                store.gpu_nodes.clone(),
                gpu_node_of,
            )),
            tokio::spawn(feed(
                Api::<WatchedPod>::all(client.clone()),
                pods,
                store.pods.clone(),
                restore_pod_of,
            )),
            tokio::spawn(feed(
                Api::<Node>::all(client.clone()),
                base,
                store.nodes.clone(),
                node_of,
            )),
            tokio::spawn(feed(
                Api::<ResourceSlice>::all(client.clone()),
                slices,
                store.slices.clone(),
                slice_of,
            )),
            tokio::spawn(feed(
                Api::<ResourceClaim>::all(client.clone()),
                watcher::Config::default(),
                store.claims.clone(),
                claim_of,
            )),
            tokio::spawn(feed(
                Api::<PodSnapshot>::all(client.clone()),
                watcher::Config::default(),
                store.snapshots.clone(),
                snapshot_of,
            )),
            tokio::spawn(feed(
                Api::<PodSnapshotContent>::all(client),
                watcher::Config::default(),
                store.contents.clone(),
                content_of,
            )),
        ];
        *store.tasks.lock().unwrap_or_else(|p| p.into_inner()) = tasks;
        Ok(Arc::new(store))
    }

    /// Every cache, in [`KINDS`] order.
    fn caches(&self) -> [&dyn Watched; 8] {
        [
            &*self.checkpoints,
            &*self.gpu_nodes,
            &*self.pods,
            &*self.nodes,
            &*self.slices,
            &*self.claims,
            &*self.snapshots,
            &*self.contents,
        ]
    }

    /// Every cache's state, in [`KINDS`] order.
    pub fn status(&self) -> Vec<CacheStatus> {
        self.caches().iter().map(|c| c.status()).collect()
    }

    /// Whether any cache has been behind longer than the bound (see [`CacheStatus::failing`]).
    pub fn failing(&self) -> bool {
        self.caches().iter().any(|c| c.failing())
    }

    /// Waits until every cache has synced, or `timeout` passes; returns whether they did.
    pub async fn wait_synced(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.synced() {
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// How many checkpoints are cached.
    pub fn checkpoint_count(&self) -> usize {
        self.checkpoints.len()
    }
}

impl Lookup for KubeStore {
    fn too_stale(&self) -> Option<Staleness> {
        let (kind, stale, max) = self
            .caches()
            .iter()
            .map(|c| (c.kind(), c.staleness(), c.max_staleness()))
            .filter(|(_, stale, max)| stale > max)
            .max_by_key(|(_, stale, _)| *stale)?;
        Some(Staleness {
            kind,
            seconds: stale.as_secs(),
            max_seconds: max.as_secs(),
        })
    }

    fn synced(&self) -> bool {
        self.caches().iter().all(|c| c.synced())
    }

    fn checkpoint(&self, namespace: &str, name: &str) -> Option<Arc<Checkpoint>> {
        self.checkpoints.get(&format!("{namespace}/{name}"))
    }

    fn inventory(&self, node: &str) -> Result<NodeInventory, NoInventory> {
        let gpu_node = self.gpu_nodes.get(node);
        let n = self.nodes.get(node);
        let slices = self.slices.by_index(node);
        let mut memos = self.inventories.lock().unwrap_or_else(|p| p.into_inner());
        if gpu_node.is_none() && n.is_none() && slices.is_empty() {
            // Nothing known of this node: forget it, so names no object carries (a pod may
            // name any node) leave nothing behind.
            memos.remove(node);
            return Err(NoInventory::default());
        }
        if let Some(m) = memos.get(node).filter(|m| m.read_from(&gpu_node, &n, &slices)) {
            return m.inventory.clone();
        }
        let refs: Vec<&ResourceSlice> = slices.iter().map(|s| &**s).collect();
        let inventory = best_or_why(&miggate_crds::inventory::NodeObjects {
            gpu_node: gpu_node.as_deref(),
            node: n.as_deref(),
            slices: &refs,
        })
        .map(NodeInventory::from);
        memos.insert(
            node.to_string(),
            Memo {
                gpu_node,
                node: n,
                slices,
                inventory: inventory.clone(),
            },
        );
        // Nodes come and go (autoscaling): a memo of a node deleted and never asked about
        // again would hold its objects forever. Past twice the nodes known, forget those no
        // cache holds any more; amortised, that is constant work per lookup.
        let known = self.nodes.len().max(self.gpu_nodes.len());
        if memos.len() > 2 * known + MEMO_SLACK {
            memos.retain(|name, _| {
                self.gpu_nodes.get(name).is_some()
                    || self.nodes.get(name).is_some()
                    || !self.slices.by_index(name).is_empty()
            });
        }
        inventory
    }

    fn restore_pod(&self, namespace: &str, name: &str) -> Option<Arc<RestorePod>> {
        self.pods.get(&format!("{namespace}/{name}"))
    }

    fn snapshot(&self, namespace: &str, name: &str) -> SnapshotLookup {
        if !self.snapshots.served.load(Ordering::Acquire) {
            return SnapshotLookup::NotServed;
        }
        let Some(snapshot) = self.snapshots.get(&format!("{namespace}/{name}")) else {
            return SnapshotLookup::Missing;
        };
        let Some(bound) = snapshot.bound.as_deref() else {
            return SnapshotLookup::Unbound;
        };
        match self.contents.get(bound) {
            Some(content) => SnapshotLookup::Bound(content),
            None => SnapshotLookup::ContentMissing(bound.to_string()),
        }
    }

    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<ClaimAllocation>> {
        self.claims.get(&format!("{namespace}/{name}"))
    }

    fn keeps_claims(&self) -> bool {
        self.claims.served.load(Ordering::Acquire)
    }

    fn slices(&self, node: &str) -> Vec<Arc<ResourceSlice>> {
        self.slices.by_index(node)
    }
}

impl KubeStore {
    /// Whether every claim of restore pod `namespace/name` is in the cache and allocated
    /// (true for a pod the cache does not hold, or one without claims). The scheduler writes
    /// a claim's allocation just before it binds the pod, so the claim's watch event may
    /// arrive a moment after the binding's admission request: the server waits on this.
    pub fn claims_allocated(&self, namespace: &str, name: &str) -> bool {
        let Some(pod) = self.restore_pod(namespace, name) else {
            return true;
        };
        !self.keeps_claims()
            || pod
                .claims
                .iter()
                .all(|c| self.claim(namespace, c).is_some_and(|a| a.devices.is_some()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_restore_pod_keeps_its_containers_gpu_asks_within_bounds() {
        let pod = |containers: serde_json::Value| -> WatchedPod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "namespace": "ml", "annotations": {"miggate.io/restore-from": "ck"}},
                "spec": {"containers": containers}}))
            .unwrap()
        };
        let kept = restore_pod_of(pod(serde_json::json!([
            {"name": "sidecar", "resources": {"limits": {"cpu": "1"}}},
            {"name": "vllm", "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2", "memory": "1Gi"},
                "claims": [{"name": "gpus"}]}},
        ])))
        .unwrap();
        assert_eq!(kept.gpu_asks.len(), 1, "only containers asking for GPUs");
        let ask = &kept.gpu_asks[0];
        assert_eq!(ask.container, "vllm");
        assert_eq!(
            ask.requests.get("nvidia.com/gpu").map(|q| q.as_str()),
            Some("2"),
            "the limit stands"
        );
        assert_eq!(ask.claims, ["gpus"]);
        // Past the bound, nothing is kept: the binding then leaves gpu-request alone.
        let many: Vec<serde_json::Value> = (0..=GpuAsk::MAX)
            .map(|i| serde_json::json!({"name": format!("c{i}"), "resources": {"limits": {"nvidia.com/gpu": "1"}}}))
            .collect();
        assert!(
            restore_pod_of(pod(serde_json::Value::Array(many)))
                .unwrap()
                .gpu_asks
                .is_empty()
        );
    }

    /// A restore pod whose kept annotation is oversized stays a restore pod, the value its
    /// marker: dropping it would let the pod's binding pass unchecked.
    #[rstest::rstest]
    #[case::ours(json!({"miggate.io/restore-from": "ck", "miggate.io/skip-checks": "x"}), |p: &RestorePod| p.skip_checks.clone())]
    #[case::our_reference(json!({"miggate.io/restore-from": "x"}), |p: &RestorePod| p.restore_from.clone())]
    #[case::peer_reference(json!({"nvidia.com/restore-from": "x"}), |p: &RestorePod| p.peer.as_ref().map(|p| p.restore_from.clone()))]
    #[case::peer_map(json!({"nvidia.com/restore-from": "s", "nvidia.com/restore-container-map": "x"}),
        |p: &RestorePod| p.peer.as_ref().and_then(|p| p.container_map.clone()))]
    #[case::peer_skip(json!({"nvidia.com/restore-from": "s", "nvidia.com/snapshot-skip-compat-check": "x"}),
        |p: &RestorePod| p.peer.as_ref().and_then(|p| p.skip.clone()))]
    fn an_oversized_restore_annotation_keeps_the_pod_with_a_marker(
        #[case] mut annotations: serde_json::Value,
        #[case] read: fn(&RestorePod) -> Option<String>,
    ) {
        let over = MAX_KEPT_ANNOTATION_BYTES + 1;
        for v in annotations.as_object_mut().unwrap().values_mut() {
            if v == "x" {
                *v = json!("a".repeat(over));
            }
        }
        let pod: WatchedPod =
            serde_json::from_value(json!({"metadata": {"name": "p", "annotations": annotations}})).unwrap();
        let kept = restore_pod_of(pod).expect("still a restore pod");
        assert_eq!(
            read(&kept).as_deref(),
            Some(format!("<value of {over} bytes not kept: over the 16384-byte bound>").as_str())
        );
    }

    #[test]
    fn a_failed_watch_retries_within_seconds_forever_and_starts_over_after_a_reset() {
        use kube::runtime::utils::Backoff;
        let starts = Arc::new(WatchStarts::default());
        let mut backoff = WatchBackoff::new(starts.clone(), "gpunodes".into());
        let waits: Vec<Duration> = backoff.by_ref().take(200).collect();
        assert_eq!(waits.len(), 200, "never gives up");
        assert!(
            waits[0] >= WATCH_RETRY_MIN && waits[0] < WATCH_RETRY_MIN * 2,
            "{waits:?}"
        );
        assert!(waits.iter().all(|w| *w < WATCH_RETRY_MAX * 2), "{waits:?}");
        assert!(
            waits[10..].iter().all(|w| *w >= WATCH_RETRY_MAX),
            "capped, not shrinking: {waits:?}"
        );
        // Jitter: the capped waits are not all alike, so replicas do not retry in step.
        assert!(waits[10..].iter().any(|w| *w != waits[10]), "{waits:?}");
        backoff.reset();
        let first = backoff.next().unwrap();
        assert!(first < WATCH_RETRY_MIN * 2, "{first:?}");
        // Capped again, then the server accepts a watch of the kind (of another kind: nothing).
        let _: Vec<Duration> = backoff.by_ref().take(10).collect();
        starts.record("pods", Instant::now());
        assert!(backoff.next().unwrap() >= WATCH_RETRY_MAX);
        starts.record("gpunodes", Instant::now());
        let after = backoff.next().unwrap();
        assert!(
            after < WATCH_RETRY_MIN * 2,
            "starts over after an accepted watch: {after:?}"
        );
        assert!(backoff.next().unwrap() >= WATCH_RETRY_MIN * 2, "once");
    }

    #[test]
    fn a_relist_is_swapped_in_whole_and_the_index_follows() {
        let metrics = Metrics::new();
        let cache: Cache<ResourceSlice> = Cache::new(
            "ResourceSlice",
            "resourceslices",
            &Tracking::for_tests(),
            &metrics,
        );
        let slice = |name: &str, node: &str| {
            let mut s = ResourceSlice::default();
            s.metadata.name = Some(name.into());
            s.spec.node_name = Some(node.into());
            s
        };
        cache.begin();
        cache.buffer("a".into(), Some(slice("a", "n1")));
        assert_eq!(cache.len(), 0, "nothing visible before the list is done");
        cache.done();
        assert_eq!(cache.by_index("n1").len(), 1);
        cache.upsert("a".into(), Some(slice("a", "n2")));
        assert!(cache.by_index("n1").is_empty());
        assert_eq!(cache.by_index("n2").len(), 1);
        cache.begin();
        cache.buffer("b".into(), Some(slice("b", "n2")));
        assert_eq!(cache.by_index("n2")[0].metadata.name.as_deref(), Some("a"));
        cache.done();
        assert_eq!(cache.by_index("n2")[0].metadata.name.as_deref(), Some("b"));
        cache.remove("b");
        assert!(cache.by_index("n2").is_empty());
        assert_eq!(
            metrics
                .watch_restarts
                .get_or_create(&KindLabel {
                    kind: "ResourceSlice"
                })
                .get(),
            1
        );
    }

    #[test]
    fn memos_of_deleted_nodes_do_not_pile_up() {
        let metrics = Metrics::new();
        let store = KubeStore {
            checkpoints: Arc::new(Cache::new(KINDS[0], "test", &Tracking::for_tests(), &metrics)),
            gpu_nodes: Arc::new(Cache::new(KINDS[1], "test", &Tracking::for_tests(), &metrics)),
            pods: Arc::new(Cache::new(KINDS[2], "test", &Tracking::for_tests(), &metrics)),
            nodes: Arc::new(Cache::new(KINDS[3], "test", &Tracking::for_tests(), &metrics)),
            slices: Arc::new(Cache::new(KINDS[4], "test", &Tracking::for_tests(), &metrics)),
            claims: Arc::new(Cache::new(KINDS[5], "test", &Tracking::for_tests(), &metrics)),
            snapshots: Arc::new(Cache::new(KINDS[6], "test", &Tracking::for_tests(), &metrics)),
            contents: Arc::new(Cache::new(KINDS[7], "test", &Tracking::for_tests(), &metrics)),
            inventories: Mutex::new(HashMap::new()),
            tasks: Mutex::new(Vec::new()),
        };
        let node = |name: &str| {
            let mut n = Node::default();
            n.metadata.name = Some(name.into());
            n
        };
        // An autoscaled pool: 1000 nodes come, are asked about once, and go.
        for i in 0..1000 {
            let name = format!("n{i}");
            store.nodes.upsert(name.clone(), Some(node(&name)));
            assert!(store.inventory(&name).is_err());
            store.nodes.remove(&name);
        }
        store.nodes.upsert("live".into(), Some(node("live")));
        assert!(store.inventory("live").is_err());
        let memos = store.inventories.lock().unwrap().len();
        assert!(memos <= 2 + MEMO_SLACK, "{memos} memos kept for 1 live node");
        assert!(store.inventories.lock().unwrap().contains_key("live"));
    }

    #[test]
    fn a_restore_pod_keeps_its_claim_names_from_spec_and_status() {
        let pod: WatchedPod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ml", "annotations": {"miggate.io/restore-from": "ck"}},
            "spec": {"containers": [], "resourceClaims": [
                {"name": "own", "resourceClaimName": "shared-gpus"},
                {"name": "made", "resourceClaimTemplateName": "t"}]},
            "status": {"resourceClaimStatuses": [
                {"name": "made", "resourceClaimName": "p-made-x7k2"},
                {"name": "own", "resourceClaimName": "shared-gpus"}]}}))
        .unwrap();
        assert_eq!(
            restore_pod_of(pod).unwrap().claims,
            vec!["shared-gpus".to_string(), "p-made-x7k2".to_string()]
        );
    }

    #[test]
    fn only_restore_pods_are_kept_and_nodes_are_stripped() {
        let pod = |annotations: serde_json::Value| -> WatchedPod {
            serde_json::from_value(serde_json::json!({"metadata": {"name": "p", "annotations": annotations}}))
                .unwrap()
        };
        assert!(restore_pod_of(WatchedPod::default()).is_none());
        assert!(restore_pod_of(pod(serde_json::json!({"other": "x"}))).is_none());
        assert_eq!(
            restore_pod_of(pod(serde_json::json!({
                miggate_wire::annotations::RESTORE_FROM: "ck",
                "other": "x".repeat(1000),
            }))),
            Some(RestorePod {
                restore_from: Some("ck".into()),
                ..RestorePod::default()
            })
        );
        let mut n = Node::default();
        n.metadata.name = Some("n1".into());
        n.metadata.annotations = Some(BTreeMap::from([("a".to_string(), "b".to_string())]));
        n.status = Some(NodeStatus {
            images: Some(vec![Default::default()]),
            ..NodeStatus::default()
        });
        let kept = node_of(n).unwrap();
        assert!(kept.metadata.annotations.is_none());
        assert!(kept.status.unwrap().images.is_none());
    }
}
