//! The crate's error type.

/// What stops the certificates from being made, kept or served. No variant carries key
/// material.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// rcgen could not make a key or a certificate.
    #[error("cannot mint a certificate: {why}")]
    Mint {
        /// rcgen's words.
        why: String,
    },
    /// A configuration reference that is not `validating/NAME` or `mutating/NAME`.
    #[error("{text:?} names no webhook configuration: write validating/NAME or mutating/NAME")]
    ConfigurationRef {
        /// What was given.
        text: String,
    },
    /// A call to the API server failed.
    #[error("cannot {what}: {why}")]
    Api {
        /// What was being done, with the object's name.
        what: String,
        /// The API server's words (its `Status` message), or the transport's.
        why: String,
    },
    /// The webhook's own identity could not be learnt: the API server did not answer a
    /// `SelfSubjectReview`, or named no one.
    #[error("cannot learn this webhook's identity (a SelfSubjectReview): {why}")]
    Identity {
        /// Why.
        why: String,
    },
    /// The Secret cannot be updated in place, and deleting it to create it again failed.
    #[error(
        "cannot write Secret {secret}: it {unwritable}, and deleting it to create it again failed: {why}; let the webhook's service account delete it (RBAC: verb delete on secrets, resourceNames [{name}]) or delete it by hand"
    )]
    Unwritable {
        /// `namespace/name`.
        secret: String,
        /// Its name.
        name: String,
        /// Why it cannot be updated (`is immutable`, `has type …`).
        unwritable: String,
        /// The API server's words on the delete.
        why: String,
    },
    /// The new certificate could not be put into the TLS server.
    #[error("cannot serve the new certificate: {why}")]
    Install {
        /// Why.
        why: String,
    },
}

/// The API server's own message for `e` (a `Status`'s), else the client's.
pub(crate) fn api_words(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => format!("{} ({})", status.message, status.code),
        other => other.to_string(),
    }
}
