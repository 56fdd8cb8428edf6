//! The one error type of this crate.

use std::path::PathBuf;

/// What stops a store from opening or reloading. Every variant names the file or cluster
/// involved, so an operator can act on the message alone.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file or directory could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// What was read.
        path: PathBuf,
        /// Why not.
        source: std::io::Error,
    },
    /// No cluster could be found from the flags and the environment, or its kubeconfig cannot
    /// be used; in words, without the client library's internals.
    #[error("{why}")]
    Cluster {
        /// What is wrong, outside text already escaped.
        why: String,
    },
}
