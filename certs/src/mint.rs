//! Minting: a CA and a serving certificate signed by it, made in process (rcgen, ECDSA P-256).

use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::error::{Error, MintError};

/// A PEM certificate and its PEM private key.
#[derive(Clone, PartialEq, Eq)]
pub struct Pair {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The private key, PEM (PKCS#8).
    pub key_pem: String,
}

impl std::fmt::Debug for Pair {
    // Never the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pair")
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

/// How far back a new certificate's validity starts, at most: nodes whose clocks run a little
/// behind the writer's still accept it. Never more than a tenth of its lifetime, so a short one
/// is not two thirds gone (due for renewal) when it is made.
pub(crate) const BACKDATE: Duration = Duration::from_secs(3600);

/// The common name of every CA miggate mints.
pub const CA_COMMON_NAME: &str = "miggate-webhook-ca";

fn validity(params: &mut CertificateParams, now: SystemTime, until: SystemTime) {
    let backdate = BACKDATE.min(until.duration_since(now).unwrap_or_default() / 10);
    params.not_before = time::OffsetDateTime::from(now.checked_sub(backdate).unwrap_or(now));
    params.not_after = time::OffsetDateTime::from(until);
}

fn minting(e: rcgen::Error) -> Error {
    MintError::Rcgen(e).into()
}

/// A new self-signed CA valid from `now` for `lifetime`: it signs serving certificates only
/// (path length 0), and nothing else.
pub fn authority(now: SystemTime, lifetime: Duration) -> Result<Pair, Error> {
    let key = KeyPair::generate().map_err(minting)?;
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(minting)?;
    params.distinguished_name.push(DnType::CommonName, CA_COMMON_NAME);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    validity(&mut params, now, now + lifetime);
    let cert = params.self_signed(&key).map_err(minting)?;
    Ok(Pair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A serving certificate for `names` (the first is its common name), signed by `ca`, valid from
/// `now` for `lifetime` but never past `ca_not_after`.
pub fn serving(
    ca: &Pair,
    names: &[String],
    now: SystemTime,
    lifetime: Duration,
    ca_not_after: SystemTime,
) -> Result<Pair, Error> {
    let ca_key = KeyPair::from_pem(&ca.key_pem).map_err(minting)?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key).map_err(minting)?;
    let key = KeyPair::generate().map_err(minting)?;
    let mut params = CertificateParams::new(names.to_vec()).map_err(minting)?;
    if let Some(first) = names.first() {
        params.distinguished_name.push(DnType::CommonName, first.as_str());
    }
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    validity(&mut params, now, (now + lifetime).min(ca_not_after));
    let cert = params.signed_by(&key, &issuer).map_err(minting)?;
    Ok(Pair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}
