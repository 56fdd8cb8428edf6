//! Where miggate's admission decisions read from: checkpoints, node inventories, restore pods,
//! DRA claims and the Go peer's snapshots, held in memory and kept current.
//!
//! Two stores answer `miggate_admission`'s [`Lookup`](miggate_admission::lookup::Lookup):
//! [`file_store`] (a directory, parsed once, re-read on change; also what `miggate where`
//! reads) and [`kube_store`] (watch caches over the API server, each kind decoded lean, with
//! how far behind each may be in [`freshness`]). [`cluster`] makes the Kubernetes client from
//! flags and the environment, in words a user can act on; the CLI's cluster commands use it
//! too. The server (`miggate-webhook`) only picks one by [`StoreConfig`] and serves it.

pub mod cache_status;
pub mod cluster;
mod error;
pub mod file_store;
pub mod freshness;
pub mod kube_store;
mod resource;

use std::path::PathBuf;

pub use error::Error;

/// Which store the webhook opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreConfig {
    /// The file store's root directory (`--store dir:PATH`).
    Dir(PathBuf),
    /// Watch caches over the API server the environment names (in-cluster service account,
    /// or `KUBECONFIG`) (`--store kube`).
    Kube(kube_store::KubeOptions),
}
