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
//! A failed capture or write is logged and retried on the next round; only a stop request
//! ends [`Publisher::run`].

use std::future::Future;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use miggate_compat::GpuManifest;
use miggate_compat::escape::escape;
use miggate_crds::{GpuNode, GpuNodeStatus, RecoveredReason};

/// The field manager every write of the publisher uses.
pub const FIELD_MANAGER: &str = "miggate-publish";
/// Boot recovery's state file, under the host root.
pub const RECOVERY_STATE: &str = miggate_wire::recovery::STATE_FILE;
/// The default time between rounds.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);

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
        let body = serde_json::json!({
            "apiVersion": "miggate.io/v1alpha1",
            "kind": "GpuNode",
            "metadata": {"name": self.config.node},
            "status": {"conditions": self.status.conditions.iter()
                .filter(|c| c.type_ == miggate_crds::RECOVERED).collect::<Vec<_>>()},
        });
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

    /// Runs rounds every `interval` until `stop` resolves, then returns. A round in flight
    /// when the stop comes is abandoned: nothing it would write is needed for a clean stop.
    pub async fn run(mut self, stop: impl Future<Output = ()>) {
        let mut stop = std::pin::pin!(stop);
        loop {
            // `biased`: the stop is polled before the first capture starts, so a stop that
            // registers a signal handler on its first poll (tokio's) has it in place before
            // a capture can hang; a SIGTERM then never meets the default disposition.
            tokio::select! {
                biased;
                () = &mut stop => break,
                result = self.round() => {
                    if let Err(e) = result {
                        tracing::warn!(node = %self.config.node, error = %e, "publish round failed; retrying next round");
                    }
                }
            }
            tokio::select! {
                () = &mut stop => break,
                () = tokio::time::sleep(self.config.interval) => {}
            }
        }
        tracing::info!(node = %self.config.node, "publisher stopped");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

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
