//! `miggate publish`: keeps a node's `GpuNode` equal to what the node has, so admission can
//! judge a restore against the node without reaching it.
//!
//! Each round captures the node's inventory (through an [`InventorySource`]: the capture
//! crate in production, a stand-in in tests), and server-side applies the `GpuNode` named
//! after the node (field manager `miggate-publish`, forced: the publisher owns the spec) on
//! the first round and whenever the inventory changed since the last write. The capture time
//! is left out of the comparison, so an unchanged node costs no write at all: one GET of its
//! `GpuNode` checks that the server still holds what was applied (same uid and generation),
//! so one deleted or edited by another writer is applied again. When boot
//! recovery's state file is present (`<root>/run/miggate/recovery.json`) its state becomes
//! the `Recovered` condition, written through the `status` subresource when it changes.
//!
//! A failed round (a capture, a write, the API server down) is logged and retried after a
//! bounded exponential backoff with jitter ([`RETRY_FIRST`], doubling, at most [`RETRY_CAP`]
//! and never more than the interval), not at the next interval: what the node had while
//! rounds failed (a changed inventory, a `GpuNode` deleted meanwhile, a recovery state) is
//! written as soon as a round gets through. The first round that succeeds again logs how long
//! rounds failed and resets the backoff. Only a stop request ends [`Publisher::run`], at once,
//! a round or a wait in progress included.
//!
//! Between rounds, [`Publisher::run`] watches its own `GpuNode` (a field selector on its
//! name: one object, as the kubelet watches its own `Node`), so what cannot wait for the
//! next interval does not: a deletion or another writer's spec edit starts a round at once,
//! a watch cut (the API server restarting) starts one to find out whether the server is
//! there, and the watch answering again after failed rounds starts one without waiting out
//! the backoff. A watch refused for want of permission (its role lacks `list` and `watch` on
//! `gpunodes`, or, as measured on kube-apiserver v1.36.2, the API server just restarted and
//! its authorizer has not loaded the RBAC objects yet) is logged once and retried with the
//! backoff, never given up: until it works, rounds notice such things at the interval.

use std::future::Future;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use tokio::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use miggate_compat::GpuManifest;
use miggate_compat::escape::escape;
use miggate_crds::{GpuNode, GpuNodeStatus, RecoveredApply, RecoveredReason};

/// The field manager every write of the publisher uses.
pub const FIELD_MANAGER: &str = "miggate-publish";
/// Boot recovery's state file, under the host root.
pub const RECOVERY_STATE: &str = miggate_wire::recovery::STATE_FILE;
/// The default time between rounds.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
/// The first wait after a failed round (less when the interval is under twice as long),
/// doubled at each failure in a row.
pub const RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest wait after a failed round, jitter included (the interval, when shorter):
/// short enough that a node is written again soon after an API server outage ends, long
/// enough that thousands of publishers do not hammer a server that is coming back.
pub const RETRY_CAP: Duration = Duration::from_secs(30);

/// Why a round failed. Rounds are retried; none of these stops the publisher.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The inventory could not be captured: the source's own error (capture's, for
    /// [`Capture`]: downcast it to tell a missing driver from a timeout).
    #[error("capture failed: {0}")]
    Capture(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The previous round's capture never returned (it panicked), so there is no source to
    /// capture with.
    #[error("capture failed: a previous capture never returned")]
    CaptureLost,
    /// The blocking task the capture ran on failed (it panicked, or the runtime is shutting
    /// down).
    #[error("capture failed: {0}")]
    CaptureTask(#[source] tokio::task::JoinError),
    /// The API server refused or could not be reached.
    // `why`, not `source`: the message carries it once, where a source would be printed again
    // by every reader that walks the chain.
    #[error("cannot {what} GpuNode {node}: {why}")]
    Kube {
        /// `apply`, `read` or `update the status of`.
        what: &'static str,
        /// The node this publisher writes for, and so the `GpuNode`'s name.
        node: String,
        /// Why.
        why: Box<kube::Error>,
    },
    /// No Kubernetes client could be built from the environment.
    #[error("cannot build a Kubernetes client (in-cluster service account or KUBECONFIG): {0}")]
    Client(Box<kube::Error>),
    /// Boot recovery's state file exists but cannot be used.
    #[error("recovery state: {0}")]
    State(#[source] StateError),
}

/// Why boot recovery's state file cannot be used. Paths and outside text are quoted escaped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// It could not be read.
    #[error("{}: reading: {source}", shown(.path))]
    Io {
        /// The state file, `run/miggate/recovery.json` under the host root.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// It is larger than any state recovery writes.
    #[error("{}: larger than {limit} bytes; refusing to read it", shown(.path))]
    TooLarge {
        /// The state file, `run/miggate/recovery.json` under the host root.
        path: PathBuf,
        /// The most bytes a state file may hold (`MAX_STATE_BYTES`).
        limit: u64,
    },
    /// It is not a recovery state (a phase this release does not know, a missing field).
    #[error("{}: unexpected content {}", shown(.path), escape(&format!("not a recovery state: {source}")))]
    Invalid {
        /// The state file, `run/miggate/recovery.json` under the host root.
        path: PathBuf,
        /// What the JSON reader found.
        source: serde_json::Error,
    },
}

/// A path as a message quotes it: escaped and bounded.
fn shown(path: &Path) -> String {
    escape(&path.display().to_string()).into_owned()
}

/// Where inventories come from. Blocking: called off the async executor.
pub trait InventorySource: Send + 'static {
    /// Why a capture failed; carried as the source of [`Error::Capture`].
    type Error: std::error::Error + Send + Sync + 'static;

    /// Captures the node's inventory now.
    fn capture(&mut self) -> Result<GpuManifest, Self::Error>;
}

/// The capture crate as a source: the same backends and options as `miggate capture`.
#[derive(Debug, Clone)]
pub struct Capture(pub miggate_capture::Options);

impl InventorySource for Capture {
    type Error = miggate_capture::Error;

    fn capture(&mut self) -> Result<GpuManifest, miggate_capture::Error> {
        miggate_capture::capture(&self.0)
    }
}

/// A client for the cluster the environment names: the pod's service account in a cluster,
/// else `KUBECONFIG` or `~/.kube/config`.
pub async fn infer_client() -> Result<kube::Client, Error> {
    kube::Client::try_default()
        .await
        .map_err(|e| Error::Client(Box::new(e)))
}

/// What the publisher is told.
#[derive(Debug, Clone)]
pub struct Config {
    /// The node, and so the `GpuNode`'s name.
    pub node: String,
    /// Time between rounds.
    pub interval: Duration,
    /// The host root the recovery state file is found under (`/` on a node, a mount of it in
    /// a container).
    pub root: PathBuf,
    /// The device plugin's MIG strategy on this node (its `migStrategy` setting, GFD's
    /// `nvidia.com/mig.strategy`), written into each inventory that does not carry one: a
    /// capture cannot see it, and `gpu-request` cannot judge `nvidia.com/gpu` without it.
    pub mig_strategy: Option<miggate_compat::MigStrategy>,
}

/// Boot recovery's state file, read with the type recovery writes (their one contract, in
/// `miggate-wire`) so the two sides of the file cannot drift apart.
pub use miggate_wire::recovery::{Phase, RecoveryState};

/// The condition reason a recovery state stands for.
pub fn reason_of(state: &RecoveryState) -> RecoveredReason {
    RecoveredReason::from(state.state)
}

/// The condition message: the step and the message, escaped and bounded.
pub fn condition_message(state: &RecoveryState) -> String {
    let text = match (state.step.as_deref(), state.message.as_deref()) {
        (Some(step), Some(msg)) => format!("{step}: {msg}"),
        (Some(step), None) => step.to_string(),
        (None, Some(msg)) => msg.to_string(),
        (None, None) => String::new(),
    };
    miggate_compat::escape::escape_within(&text, 1024).into_owned()
}

/// Reads the state file under `root`: `Ok(None)` when there is none. At most
/// [`MAX_STATE_BYTES`](miggate_wire::recovery::MAX_STATE_BYTES) are read.
pub fn read_recovery_state(root: &Path) -> Result<Option<RecoveryState>, Error> {
    read_state(&root.join(RECOVERY_STATE)).map_err(Error::State)
}

fn read_state(path: &Path) -> Result<Option<RecoveryState>, StateError> {
    let limit = miggate_wire::recovery::MAX_STATE_BYTES;
    let io = |source| StateError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(StateError::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|source| StateError::Invalid {
            path: path.to_path_buf(),
            source,
        })
}

/// The manifest as compared between rounds: without its capture time.
fn comparable(mut manifest: GpuManifest) -> GpuManifest {
    manifest.captured_at = None;
    manifest
}

/// The waits after failed rounds (and between attempts of the `GpuNode` watch):
/// exponential from [`RETRY_FIRST`], each lengthened by a random share of itself below 100%
/// so that publishers failing together do not retry together, and never longer than the cap
/// (`RETRY_CAP`, or the interval when shorter): the doubling stops at half the cap, which the
/// jitter can at most double. Never gives up; [`Retry::reset`] after a success.
struct Retry {
    builder: backon::ExponentialBuilder,
    current: backon::ExponentialBackoff,
    cap: Duration,
}

impl Retry {
    fn new(interval: Duration) -> Self {
        use backon::BackoffBuilder;
        let cap = interval.min(RETRY_CAP);
        let base_max = cap / 2;
        let builder = backon::ExponentialBuilder::default()
            .with_min_delay(RETRY_FIRST.min(base_max))
            .with_max_delay(base_max)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times();
        Retry {
            current: builder.build(),
            builder,
            cap,
        }
    }

    /// The next wait.
    fn delay(&mut self) -> Duration {
        self.current.next().unwrap_or(self.cap).min(self.cap)
    }

    /// Back to the first wait.
    fn reset(&mut self) {
        use backon::BackoffBuilder;
        self.current = self.builder.build();
    }
}

impl Iterator for Retry {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(self.delay())
    }
}

/// kube-runtime's `StreamBackoff` resets it whenever the watch yields an event.
impl kube::runtime::utils::Backoff for Retry {
    fn reset(&mut self) {
        Retry::reset(self);
    }
}

/// What the watch of the publisher's own `GpuNode` last saw.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    /// Nothing yet.
    Unknown,
    /// The object, by what says whether it is the one last applied.
    Present {
        uid: Option<String>,
        generation: Option<i64>,
    },
    /// No such object: deleted, or never created.
    Absent,
    /// The watch failed (cut, refused, answered with an error): the server may be down.
    Lost,
}

impl Seen {
    fn of(node: &GpuNode) -> Seen {
        Seen::Present {
            uid: node.metadata.uid.clone(),
            generation: node.metadata.generation,
        }
    }
}

/// Whether what the watch saw calls for a round before the current wait ends.
///
/// - Lost while rounds succeed: the server may be gone (a restart), or may have lost what it
///   held; a round finds out, and starts the backoff if it is down. Lost again, or while
///   rounds fail, waits: the backoff already paces the attempts.
/// - Seen again after it was lost: the server answers; a round catches up now rather than at
///   the end of a backoff wait (up to [`RETRY_CAP`]).
/// - Otherwise, while rounds succeed, anything but the object last applied (deleted, edited,
///   re-created) is put right now. While rounds fail, the backoff paces them.
fn early_round(seen: &Seen, ours: &Seen, failing: bool, lost: &mut bool) -> bool {
    match seen {
        Seen::Unknown => false,
        Seen::Lost => !std::mem::replace(lost, true) && !failing,
        Seen::Present { .. } | Seen::Absent => std::mem::take(lost) || (!failing && seen != ours),
    }
}

/// Feeds `seen` from a watch of `node`'s `GpuNode` until the task is aborted. A forbidden
/// watch is retried like any failed one: a restarted API server refuses requests for a moment
/// while its authorizer loads, and a role fixed later should take effect without a restart.
async fn watch_own(
    api: Api<GpuNode>,
    node: String,
    interval: Duration,
    seen: tokio::sync::watch::Sender<Seen>,
) {
    let config = watcher::Config::default().fields(&format!("metadata.name={node}"));
    let events = watcher::watcher(api, config).backoff(Retry::new(interval));
    let mut events = std::pin::pin!(events);
    let mut listed = Seen::Absent;
    let mut refused = false;
    while let Some(event) = events.next().await {
        if event.is_ok() && std::mem::take(&mut refused) {
            tracing::info!(%node, "the watch of GpuNode {node} is allowed again");
        }
        let now = match event {
            Ok(watcher::Event::Init) => {
                listed = Seen::Absent;
                continue;
            }
            Ok(watcher::Event::InitApply(object)) => {
                listed = Seen::of(&object);
                continue;
            }
            Ok(watcher::Event::InitDone) => std::mem::replace(&mut listed, Seen::Absent),
            Ok(watcher::Event::Apply(object)) => Seen::of(&object),
            Ok(watcher::Event::Delete(_)) => Seen::Absent,
            Err(e) if forbidden(&e) => {
                if !std::mem::replace(&mut refused, true) {
                    tracing::warn!(%node, error = %e, "cannot watch GpuNode {node}: retrying with the backoff; until it is allowed, a deletion or an API server restart is noticed at the next round only (the publisher's role needs list and watch on gpunodes)");
                }
                continue;
            }
            Err(e) => {
                tracing::debug!(%node, error = %e, "watch of GpuNode failed");
                Seen::Lost
            }
        };
        seen.send_if_modified(|last| {
            let changed = *last != now;
            *last = now;
            changed
        });
    }
}

/// Whether the API server refused the watch for want of permission.
fn forbidden(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => status.is_forbidden(),
        watcher::Error::WatchError(status) => status.is_forbidden(),
        _ => false,
    }
}

/// Aborts a task when dropped: the watch ends with [`Publisher::run`], however it ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Rounds failing in a row: since when, and how many.
#[derive(Debug, Clone, Copy)]
struct Failing {
    since: Instant,
    rounds: u32,
}

/// What one round did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Round {
    /// Whether the `GpuNode` spec was applied.
    pub applied: bool,
    /// Whether the `Recovered` condition was written.
    pub status_written: bool,
}

/// The publisher: a source, a client, and what it last wrote.
pub struct Publisher<S> {
    api: Api<GpuNode>,
    config: Config,
    source: Option<S>,
    /// The last manifest applied, without its capture time.
    applied: Option<GpuManifest>,
    /// The status as last known from the server, and the state last written.
    status: GpuNodeStatus,
    generation: Option<i64>,
    /// The uid of the object last applied: with the generation, what says the server still
    /// holds that spec (a delete and re-create changes the uid, a spec edit the generation).
    uid: Option<String>,
    written_state: Option<(RecoveredReason, String)>,
}

impl<S> std::fmt::Debug for Publisher<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("config", &self.config)
            .field("applied", &self.applied.is_some())
            .finish_non_exhaustive()
    }
}

fn now() -> Time {
    Time(Timestamp::now())
}

/// The `GpuNode` a round would apply for `node` with this inventory, observed now: what
/// `miggate publish --once` prints instead of writing it.
pub fn node_object(node: &str, manifest: GpuManifest) -> GpuNode {
    GpuNode::from_manifest(node, manifest, now())
}

impl<S: InventorySource> Publisher<S> {
    /// A publisher of `config.node`'s `GpuNode` through `client`.
    pub fn new(client: kube::Client, config: Config, source: S) -> Self {
        Publisher {
            api: Api::all(client),
            config,
            source: Some(source),
            applied: None,
            status: GpuNodeStatus::default(),
            generation: None,
            uid: None,
            written_state: None,
        }
    }

    async fn capture(&mut self) -> Result<GpuManifest, Error> {
        let mut source = self.source.take().ok_or(Error::CaptureLost)?;
        let (source, result) = tokio::task::spawn_blocking(move || {
            let result = source.capture();
            (source, result)
        })
        .await
        .map_err(Error::CaptureTask)?;
        self.source = Some(source);
        result.map_err(|e| Error::Capture(Box::new(e)))
    }

    /// One round: capture, apply when changed, then the recovery state. The state is
    /// reported even when the capture failed (a node mid-recovery may not answer).
    pub async fn round(&mut self) -> Result<Round, Error> {
        let mut round = Round::default();
        let captured = self.capture().await;
        let spec_result = match captured {
            Ok(manifest) => self.apply(manifest).await.map(|applied| round.applied = applied),
            Err(e) => Err(e),
        };
        let status_result = self.report_recovery().await.map(|w| round.status_written = w);
        spec_result?;
        status_result?;
        Ok(round)
    }

    async fn apply(&mut self, mut manifest: GpuManifest) -> Result<bool, Error> {
        if let (Some(strategy), Some(nvidia)) = (self.config.mig_strategy, manifest.nvidia.as_mut()) {
            nvidia.mig_strategy.get_or_insert(strategy);
        }
        let same = comparable(manifest.clone());
        if self.applied.as_ref() == Some(&same) {
            if self.server_has_ours().await? {
                tracing::debug!(node = %self.config.node, "inventory unchanged; nothing written");
                return Ok(false);
            }
            tracing::warn!(node = %self.config.node, "GpuNode deleted or its spec changed by another writer; applying it again");
        }
        let object = node_object(&self.config.node, manifest);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let stored = self
            .api
            .patch(&self.config.node, &params, &Patch::Apply(&object))
            .await
            .map_err(|why| Error::Kube {
                what: "apply",
                node: self.config.node.clone(),
                why: Box::new(why),
            })?;
        self.generation = stored.metadata.generation;
        if self.uid != stored.metadata.uid {
            // A new object (the first, or one re-created after a delete) has no condition yet.
            self.written_state = None;
            self.status = GpuNodeStatus::default();
        }
        self.uid = stored.metadata.uid;
        if let Some(status) = stored.status {
            self.status = status;
        }
        tracing::info!(node = %self.config.node, devices = same.devices().map_or(0, <[_]>::len), "GpuNode applied");
        self.applied = Some(same);
        Ok(true)
    }

    /// Whether the server still holds the spec last applied: the same object (uid) at the
    /// same generation. One GET of one object per round: comparing generations, not bodies,
    /// so the server's defaulting and pruning can never make an unchanged node look changed.
    async fn server_has_ours(&self) -> Result<bool, Error> {
        let current = self
            .api
            .get_opt(&self.config.node)
            .await
            .map_err(|why| Error::Kube {
                what: "read",
                node: self.config.node.clone(),
                why: Box::new(why),
            })?;
        Ok(current.is_some_and(|c| {
            c.metadata.uid.is_some() && c.metadata.uid == self.uid && c.metadata.generation == self.generation
        }))
    }

    async fn report_recovery(&mut self) -> Result<bool, Error> {
        let Some(state) = read_recovery_state(&self.config.root)? else {
            return Ok(false);
        };
        let reason = reason_of(&state);
        let message = condition_message(&state);
        let key = (reason, message.clone());
        if self.written_state.as_ref() == Some(&key) {
            return Ok(false);
        }
        self.status.set_recovered(reason, message, self.generation, now());
        let body = RecoveredApply::new(&self.config.node, &self.status);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        self.api
            .patch_status(&self.config.node, &params, &Patch::Apply(&body))
            .await
            .map_err(|why| Error::Kube {
                what: "update the status of",
                node: self.config.node.clone(),
                why: Box::new(why),
            })?;
        tracing::info!(node = %self.config.node, reason = reason.as_str(), "Recovered condition written");
        self.written_state = Some(key);
        Ok(true)
    }

    /// What the server holds when it holds the object last applied, as the watch sees it.
    fn ours(&self) -> Seen {
        if self.uid.is_none() {
            return Seen::Unknown;
        }
        Seen::Present {
            uid: self.uid.clone(),
            generation: self.generation,
        }
    }

    /// Runs rounds every `interval` until `stop` resolves, then returns; after a failed round,
    /// the next comes after the backoff (module docs), and the watch of the `GpuNode` starts
    /// one early when it must. A round or wait in progress when the stop comes is abandoned:
    /// nothing it would write is needed for a clean stop.
    pub async fn run(mut self, stop: impl Future<Output = ()>) {
        let mut stop = std::pin::pin!(stop);
        let (seen_tx, mut seen) = tokio::sync::watch::channel(Seen::Unknown);
        let _watch = AbortOnDrop(tokio::spawn(watch_own(
            self.api.clone(),
            self.config.node.clone(),
            self.config.interval,
            seen_tx,
        )));
        let mut watching = true;
        let mut lost = false;
        let mut retry = Retry::new(self.config.interval);
        let mut failing: Option<Failing> = None;
        'rounds: loop {
            // `biased`: the stop is polled before the first capture starts, so a stop that
            // registers a signal handler on its first poll (tokio's) has it in place before
            // a capture can hang; a SIGTERM then never meets the default disposition.
            let wait = tokio::select! {
                biased;
                () = &mut stop => break,
                result = self.round() => self.after_round(result, &mut failing, &mut retry),
            };
            let deadline = Instant::now() + wait;
            loop {
                tokio::select! {
                    () = &mut stop => break 'rounds,
                    () = tokio::time::sleep_until(deadline) => break,
                    changed = seen.changed(), if watching => {
                        if changed.is_err() {
                            // The watch task ended (it retries forever, so only if it
                            // panicked): rounds keep the interval.
                            watching = false;
                            continue;
                        }
                        let now = seen.borrow_and_update().clone();
                        if early_round(&now, &self.ours(), failing.is_some(), &mut lost) {
                            tracing::debug!(node = %self.config.node, seen = ?now, "GpuNode watch: round now");
                            break;
                        }
                    }
                }
            }
        }
        tracing::info!(node = %self.config.node, "publisher stopped");
    }

    /// Logs a round's outcome and returns the wait before the next: the interval after a
    /// success, the backoff's next wait after a failure.
    fn after_round(
        &self,
        result: Result<Round, Error>,
        failing: &mut Option<Failing>,
        retry: &mut Retry,
    ) -> Duration {
        let node = &self.config.node;
        match result {
            Ok(_) => {
                if let Some(f) = failing.take() {
                    let secs = f.since.elapsed().as_secs_f64();
                    tracing::info!(%node, failed_rounds = f.rounds, "publish rounds failed for {secs:.1}s; this round succeeded and the GpuNode is caught up");
                }
                retry.reset();
                self.config.interval
            }
            Err(e) => {
                let f = failing.get_or_insert(Failing {
                    since: Instant::now(),
                    rounds: 0,
                });
                f.rounds += 1;
                let wait = retry.delay();
                let secs = wait.as_secs_f64();
                tracing::warn!(%node, error = %e, failed_rounds = f.rounds, "publish round failed; retrying in {secs:.1}s");
                wait
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The waits stay under the cap whatever the interval, start at the first wait (or less,
    /// for a short interval), grow, and start over after a reset.
    #[rstest::rstest]
    #[case::default_interval(Duration::from_secs(60), Duration::from_secs(1), Duration::from_secs(30))]
    #[case::shortest_cli_interval(Duration::from_secs(5), Duration::from_secs(1), Duration::from_secs(5))]
    #[case::hour(Duration::from_secs(3600), Duration::from_secs(1), Duration::from_secs(30))]
    #[case::test_interval(
        Duration::from_millis(50),
        Duration::from_millis(25),
        Duration::from_millis(50)
    )]
    fn retry_waits_are_bounded(#[case] interval: Duration, #[case] first: Duration, #[case] cap: Duration) {
        let mut retry = Retry::new(interval);
        for _ in 0..3 {
            let waits: Vec<Duration> = (0..40).map(|_| retry.delay()).collect();
            assert!(waits[0] >= first && waits[0] < first * 2, "{waits:?}");
            assert!(waits.iter().all(|w| *w <= cap), "{waits:?}");
            // Grown to its ceiling: at least half the cap (before jitter) by the end.
            assert!(waits[39] >= cap / 2, "{waits:?}");
            retry.reset();
        }
    }

    fn present(uid: &str, generation: i64) -> Seen {
        Seen::Present {
            uid: Some(uid.into()),
            generation: Some(generation),
        }
    }

    /// When the watch's news starts a round before the wait ends: `lost_before` is whether
    /// the watch was lost before this news, `lost_after` what the publisher remembers after.
    #[rstest::rstest]
    #[case::ours_unchanged(present("u1", 1), false, false, false, false)]
    #[case::deleted(Seen::Absent, false, false, true, false)]
    #[case::edited(present("u1", 2), false, false, true, false)]
    #[case::recreated(present("u2", 1), false, false, true, false)]
    #[case::lost_while_healthy(Seen::Lost, false, false, true, true)]
    #[case::lost_again(Seen::Lost, false, true, false, true)]
    #[case::lost_while_failing(Seen::Lost, true, false, false, true)]
    #[case::back_while_failing(present("u1", 1), true, true, true, false)]
    #[case::back_and_deleted_while_failing(Seen::Absent, true, true, true, false)]
    #[case::back_after_a_blip(present("u1", 1), false, true, true, false)]
    #[case::deleted_while_failing(Seen::Absent, true, false, false, false)]
    #[case::nothing_yet(Seen::Unknown, false, false, false, false)]
    fn the_watch_starts_a_round_when_it_must(
        #[case] seen: Seen,
        #[case] failing: bool,
        #[case] lost_before: bool,
        #[case] round: bool,
        #[case] lost_after: bool,
    ) {
        let mut lost = lost_before;
        assert_eq!(early_round(&seen, &present("u1", 1), failing, &mut lost), round);
        assert_eq!(lost, lost_after);
    }

    #[test]
    fn a_forbidden_watch_is_told_from_other_failures() {
        let status = |code, reason| kube::core::Status::failure("no", reason).with_code(code);
        let list = |code, reason| {
            watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status(code, reason))))
        };
        assert!(forbidden(&list(403, "Forbidden")));
        assert!(forbidden(&watcher::Error::WatchError(Box::new(status(
            403,
            "Forbidden"
        )))));
        assert!(
            !forbidden(&list(404, "NotFound")),
            "a CRD not installed yet may come"
        );
        assert!(!forbidden(&list(500, "InternalError")));
        assert!(!forbidden(&watcher::Error::NoResourceVersion));
    }

    #[test]
    fn state_files_are_read_strictly_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_recovery_state(dir.path()).unwrap().is_none());
        let file = dir.path().join(RECOVERY_STATE);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, r#"{"state":"failed","step":"mig-mode","message":"reset refused","updatedAt":"2026-11-30T00:00:00Z"}"#).unwrap();
        let s = read_recovery_state(dir.path()).unwrap().unwrap();
        assert_eq!(reason_of(&s), RecoveredReason::Failed);
        assert_eq!(condition_message(&s), "mig-mode: reset refused");
        std::fs::write(&file, r#"{"state":"done","updatedAt":"2026-11-30T00:00:00Z"}"#).unwrap();
        let err = read_recovery_state(dir.path()).unwrap_err().to_string();
        assert!(err.contains("done"), "{err}");
        std::fs::write(&file, vec![b' '; 5 * 1024 * 1024]).unwrap();
        let err = read_recovery_state(dir.path()).unwrap_err().to_string();
        assert!(err.contains("recovery.json"), "{err}");
    }
}
