//! The admission webhook's own certificates, so an install needs no cert-manager and no
//! `openssl` by hand: a CA and a serving certificate made in process ([`mint`]), kept in one
//! Secret, judged on every round ([`material`]: garbage, a certificate for another name, an
//! expired one or a key that does not match is replaced, and so is one this webhook's own
//! account did not write), renewed ahead of expiry, and the CA
//! injected into every webhook of the configurations named ([`inject`]). A new certificate is
//! served only once the API server trusts its CA ([`manager`]): no call fails during a
//! rotation. What is served is the [`ServingPair`] the Secret was judged into ([`serving`],
//! which reads the webhook's own certificate files too), never its PEM read again.

mod cert;
mod error;
mod identity;
pub mod inject;
pub mod manager;
pub mod material;
mod metrics;
pub mod mint;
mod secret;
pub mod serving;

pub use error::{Error, MintError};
pub use inject::{ConfigurationRef, Kind};
pub use manager::{Config, Handle, Install, Status, start};
pub use material::{Pair, Wanted, Why};
pub use metrics::CertMetrics;
pub use serving::{PairError, ServingPair};
