//! The store a webhook decides from, behind one interface: admission's [`Lookup`] for every
//! decision, the readiness `/readyz` reports, and the gauges `/metrics` reads now. The handlers
//! ask it, never which store it is; only the DRA claims' wait is the kube store's alone.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::metrics::Metrics;
use miggate_admission::lookup::Lookup;
use miggate_store::file_store::FileStore;
use miggate_store::kube_store::KubeStore;

/// Where decisions read their facts from.
#[derive(Debug, Clone)]
pub enum Store {
    /// A directory, loaded into memory (`--store dir:PATH`).
    File(Arc<FileStore>),
    /// Watch caches over the API server (`--store kube`).
    Kube(Arc<KubeStore>),
}

impl Store {
    /// Runs `decide` against the store's lookups: the file store's current snapshot (one
    /// consistent set for the whole decision), or the caches.
    pub fn with_lookup<R>(&self, decide: impl FnOnce(&dyn Lookup) -> R) -> R {
        match self {
            Store::File(files) => decide(&*files.snapshot()),
            Store::Kube(kube) => decide(&**kube),
        }
    }

    /// Whether decisions can be made from it now, and what `/readyz` says of it: the file
    /// store once loaded; the caches once every one has listed and none is behind past
    /// `--max-staleness` (before that, "absent" means "not seen").
    pub fn readiness(&self) -> (bool, Value) {
        match self {
            Store::File(files) => {
                let snapshot = files.snapshot();
                (
                    snapshot.loaded_at.is_some(),
                    json!({
                        "root": files.root().display().to_string(),
                        "checkpoints": snapshot.checkpoint_count(),
                        "nodes": snapshot.node_count(),
                        "unreadable": snapshot.problems,
                    }),
                )
            }
            Store::Kube(kube) => (kube.synced() && !kube.failing(), json!({"kube": kube.status()})),
        }
    }

    /// The metrics' text exposition, with the store's gauges read now.
    pub fn exposition(&self, metrics: &Metrics) -> String {
        match self {
            Store::File(files) => metrics.encode(&files.snapshot()),
            Store::Kube(kube) => metrics.encode_kube(&kube.status(), kube.gpu_nodes_without_inventory()),
        }
    }

    /// The kube store, for what only it does: waiting for a DRA claim's allocation to arrive.
    pub fn kube(&self) -> Option<&KubeStore> {
        match self {
            Store::Kube(kube) => Some(kube),
            Store::File(_) => None,
        }
    }
}
