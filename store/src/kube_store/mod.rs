//! The Kubernetes store (`--store kube`): watch caches over `GpuCheckpoint`, `GpuNode`, restore
//! pods, Nodes, the NVIDIA DRA driver's `ResourceSlice`s and `ResourceClaim`s, and the Go
//! peer's `PodSnapshot`s and `PodSnapshotContent`s, filled by kube-runtime's `watcher` and read
//! by admission without a request to the API server.
//!
//! Each kind has one [`watcher()`] stream (a streaming list, then the same watch's changes,
//! bookmarks on; where the server refuses to stream, one list from the server's watch cache
//! decoded as it arrives, then a watch from its `resourceVersion`: `watch::feed`,
//! `whole::list_then_watch`), wrapped in a backoff (`WatchBackoff`): a watch that
//! ends is resumed from its last version, one answered `410 Gone` (or an error) is re-listed
//! after a backoff (0.25 s doubling to [`WATCH_RETRY_MAX`], each wait plus up to as much again
//! of jitter, so never 2 s; reset by the first event received, and by a watch the server
//! accepts). A re-list is buffered and swapped in whole when it
//! completes, so a decision never sees half a list. Each cache converts objects as they
//! arrive and keeps only what decisions read: a restore pod is its UID and restore
//! annotations, a Node its `nvidia.com/` labels, capacity and `nodeInfo`, a `PodSnapshot` its
//! UID and the content it is bound to, a content its back-pointer and `status.source`
//! translated; pods without `miggate.io/restore-from` or `nvidia.com/restore-from` are
//! dropped. Every kind is read lean as it is parsed ([`lean`]; pods as a `WatchedPod`, a kept
//! annotation bounded by [`MAX_KEPT_ANNOTATION_BYTES`]): every field, annotation and label no
//! decision reads is skipped unallocated. A list, streamed or not, is decoded one object at a
//! time as it arrives: what tenants add to their objects, however large, and however many, is
//! never held whole.
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

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::runtime::watcher;
use miggate_crds::GpuNode;

pub use crate::cache_status::CacheStatus;
use crate::freshness::{DEFAULT_MAX_STALENESS, WatchStartLayer};
use miggate_admission::lookup::Checkpoint;
use miggate_admission::lookup::{
    ClaimAllocation, Content, Inventory, Lookup, NoInventory, RestorePod, SnapshotLookup, Staleness,
};
use miggate_inventory::best_or_why;
pub use watched_pod::MAX_KEPT_ANNOTATION_BYTES;
use watched_pod::WatchedPod;

/// The DRA driver whose `ResourceSlice`s describe NVIDIA GPUs.
pub use miggate_wire::dra::DRIVER as NVIDIA_DRA_DRIVER;

mod backoff;
mod cache;
mod convert;
mod counters;
pub mod lean;
mod watch;
pub mod watched_pod;
mod whole;

pub use backoff::WATCH_RETRY_MAX;
use cache::{Cache, SnapshotEntry, Tracking, Watched};
use convert::{
    checkpoint_of, claim_of, content_of, gpu_node_of, node_of, restore_pod_of, slice_of, snapshot_of,
};
pub use counters::{KindLabel, WatchCounters};
use lean::{
    WatchedCheckpoint, WatchedClaim, WatchedContent, WatchedGpuNode, WatchedNode, WatchedSlice,
    WatchedSnapshot,
};
use watch::feed;

/// How the caches select what they watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeOptions {
    /// A label selector for restore pods (`--restore-pod-selector`), parsed. Annotations
    /// cannot be selected by the API server, so without one every pod is watched and all but
    /// restore pods are dropped on arrival; with one, only matching pods are sent at all (the
    /// decision refuses a restore pod it does not select, with this same value).
    pub restore_pod_selector: Option<miggate_admission::selector::RestorePodSelector>,
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
    inventory: Result<Inventory, NoInventory>,
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

impl KubeStore {
    /// Creates the caches over the cluster `config` names and starts one watcher task per
    /// kind on the current runtime. Restarts and failures are counted in `counters`. The client is built
    /// here, with a [`WatchStartLayer`] in its stack, so that a resumed watch on a quiet kind
    /// is seen to have caught up.
    pub fn start(
        config: kube::Config,
        options: &KubeOptions,
        counters: &WatchCounters,
    ) -> Result<Arc<Self>, crate::Error> {
        let layer = WatchStartLayer::new();
        let client = crate::cluster::client_with(config, &layer)?;
        let tracking = Tracking {
            starts: layer.starts(),
            max_staleness: options.max_staleness,
        };
        let store = KubeStore::empty(&tracking, counters);
        let base = watcher::Config::default();
        let mut pods = watcher::Config::default();
        if let Some(sel) = options.restore_pod_selector.as_ref().filter(|s| !s.selects_all()) {
            pods = pods.labels(sel.as_str());
        }
        let slices = base.clone().fields(&format!("spec.driver={NVIDIA_DRA_DRIVER}"));
        let tasks = vec![
            tokio::spawn(feed::<WatchedCheckpoint, _>(
                client.clone(),
                base.clone(),
                store.checkpoints.clone(),
                checkpoint_of,
            )),
            tokio::spawn(feed::<WatchedGpuNode, _>(
                client.clone(),
                base.clone(),
                store.gpu_nodes.clone(),
                gpu_node_of,
            )),
            tokio::spawn(feed::<WatchedPod, _>(
                client.clone(),
                pods,
                store.pods.clone(),
                restore_pod_of,
            )),
            tokio::spawn(feed::<WatchedNode, _>(
                client.clone(),
                base.clone(),
                store.nodes.clone(),
                node_of,
            )),
            tokio::spawn(feed::<WatchedSlice, _>(
                client.clone(),
                slices,
                store.slices.clone(),
                slice_of,
            )),
            tokio::spawn(feed::<WatchedClaim, _>(
                client.clone(),
                base.clone(),
                store.claims.clone(),
                claim_of,
            )),
            tokio::spawn(feed::<WatchedSnapshot, _>(
                client.clone(),
                base.clone(),
                store.snapshots.clone(),
                snapshot_of,
            )),
            tokio::spawn(feed::<WatchedContent, _>(
                client,
                base,
                store.contents.clone(),
                content_of,
            )),
        ];
        *store.tasks.lock().unwrap_or_else(|p| p.into_inner()) = tasks;
        Ok(Arc::new(store))
    }

    /// The caches, empty, each named by the kind it watches.
    fn empty(tracking: &Tracking, counters: &WatchCounters) -> Self {
        KubeStore {
            checkpoints: Cache::of::<WatchedCheckpoint>(tracking, counters),
            gpu_nodes: Cache::of::<WatchedGpuNode>(tracking, counters),
            pods: Cache::of::<WatchedPod>(tracking, counters),
            nodes: Cache::of::<WatchedNode>(tracking, counters),
            slices: Cache::of_optional::<WatchedSlice>(tracking, counters),
            claims: Cache::of_optional::<WatchedClaim>(tracking, counters),
            snapshots: Cache::of_optional::<WatchedSnapshot>(tracking, counters),
            contents: Cache::of_optional::<WatchedContent>(tracking, counters),
            inventories: Mutex::new(HashMap::new()),
            tasks: Mutex::new(Vec::new()),
        }
    }

    /// Every cache, in the order of [`KubeStore::status`].
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

    /// Every cache's state: `GpuCheckpoint`, `GpuNode`, `Pod`, `Node`, `ResourceSlice`,
    /// `ResourceClaim`, `PodSnapshot`, `PodSnapshotContent`.
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

    /// How many Nodes that have GPUs by their labels or capacity
    /// ([`miggate_inventory::is_gpu_node`]) no inventory source describes: restores
    /// bound there pass unchecked. The `miggate_gpu_nodes_without_inventory` gauge.
    pub fn gpu_nodes_without_inventory(&self) -> usize {
        let gpu_nodes: Vec<String> = self
            .nodes
            .read()
            .items
            .iter()
            .filter(|(_, node)| miggate_inventory::is_gpu_node(node))
            .map(|(name, _)| name.clone())
            .collect();
        gpu_nodes
            .iter()
            .filter(|name| self.inventory(name).is_err())
            .count()
    }
}

impl Lookup for KubeStore {
    fn too_stale(&self) -> Option<Staleness> {
        let (kind, stale, max) = self
            .caches()
            .iter()
            .map(|c| (c.kind().clone(), c.staleness(), c.max_staleness()))
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

    fn inventory(&self, node: &str) -> Result<Inventory, NoInventory> {
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
        let inventory = best_or_why(&miggate_inventory::NodeObjects {
            gpu_node: gpu_node.as_deref(),
            node: n.as_deref(),
            slices: &refs,
        });
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
            Some(content) => SnapshotLookup::Bound {
                content,
                snapshot_uid: snapshot.uid.clone(),
            },
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
    /// Whether every claim of restore pod `namespace/name` (of UID `uid`, when the Binding
    /// names one) is in the cache and allocated (true for a pod the cache does not hold, or one
    /// without claims). The scheduler writes a claim's allocation just before it binds the pod,
    /// so the claim's watch event may arrive a moment after the binding's admission request:
    /// the server waits on this.
    pub fn claims_allocated(&self, namespace: &str, name: &str, uid: Option<&str>) -> bool {
        let Some(pod) = self.bound_restore_pod(namespace, name, uid) else {
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
    use std::collections::BTreeMap;

    use crate::cache_status::ListMode;
    use k8s_openapi::api::core::v1::NodeStatus;

    use super::counters::KindLabel;
    use super::*;
    use miggate_admission::lookup::{GpuAsk, RestoreAnnotations};
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
    #[case::ours(json!({"miggate.io/restore-from": "ck", "miggate.io/skip-checks": "x"}), |p: &RestorePod| p.annotations.skip_checks.clone())]
    #[case::our_reference(json!({"miggate.io/restore-from": "x"}), |p: &RestorePod| p.annotations.restore_from.clone())]
    #[case::peer_reference(json!({"nvidia.com/restore-from": "x"}), |p: &RestorePod| p.annotations.peer_restore_from.clone())]
    #[case::peer_map(json!({"nvidia.com/restore-from": "s", "nvidia.com/restore-container-map": "x"}),
        |p: &RestorePod| p.annotations.peer_container_map.clone())]
    #[case::peer_skip(json!({"nvidia.com/restore-from": "s", "nvidia.com/snapshot-skip-compat-check": "x"}),
        |p: &RestorePod| p.annotations.peer_skip.clone())]
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

    /// A slice of `node`, named `name`.
    fn slice(name: &str, node: &str) -> ResourceSlice {
        let mut s = ResourceSlice::default();
        s.metadata.name = Some(name.into());
        s.spec.node_name = Some(node.into());
        s
    }

    #[test]
    fn a_relist_keeps_the_values_held_for_objects_that_did_not_change() {
        let counters = WatchCounters::default();
        let cache: Arc<Cache<ResourceSlice>> =
            Cache::of_optional::<ResourceSlice>(&Tracking::for_tests(), &counters);
        cache.begin();
        cache.buffer("a".into(), Some(slice("a", "n1")));
        cache.buffer("b".into(), Some(slice("b", "n1")));
        cache.done(ListMode::Streamed);
        let (a, b) = (cache.get("a").unwrap(), cache.get("b").unwrap());
        cache.begin();
        cache.buffer("a".into(), Some(slice("a", "n1")));
        cache.buffer("b".into(), Some(slice("b", "n2")));
        cache.done(ListMode::Streamed);
        assert!(
            Arc::ptr_eq(&a, &cache.get("a").unwrap()),
            "unchanged: the value held"
        );
        assert!(
            !Arc::ptr_eq(&b, &cache.get("b").unwrap()),
            "changed: the new value"
        );
        assert_eq!(cache.get("b").unwrap().spec.node_name.as_deref(), Some("n2"));
        assert_eq!(cache.by_index("n2").len(), 1);
    }

    #[test]
    fn a_relist_is_swapped_in_whole_and_the_index_follows() {
        let counters = WatchCounters::default();
        let cache: Arc<Cache<ResourceSlice>> =
            Cache::of_optional::<ResourceSlice>(&Tracking::for_tests(), &counters);
        cache.begin();
        cache.buffer("a".into(), Some(slice("a", "n1")));
        assert_eq!(cache.len(), 0, "nothing visible before the list is done");
        cache.done(ListMode::Streamed);
        assert_eq!(cache.by_index("n1").len(), 1);
        cache.upsert("a".into(), Some(slice("a", "n2")));
        assert!(cache.by_index("n1").is_empty());
        assert_eq!(cache.by_index("n2").len(), 1);
        cache.begin();
        cache.buffer("b".into(), Some(slice("b", "n2")));
        assert_eq!(cache.by_index("n2")[0].metadata.name.as_deref(), Some("a"));
        cache.done(ListMode::Streamed);
        assert_eq!(cache.by_index("n2")[0].metadata.name.as_deref(), Some("b"));
        cache.remove("b");
        assert!(cache.by_index("n2").is_empty());
        assert_eq!(
            counters
                .restarts
                .get_or_create(&KindLabel {
                    kind: "ResourceSlice".into()
                })
                .get(),
            1
        );
    }

    #[test]
    fn memos_of_deleted_nodes_do_not_pile_up() {
        let counters = WatchCounters::default();
        let store = KubeStore::empty(&Tracking::for_tests(), &counters);
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
                annotations: RestoreAnnotations {
                    restore_from: Some("ck".into()),
                    ..RestoreAnnotations::default()
                },
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
        let wire: WatchedNode = serde_json::from_value(serde_json::to_value(&n).unwrap()).unwrap();
        let kept = node_of(wire).unwrap();
        assert!(kept.metadata.annotations.is_none());
        assert!(kept.status.unwrap().images.is_none());
    }
}
