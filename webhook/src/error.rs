//! The one error type of this crate.

use std::net::SocketAddr;
use std::path::PathBuf;

/// What stops the webhook from starting or from reloading a file. Every variant names the file
/// or address involved, so an operator can act on the message alone; none carries key material.
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
    /// A certificate or key file that does not hold what TLS needs.
    #[error("TLS material in {} is unusable: {why}", path.display())]
    Tls {
        /// The certificate or key file (the certificate when the pair does not match).
        path: PathBuf,
        /// What is wrong, in words.
        why: String,
    },
    /// A listening socket could not be opened.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
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
    /// The Kubernetes client could not be set up.
    // `why`, not `source`: the message carries it once, where a source would be printed again
    // by every reader that walks the chain.
    #[error("{what}: {why}")]
    Kube {
        /// What was being done.
        what: &'static str,
        /// Why it failed.
        why: Box<kube::Error>,
    },
    /// A server stopped with an I/O error.
    #[error("{what} server failed: {source}")]
    Serve {
        /// Which server (`admission`, `health`).
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
}
