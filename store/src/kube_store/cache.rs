//! One watch cache: its entries, how current it is (from the watch's events and the
//! freshness layer), and what `/readyz` and the metrics read of it.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::Resource;
use miggate_crds::GpuNode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use super::counters::{KindLabel, WatchCounters};
use crate::cache_status::{CacheStatus, ListMode};
#[cfg(test)]
use crate::freshness::DEFAULT_MAX_STALENESS;
use crate::freshness::{Freshness, WatchStarts};
use miggate_admission::lookup::Checkpoint;
use miggate_admission::lookup::{ClaimAllocation, Content, RestorePod};

/// What every cache shares to tell how current it is.
#[derive(Debug, Clone)]
pub(crate) struct Tracking {
    pub(super) starts: Arc<WatchStarts>,
    pub(super) max_staleness: Duration,
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

/// A value a cache holds, with an optional secondary key (a slice's node). Comparable, so a
/// re-list keeps the value it already holds for an object that did not change.
pub(crate) trait Entry: PartialEq + Send + Sync + 'static {
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

/// What the snapshot cache keeps of a `PodSnapshot`: the content it is bound to, and its UID
/// (to hold against the content's back-pointer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SnapshotEntry {
    /// `status.boundSnapshotContentName`, when bound.
    pub(super) bound: Option<String>,
    /// `metadata.uid`.
    pub(super) uid: Option<String>,
}
impl Entry for ResourceSlice {
    fn index_key(&self) -> Option<&str> {
        self.spec.node_name.as_deref()
    }
}

#[derive(Debug)]
pub(super) struct Contents<V> {
    pub(super) items: HashMap<String, Arc<V>>,
    /// Secondary key to primary keys.
    pub(super) index: HashMap<String, BTreeSet<String>>,
    /// A re-list in progress, swapped in whole at its end.
    pub(super) pending: Option<HashMap<String, Arc<V>>>,
    /// Lists started, the first included.
    pub(super) lists: u64,
    /// How the last completed list was read.
    pub(super) last_list: Option<ListMode>,
}

/// One kind's cache, fed by one watcher.
#[derive(Debug)]
pub(crate) struct Cache<V> {
    pub(super) kind: Cow<'static, str>,
    pub(super) contents: RwLock<Contents<V>>,
    pub(super) synced: AtomicBool,
    /// Whether a source the webhook can do without (ResourceSlices): a server that does not
    /// serve its API counts as an empty, synced cache instead of one never ready.
    pub(super) optional: bool,
    /// False while the server answers the list `404 NotFound` (an optional kind only).
    pub(super) served: AtomicBool,
    pub(super) last_event: Mutex<Option<Instant>>,
    pub(super) errors: AtomicU64,
    /// Since when the cache may be missing changes.
    pub(super) freshness: Freshness,
    /// The resource's plural, as watch requests name it.
    pub(super) plural: String,
    /// The watches the server accepted, recorded by the client's [`WatchStartLayer`].
    pub(super) starts: Arc<WatchStarts>,
    /// How long the cache may be behind before it counts as failing.
    pub(super) max_staleness: Duration,
    pub(super) restarts: Family<KindLabel, Counter>,
    pub(super) error_count: Family<KindLabel, Counter>,
    pub(super) list_fallbacks: Family<KindLabel, Counter>,
    pub(super) lists_streamed: Family<KindLabel, Gauge>,
}

impl<V: Entry> Cache<V> {
    /// The cache of `K`'s objects: its kind and plural are `K`'s own, so a cache is named in
    /// metrics, logs and `/readyz` as its type names itself on the wire.
    pub(super) fn of<K: Resource<DynamicType = ()>>(
        tracking: &Tracking,
        counters: &WatchCounters,
    ) -> Arc<Self> {
        Arc::new(Cache::new::<K>(false, tracking, counters).counted_from_zero())
    }

    /// The cache of a kind a cluster may not serve: DRA's before Kubernetes 1.34, the Go
    /// peer's where its CRDs are not installed. A server that answers its list `404` counts
    /// as an empty, synced cache, and the watch keeps retrying, so a kind installed later is
    /// picked up.
    pub(super) fn of_optional<K: Resource<DynamicType = ()>>(
        tracking: &Tracking,
        counters: &WatchCounters,
    ) -> Arc<Self> {
        Arc::new(Cache::new::<K>(true, tracking, counters).counted_from_zero())
    }

    /// The cache's counters exported at 0 from the start: a series that appears only with its
    /// first count is one `increase()` never counts, so an alert on the first re-list or
    /// error would not fire.
    fn counted_from_zero(self) -> Self {
        let label = self.label();
        drop(self.restarts.get_or_create(&label));
        drop(self.error_count.get_or_create(&label));
        self
    }

    fn new<K: Resource<DynamicType = ()>>(
        optional: bool,
        tracking: &Tracking,
        counters: &WatchCounters,
    ) -> Self {
        Cache {
            optional,
            kind: K::kind(&()),
            served: AtomicBool::new(true),
            contents: RwLock::new(Contents {
                items: HashMap::new(),
                index: HashMap::new(),
                pending: None,
                lists: 0,
                last_list: None,
            }),
            synced: AtomicBool::new(false),
            last_event: Mutex::new(None),
            errors: AtomicU64::new(0),
            freshness: Freshness::default(),
            plural: K::plural(&()).into_owned(),
            starts: tracking.starts.clone(),
            max_staleness: tracking.max_staleness,
            restarts: counters.restarts.clone(),
            error_count: counters.errors.clone(),
            list_fallbacks: counters.list_fallbacks.clone(),
            lists_streamed: counters.lists_streamed.clone(),
        }
    }

    pub(super) fn read(&self) -> RwLockReadGuard<'_, Contents<V>> {
        self.contents.read().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn write(&self) -> RwLockWriteGuard<'_, Contents<V>> {
        self.contents.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Something arrived from the server: the cache is current.
    pub(super) fn touch(&self) {
        *self.last_event.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        self.freshness.current();
    }

    /// How long the cache may have been missing changes: zero while current, and for a kind
    /// the server does not serve (there is nothing to miss).
    pub(super) fn staleness(&self) -> Duration {
        if !self.served.load(Ordering::Acquire) {
            return Duration::ZERO;
        }
        let now = Instant::now();
        self.freshness
            .behind(now, self.starts.last(&self.plural))
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since))
    }

    /// Whether the cache has been behind longer than the bound: too old to decide on.
    pub(super) fn failing(&self) -> bool {
        self.staleness() > self.max_staleness
    }

    pub(super) fn get(&self, key: &str) -> Option<Arc<V>> {
        self.read().items.get(key).cloned()
    }

    pub(super) fn by_index(&self, key: &str) -> Vec<Arc<V>> {
        let c = self.read();
        c.index
            .get(key)
            .into_iter()
            .flatten()
            .filter_map(|k| c.items.get(k).cloned())
            .collect()
    }

    pub(super) fn len(&self) -> usize {
        self.read().items.len()
    }

    /// A list starts: buffer until it is done. Every list after the first is a restart.
    pub(super) fn begin(&self) {
        let mut c = self.write();
        // Sized for what the cache holds: a re-list's map does not grow by doubling past it.
        c.pending = Some(HashMap::with_capacity(c.items.len()));
        c.lists += 1;
        if c.lists > 1 {
            self.restarts.get_or_create(&self.label()).inc();
            tracing::info!(kind = %self.kind, "watch cache re-listing");
        }
    }

    /// One object of a list in progress. An object the cache already holds unchanged keeps the
    /// value held (the new one is dropped at once), so a re-list of an unchanged cluster, the
    /// API server's restart, costs the cache its map, not a second copy of every value: at
    /// 20,000 restore pods and 20,000 Nodes the copy was 60 MiB of a replica's peak.
    pub(super) fn buffer(&self, key: String, value: Option<V>) {
        let mut c = self.write();
        let Some(v) = value else { return };
        let kept = match c.items.get(&key) {
            Some(held) if **held == v => Arc::clone(held),
            _ => Arc::new(v),
        };
        if let Some(pending) = c.pending.as_mut() {
            pending.insert(key, kept);
        }
    }

    /// A list read as `mode` is complete: its objects replace the cache's.
    pub(super) fn done(&self, mode: ListMode) {
        self.lists_streamed
            .get_or_create(&self.label())
            .set(i64::from(mode == ListMode::Streamed));
        let mut c = self.write();
        let items = c.pending.take().unwrap_or_default();
        c.last_list = Some(mode);
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
            tracing::info!(kind = %self.kind, "API now served and listed");
        }
        if !self.synced.swap(true, Ordering::AcqRel) {
            tracing::info!(kind = %self.kind, objects = count, "watch cache synced");
        }
    }

    pub(super) fn unindex(c: &mut Contents<V>, key: &str) {
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
    pub(super) fn upsert(&self, key: String, value: Option<V>) {
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

    pub(super) fn remove(&self, key: &str) {
        let mut c = self.write();
        Self::unindex(&mut c, key);
        c.items.remove(key);
        drop(c);
        self.touch();
    }

    /// The server does not serve this optional kind's API: nothing to wait for. The cache
    /// is empty and synced; the watcher keeps retrying, and a list that succeeds later fills
    /// it as usual.
    pub(super) fn not_served(&self) {
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
                kind = %self.kind,
                "API not served by this cluster; that inventory source is skipped until it is"
            );
        }
    }

    /// The server refused to stream a list of this kind: the list is read in pages instead.
    /// Not an error: nothing is retried after a backoff, and the cache is no further behind.
    pub(super) fn list_fell_back(&self) {
        self.list_fallbacks.get_or_create(&self.label()).inc();
    }

    /// One failed list or watch (`what`): counted, the cache marked behind, and said in the
    /// log. An optional kind the server does not serve (`not_found`) is not a failure: it is
    /// `miggate_cache_served` 0, and it retries without a warning or a count each time (a
    /// cluster without the Go peer's CRDs would otherwise count an error every backoff, for
    /// ever, and an alert on watch errors would fire on a healthy install).
    pub(super) fn failed(&self, what: &str, e: &dyn std::fmt::Display, not_found: bool) {
        if not_found && self.optional {
            self.not_served();
            tracing::debug!(kind = %self.kind, error = %e, "API not served; retrying after a backoff");
            return;
        }
        if not_found {
            self.not_served();
        }
        self.error();
        tracing::warn!(kind = %self.kind, error = %e, "{what} failed; retrying after a backoff");
    }

    pub(super) fn error(&self) {
        self.freshness
            .failed(Instant::now(), self.starts.last(&self.plural));
        self.errors.fetch_add(1, Ordering::Relaxed);
        self.error_count.get_or_create(&self.label()).inc();
    }

    fn label(&self) -> KindLabel {
        KindLabel {
            kind: self.kind.clone(),
        }
    }

    pub(super) fn status(&self) -> CacheStatus {
        let age = self
            .last_event
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .map(|t| t.elapsed());
        let c = self.read();
        CacheStatus {
            kind: self.kind.clone(),
            synced: self.synced.load(Ordering::Acquire),
            served: self.served.load(Ordering::Acquire),
            failing: self.failing(),
            stale_seconds: self.staleness().as_secs_f64(),
            objects: c.items.len(),
            age_seconds: age.map(|d| d.as_secs_f64()),
            lists: c.lists,
            list: c.last_list,
            errors: self.errors.load(Ordering::Relaxed),
        }
    }
}

/// What the store reads of every cache alike, whatever it holds: so that readiness, status
/// and staleness are one loop over [`KubeStore::caches`], not a list per question.
pub(super) trait Watched: Sync {
    fn synced(&self) -> bool;
    fn kind(&self) -> &Cow<'static, str>;
    fn staleness(&self) -> Duration;
    fn max_staleness(&self) -> Duration;
    fn failing(&self) -> bool;
    fn status(&self) -> CacheStatus;
}

impl<V: Entry> Watched for Cache<V> {
    fn synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }
    fn kind(&self) -> &Cow<'static, str> {
        &self.kind
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
