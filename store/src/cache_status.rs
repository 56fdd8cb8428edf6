//! One watch cache's state, as `/readyz` and the metrics report it. Its own module so that the
//! metrics read it without reading the caches, which count their events into the metrics.

use serde::Serialize;

/// How a watch cache's list is read from the API server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ListMode {
    /// A watch with `sendInitialEvents=true`: the server streams every object from its own
    /// cache, one event at a time, and marks the end with a bookmark.
    Streamed,
    /// One list request served from the server's watch cache (`resourceVersion=0`, no
    /// `limit`), decoded one object at a time as it arrives, then a watch from its version:
    /// where the server refuses to stream.
    Listed,
}

/// One cache's state, for `/readyz` and metrics.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheStatus {
    /// The cached kind as metrics, logs and `/readyz` name it (`GpuNode`, `Pod`, ...).
    pub kind: std::borrow::Cow<'static, str>,
    /// Whether its first list has completed (or, for an optional kind, the server said it
    /// does not serve the API).
    pub synced: bool,
    /// False while the server does not serve the kind's API (ResourceSlices on Kubernetes
    /// before 1.34): that inventory source is skipped.
    pub served: bool,
    /// Whether it has been behind the server (its watch failing) for longer than
    /// `--max-staleness`: too old to decide on, so `/readyz` reports not ready while any is.
    pub failing: bool,
    /// Seconds it may have been missing changes: 0 while its watch is open (or the kind is
    /// not served), else since the watch first failed, until it catches up.
    pub stale_seconds: f64,
    /// Objects held.
    pub objects: usize,
    /// Seconds since its last event or list; `None` before any.
    pub age_seconds: Option<f64>,
    /// Lists done, the first included (each one after it is a restart).
    pub lists: u64,
    /// How the last list was read: `streamed` (one watch sending every object, then a
    /// bookmark; KEP-3157), `paged` (the server refused to stream it), or `None` before any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub list: Option<ListMode>,
    /// Watch or list errors seen (each is retried after a backoff).
    pub errors: u64,
}
