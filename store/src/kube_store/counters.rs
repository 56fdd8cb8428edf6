//! The watch caches' counters. The caches count into them; whoever exports metrics (the
//! webhook's `/metrics`) registers them under its own names.

use std::borrow::Cow;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

/// A label set naming a kind of stored object.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    /// `checkpoint` or `node` (file store), or a cached kind (`GpuNode`, `Pod`, ...).
    pub kind: Cow<'static, str>,
}

/// What the watch caches count, per cached kind. Clones share the counts.
#[derive(Debug, Clone, Default)]
pub struct WatchCounters {
    /// Re-lists after the first.
    pub restarts: Family<KindLabel, Counter>,
    /// Failed lists and watches.
    pub errors: Family<KindLabel, Counter>,
    /// Lists read whole because the server refused to stream them.
    pub list_fallbacks: Family<KindLabel, Counter>,
    /// Whether a cache's last list was streamed (1) or read whole (0).
    pub lists_streamed: Family<KindLabel, Gauge>,
}
