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
