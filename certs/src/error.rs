//! The crate's error type.

use crate::cert::CertError;
use crate::serving::PairError;

/// What stops the certificates from being made, kept or served. No variant carries key
/// material. Each cause is the underlying error, its `source()`, shown in the message once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// rcgen could not make a key or a certificate, or what it made does not read back.
    #[error("cannot mint a certificate: {source}")]
    Mint {
        /// Why.
        #[source]
        source: MintError,
    },
    /// A configuration reference that is not `validating/NAME` or `mutating/NAME`.
    #[error("{text:?} names no webhook configuration: write validating/NAME or mutating/NAME")]
    ConfigurationRef {
        /// What was given.
        text: String,
    },
    /// A call to the API server failed.
    #[error("cannot {what}: {}", api_words(.source))]
    Api {
        /// What was being done, with the object's name.
        what: String,
        /// The client's error; the message shows the API server's words (its `Status`
        /// message), or the transport's.
        #[source]
        source: Box<kube::Error>,
    },
    /// The webhook's own identity could not be learnt: the API server did not answer a
    /// `SelfSubjectReview`.
    #[error("cannot learn this webhook's identity (a SelfSubjectReview): {}", api_words(.source))]
    Identity {
        /// The client's error.
        #[source]
        source: Box<kube::Error>,
    },
    /// The API server answered the `SelfSubjectReview` but named no one.
    #[error(
        "cannot learn this webhook's identity (a SelfSubjectReview): the API server reported neither a UID nor a name"
    )]
    NoIdentity,
    /// The Secret cannot be updated in place, and deleting it to create it again failed.
    #[error(
        "cannot write Secret {secret}: it {unwritable}, and deleting it to create it again failed: {}; let the webhook's service account delete it (RBAC: verb delete on secrets, resourceNames [{name}]) or delete it by hand",
        api_words(.source)
    )]
    Unwritable {
        /// `namespace/name`.
        secret: String,
        /// Its name.
        name: String,
        /// Why it cannot be updated (`is immutable`, `has type …`).
        unwritable: String,
        /// The delete's error.
        #[source]
        source: Box<kube::Error>,
    },
    /// The new certificate could not be put into the TLS server.
    #[error("cannot serve the new certificate: {source}")]
    Install {
        /// The TLS server's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Why minting failed ([`Error::Mint`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MintError {
    /// rcgen's error.
    #[error("{0}")]
    Rcgen(#[source] rcgen::Error),
    /// The CA just made is not a certificate this crate reads.
    #[error("the new CA does not read back: {0}")]
    CaReadBack(#[source] CertError),
    /// The serving certificate and key just made are not a pair this crate reads.
    #[error("the new serving certificate does not read back: {0}")]
    ServingReadBack(#[source] PairError),
}

impl From<MintError> for Error {
    fn from(source: MintError) -> Self {
        Error::Mint { source }
    }
}

/// The API server's own message for `e` (a `Status`'s), else the client's.
pub(crate) fn api_words(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => format!("{} ({})", status.message, status.code),
        other => other.to_string(),
    }
}
