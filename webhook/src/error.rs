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
        /// What is wrong.
        #[source]
        why: TlsProblem,
    },
    /// A listening socket could not be opened.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why not.
        source: std::io::Error,
    },
    /// The store could not be opened: its files, or the cluster its watches read.
    #[error(transparent)]
    Store(#[from] miggate_store::Error),
    /// A server stopped with an I/O error.
    #[error("{what} server failed: {source}")]
    Serve {
        /// Which server (`admission`, `health`).
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
}

/// What is wrong with TLS material ([`Error::Tls`]). Each cause is rustls' (or the certificate
/// reader's) own error, shown in the message and given as its `source()`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsProblem {
    /// The certificate file is not PEM.
    #[error("not a PEM certificate chain: {0}")]
    NotCertificateChain(#[source] rustls::pki_types::pem::Error),
    /// A certificate file or CA bundle without a certificate in it.
    #[error("no CERTIFICATE block")]
    NoCertificate,
    /// The chain's first certificate is not one X.509 certificate that can be read.
    #[error("the first certificate cannot be read: {0}")]
    NotALeaf(#[source] miggate_certs::material::CertError),
    /// The key file holds no key rustls can use.
    #[error("no usable PEM private key: {0}")]
    NoPrivateKey(#[source] rustls::pki_types::pem::Error),
    /// The protocol versions asked for are not the provider's.
    #[error("{0}")]
    Protocols(#[source] rustls::Error),
    /// The client CA file is not PEM.
    #[error("not a PEM certificate bundle: {0}")]
    NotCertificateBundle(#[source] rustls::pki_types::pem::Error),
    /// A certificate of the client CA bundle that cannot be a trust anchor.
    #[error("a certificate of the bundle is not a usable CA: {0}")]
    NotCa(#[source] rustls::Error),
    /// The client CA bundle does not make a verifier.
    #[error("not a usable client CA bundle: {0}")]
    NotClientCaBundle(#[source] rustls::server::VerifierBuilderError),
    /// The certificate and key do not belong together (or the key cannot sign).
    #[error("certificate and key do not make a pair: {0}")]
    NotAPair(#[source] rustls::Error),
}
