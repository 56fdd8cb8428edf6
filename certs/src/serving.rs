//! The serving pair: a PEM certificate chain and its PEM private key, read once into what
//! rustls serves (a [`CertifiedKey`], the key checked against the leaf) beside the leaf's
//! facts ([`Cert`]: its validity, whether it is a CA).
//!
//! Both sources of a serving pair are read here and nowhere else: the Secret's
//! [`TLS_CRT`](crate::material::TLS_CRT) and [`TLS_KEY`](crate::material::TLS_KEY), where the
//! Secret is judged ([`crate::material`]), and the webhook's `--tls-cert` and `--tls-key` files,
//! each time their content changes. What reads is served as it is: nothing parses the PEM again.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

use crate::cert::{Cert, CertError};

/// Why PEM bytes are not a serving pair. The messages say what is wrong, never the material.
/// Not `non_exhaustive`: the webhook names the file each cause concerns, and a new cause must
/// be placed there.
#[derive(Debug, thiserror::Error)]
pub enum PairError {
    /// The certificate bytes are not PEM.
    #[error("not a PEM certificate chain: {0}")]
    Chain(#[source] rustls::pki_types::pem::Error),
    /// No certificate in the certificate bytes.
    #[error("no CERTIFICATE block")]
    NoCertificate,
    /// The first certificate, the leaf, is not one X.509 certificate that can be read (of a
    /// pair, said once the key is matched to it: one rustls cannot parse makes no pair).
    #[error("{0}")]
    Leaf(#[source] CertError),
    /// No PEM private key in the key bytes.
    #[error("no usable PEM private key: {0}")]
    Key(#[source] rustls::pki_types::pem::Error),
    /// A private key rustls cannot sign with (not RSA, ECDSA or EdDSA, or malformed).
    #[error("a private key that cannot sign: {0}")]
    Unusable(#[source] rustls::Error),
    /// The key is not the leaf's: its public key is not the certificate's.
    #[error("the key is not the certificate's: {0}")]
    Mismatch(#[source] rustls::Error),
}

impl PairError {
    /// Whether the chain and the key each read, and only joining them failed (a key rustls
    /// cannot sign with, or one that is not the leaf's), where the other causes say a part
    /// could not be read at all.
    pub fn both_read(&self) -> bool {
        matches!(self, PairError::Unusable(_) | PairError::Mismatch(_))
    }
}

/// A certificate chain, leaf first, and its private key: the leaf read, the key checked to be
/// the leaf's. What the webhook serves, as it is.
#[derive(Clone)]
pub struct ServingPair {
    /// The chain and the key that signs for it, as rustls serves them.
    certified: Arc<CertifiedKey>,
    /// The chain's first certificate, read.
    leaf: Cert,
}

impl ServingPair {
    /// Reads `cert_pem` (every `CERTIFICATE` block, the leaf first) and `key_pem` (its first
    /// private key: PKCS#8, PKCS#1 or SEC1) into a pair, or says why they are not one.
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<ServingPair, PairError> {
        Chain::from_pem(cert_pem)?.with_key(key_pem)
    }

    /// The chain, leaf first, DER.
    pub fn chain(&self) -> &[CertificateDer<'static>] {
        &self.certified.cert
    }

    /// The leaf, read: its validity and DER.
    pub fn leaf(&self) -> &Cert {
        &self.leaf
    }

    /// The chain with the key that signs for it, checked to match: what rustls serves.
    pub fn certified_key(&self) -> Arc<CertifiedKey> {
        self.certified.clone()
    }
}

impl PartialEq for ServingPair {
    /// The same chain. The key needs no comparing: a key checked against the leaf is the one
    /// whose public key the leaf carries.
    fn eq(&self, other: &Self) -> bool {
        self.chain() == other.chain()
    }
}

impl Eq for ServingPair {}

impl std::fmt::Debug for ServingPair {
    // Never the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingPair")
            .field("chain_len", &self.chain().len())
            .field("leaf", &self.leaf)
            .finish_non_exhaustive()
    }
}

/// A certificate chain read, not yet joined to its key. Its leaf is read here too, but a leaf
/// that does not read is said only after the key: rustls' own order, where a certificate that
/// is not X.509 makes no pair with any key. The Secret's reader asks for the leaf first
/// ([`Chain::leaf_read`]): a CA that is no CA is refused before its key is looked at.
#[derive(Debug)]
pub(crate) struct Chain {
    certs: Vec<CertificateDer<'static>>,
    leaf: Result<Cert, CertError>,
}

impl Chain {
    /// Every `CERTIFICATE` block of `pem`, the first read as the leaf.
    pub(crate) fn from_pem(pem: &[u8]) -> Result<Chain, PairError> {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<_, _>>()
            .map_err(PairError::Chain)?;
        let first = certs.first().ok_or(PairError::NoCertificate)?;
        let leaf = Cert::from_der(first.as_ref());
        Ok(Chain { certs, leaf })
    }

    /// This chain, once its leaf reads; else why the leaf does not.
    pub(crate) fn leaf_read(self) -> Result<Chain, PairError> {
        match self.leaf {
            Ok(leaf) => Ok(Chain {
                certs: self.certs,
                leaf: Ok(leaf),
            }),
            Err(e) => Err(PairError::Leaf(e)),
        }
    }

    /// Whether the leaf reads and is a CA.
    pub(crate) fn is_ca(&self) -> bool {
        self.leaf.as_ref().is_ok_and(|leaf| leaf.is_ca)
    }

    /// The pair of this chain and the first private key of `key_pem`, once that key is the
    /// leaf's and the leaf reads.
    pub(crate) fn with_key(self, key_pem: &[u8]) -> Result<ServingPair, PairError> {
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(PairError::Key)?;
        let signer = rustls::crypto::ring::sign::any_supported_type(&key).map_err(PairError::Unusable)?;
        let certified = CertifiedKey::new(self.certs, signer);
        // Every ring key knows its public key, so "cannot tell" is no answer here: a mismatch.
        certified.keys_match().map_err(PairError::Mismatch)?;
        Ok(ServingPair {
            certified: Arc::new(certified),
            leaf: self.leaf.map_err(PairError::Leaf)?,
        })
    }
}
