//! One X.509 certificate read from PEM or DER, with the facts the judge and the doctor use
//! (validity, whether it is a CA), and why bytes are not one: a leaf of this crate, read by
//! the Secret's judge ([`crate::material`]), the serving pair ([`crate::serving`]) and the
//! errors.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// Why bytes are not a certificate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CertError {
    /// No `-----BEGIN CERTIFICATE-----` block.
    #[error("no PEM certificate")]
    NoPem,
    /// A PEM block that cannot be decoded.
    #[error("PEM that cannot be decoded: {0:?}")]
    Pem(#[source] rustls::pki_types::pem::Error),
    /// DER that is not an X.509 certificate.
    #[error("not an X.509 certificate: {0}")]
    Der(#[source] x509_parser::nom::Err<x509_parser::error::X509Error>),
    /// Bytes after the certificate.
    #[error("{0} bytes after the certificate")]
    Trailing(usize),
    /// A validity date this system cannot hold.
    #[error("a validity date out of range")]
    Validity,
    /// A basic constraints extension that cannot be read (twice, or malformed).
    #[error("basic constraints that cannot be read: {0}")]
    BasicConstraints(#[source] x509_parser::error::X509Error),
}

/// A certificate read: its DER, and the facts judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cert {
    /// The certificate, DER.
    pub der: Vec<u8>,
    /// Its not-before.
    pub not_before: SystemTime,
    /// Its not-after.
    pub not_after: SystemTime,
    /// Whether its basic constraints say CA.
    pub is_ca: bool,
}

impl Cert {
    /// Reads one PEM certificate (the first, when there are several).
    pub fn from_pem(pem: &[u8]) -> Result<Cert, CertError> {
        let der = CertificateDer::pem_slice_iter(pem)
            .next()
            .ok_or(CertError::NoPem)?
            .map_err(CertError::Pem)?;
        Cert::from_der(der.as_ref())
    }

    /// Reads a DER certificate.
    pub fn from_der(der: &[u8]) -> Result<Cert, CertError> {
        let (rest, x509) = x509_parser::parse_x509_certificate(der).map_err(CertError::Der)?;
        if !rest.is_empty() {
            return Err(CertError::Trailing(rest.len()));
        }
        let at = |t: x509_parser::time::ASN1Time| {
            let secs = t.timestamp();
            if secs >= 0 {
                UNIX_EPOCH.checked_add(Duration::from_secs(secs.unsigned_abs()))
            } else {
                UNIX_EPOCH.checked_sub(Duration::from_secs(secs.unsigned_abs()))
            }
            .ok_or(CertError::Validity)
        };
        let validity = x509.validity();
        let is_ca = x509
            .basic_constraints()
            .map_err(CertError::BasicConstraints)?
            .is_some_and(|bc| bc.value.ca);
        Ok(Cert {
            der: der.to_vec(),
            not_before: at(validity.not_before)?,
            not_after: at(validity.not_after)?,
            is_ca,
        })
    }

    /// Whether `now` is inside its validity.
    pub fn valid_at(&self, now: SystemTime) -> bool {
        self.not_before <= now && now < self.not_after
    }

    /// Whether two thirds of its lifetime are gone at `now`.
    pub fn due_at(&self, now: SystemTime) -> bool {
        now >= self.due()
    }

    /// When two thirds of its lifetime are gone: when it is renewed.
    pub fn due(&self) -> SystemTime {
        let life = self.not_after.duration_since(self.not_before).unwrap_or_default();
        self.not_before + life / 3 * 2
    }
}

/// Every certificate of a PEM bundle, or why one block is not one.
pub fn bundle_from_pem(pem: &[u8]) -> Result<Vec<Cert>, CertError> {
    CertificateDer::pem_slice_iter(pem)
        .map(|der| Cert::from_der(der.map_err(CertError::Pem)?.as_ref()))
        .collect()
}
