//! What the Secret holds, read once into typed certificates, and judged: usable as it is, due
//! for renewal, or unusable (and why). No I/O: the manager reads and writes the Secret.
//!
//! The Secret's keys: `ca.crt` and `ca.key` (the CA), `tls.crt` and `tls.key` (the serving
//! certificate the CA signed), and `ca-bundle.crt` (what every webhook configuration's
//! `caBundle` carries: the CA, then, for a while after a CA rotation, the CA before it, so a
//! replica still serving a certificate of the old CA is trusted until it switches). The
//! annotation [`PREVIOUS_CA_UNTIL`] says until when that previous CA is kept, and
//! [`WRITTEN_BY`] who wrote the Secret.
//!
//! Only what this webhook's own account wrote is trusted: a Secret whose data another wrote
//! (someone who planted a CA before the install, or won the race to create it) is replaced
//! whole, nothing of it kept, so a CA planted there never reaches a `caBundle`. What a
//! Secret of ours may keep is bounded too ([`MAX_VALUE_BYTES`], [`KEPT_PREVIOUS_CAS`], the cap
//! on [`PREVIOUS_CA_UNTIL`]): whoever could write a little into it cannot make the bundle trust
//! more, or longer, than one rotation needs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::RootCertStore;
use rustls::client::danger::ServerCertVerifier;
use rustls::client::{VerifierBuilderError, WebPkiServerVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

pub use crate::cert::{Cert, CertError, bundle_from_pem};
use crate::error::MintError;
pub use crate::mint::Pair;
pub use crate::serving::ServingPair;
use crate::serving::{Chain, PairError};

/// The CA's certificate.
pub const CA_CRT: &str = "ca.crt";
/// The CA's private key.
pub const CA_KEY: &str = "ca.key";
/// The serving certificate.
pub const TLS_CRT: &str = "tls.crt";
/// The serving certificate's private key.
pub const TLS_KEY: &str = "tls.key";
/// The CAs a configuration's `caBundle` carries.
pub const CA_BUNDLE: &str = "ca-bundle.crt";
/// Until when (RFC 3339) `ca-bundle.crt` keeps the CA before the current one.
pub const PREVIOUS_CA_UNTIL: &str = "miggate.io/previous-ca-until";
/// Who wrote the Secret: the UID of the webhook's own account as the API server reports it
/// (a service account's UID, which no one can know before the account exists, so no one can
/// plant a Secret that carries it ahead of an install).
pub const WRITTEN_BY: &str = "miggate.io/written-by";

/// The most bytes a data value may hold to be read; a larger one is unreadable and replaced.
/// What miggate writes is far smaller (a P-256 certificate is under 1 KiB, its key 250 bytes,
/// a bundle of two CAs under 2 KiB; an RSA-4096 chain would still fit 30 times), and the
/// bound keeps a value someone stuffed from being parsed on every round and, through the
/// bundle, copied into every webhook configuration the API server loads.
pub const MAX_VALUE_BYTES: usize = 64 * 1024;
/// How many CAs besides the current one the bundle keeps: the one before the last rotation,
/// so a replica still serving a certificate of it is trusted until it switches. Never more:
/// every CA trusted is a key that can sign for the webhook's name.
pub const KEPT_PREVIOUS_CAS: usize = 1;

/// The Secret's data as read: each key's bytes where present, and the annotations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Raw {
    /// Each data key's bytes.
    pub data: BTreeMap<String, Vec<u8>>,
    /// [`PREVIOUS_CA_UNTIL`], when set.
    pub previous_until: Option<String>,
    /// [`WRITTEN_BY`], when set.
    pub written_by: Option<String>,
}

/// What the Secret should hold: the CA, the serving pair, and the bundle, each certificate
/// read once, here, into what the manager judges and serves by. The PEM text is what the
/// Secret is written with; the serving pair is what the webhook serves.
#[derive(Clone, PartialEq, Eq)]
pub struct Contents {
    /// The CA, PEM.
    pub ca: Pair,
    /// The CA, read.
    pub ca_cert: Cert,
    /// The serving certificate and key, PEM.
    pub leaf: Pair,
    /// The serving certificate and key, read: what the webhook serves.
    pub serving: ServingPair,
    /// The CAs to trust, PEM, the current CA first.
    pub bundle: String,
    /// Until when the bundle keeps CAs other than the current one.
    pub previous_until: Option<SystemTime>,
    /// Who writes it: [`WRITTEN_BY`]'s value.
    pub written_by: String,
}

impl std::fmt::Debug for Contents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Contents")
            .field("ca", &self.ca)
            .field("leaf", &self.leaf)
            .field("previous_until", &self.previous_until)
            .field("written_by", &self.written_by)
            .finish_non_exhaustive()
    }
}

impl Contents {
    /// The Secret's data keys and their bytes.
    pub fn data(&self) -> BTreeMap<String, Vec<u8>> {
        BTreeMap::from([
            (CA_CRT.to_string(), self.ca.cert_pem.clone().into_bytes()),
            (CA_KEY.to_string(), self.ca.key_pem.clone().into_bytes()),
            (TLS_CRT.to_string(), self.leaf.cert_pem.clone().into_bytes()),
            (TLS_KEY.to_string(), self.leaf.key_pem.clone().into_bytes()),
            (CA_BUNDLE.to_string(), self.bundle.clone().into_bytes()),
        ])
    }

    /// [`PREVIOUS_CA_UNTIL`]'s value, RFC 3339 in UTC.
    pub fn previous_until_text(&self) -> Option<String> {
        self.previous_until
            .map(|t| humantime::format_rfc3339_seconds(t).to_string())
    }
}

impl From<&Contents> for Raw {
    /// What the Secret holds once `contents` is written.
    fn from(contents: &Contents) -> Raw {
        Raw {
            data: contents.data(),
            previous_until: contents.previous_until_text(),
            written_by: Some(contents.written_by.clone()),
        }
    }
}

/// Why a part of the Secret is replaced: the `reason` label of the rotation metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Why {
    /// Nothing there (a new install, or the Secret deleted).
    Missing,
    /// Data this webhook's account did not write ([`WRITTEN_BY`] missing or another's):
    /// replaced whole, nothing of it kept or trusted.
    Foreign,
    /// Not a PEM certificate or key, or not a CA where a CA belongs.
    Unreadable,
    /// Past its not-after (or before its not-before).
    Expired,
    /// The key is not the certificate's.
    KeyMismatch,
    /// A serving certificate that does not name every DNS name the webhook is called by.
    WrongName,
    /// A serving certificate the CA did not sign (or not for serving).
    Untrusted,
    /// Two thirds of its lifetime gone: renewed ahead of expiry.
    Due,
    /// A new CA: every serving certificate of the old one is replaced.
    NewCa,
}

impl Why {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Why::Missing => "missing",
            Why::Foreign => "foreign",
            Why::Unreadable => "unreadable",
            Why::Expired => "expired",
            Why::KeyMismatch => "key-mismatch",
            Why::WrongName => "wrong-name",
            Why::Untrusted => "untrusted",
            Why::Due => "due",
            Why::NewCa => "new-ca",
        }
    }
}

/// What a judgement changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// A new CA (and so a new serving certificate), and why.
    Ca(Why),
    /// A new serving certificate from the same CA, and why.
    Serving(Why),
    /// The bundle rewritten: it lacked the CA, held something else (more than one previous
    /// CA, a certificate that is no CA, one expired), or a previous CA's overlap ended or was
    /// set past its cap.
    Bundle,
}

/// What the webhook needs of its certificates.
#[derive(Debug, Clone)]
pub struct Wanted {
    /// The DNS names the serving certificate must carry (the Service's, and any an admin adds).
    pub names: Vec<String>,
    /// A new CA's lifetime.
    pub ca_lifetime: Duration,
    /// A new serving certificate's lifetime (never past its CA's).
    pub serving_lifetime: Duration,
    /// How long the CA before a rotation stays in the bundle.
    pub overlap: Duration,
}

/// Every certificate of a PEM bundle, or `None` when any block is not one: for callers to
/// whom a bundle that does not read trusts nothing, whatever the reason ([`bundle_from_pem`]
/// says it).
pub fn bundle_certs(pem: &[u8]) -> Option<Vec<Cert>> {
    bundle_from_pem(pem).ok()
}

/// Why a CA makes no verifier.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifierError {
    /// The CA is no trust anchor.
    #[error("the CA cannot be a trust anchor: {0}")]
    Anchor(#[source] rustls::Error),
    /// rustls built no verifier of it.
    #[error("no verifier of the CA: {0}")]
    Build(#[source] VerifierBuilderError),
}

/// A verifier trusting `ca` alone, as the API server does with a `caBundle` of one CA.
pub fn ca_verifier(ca: &Cert) -> Result<Arc<WebPkiServerVerifier>, VerifierError> {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from(ca.der.clone()))
        .map_err(VerifierError::Anchor)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(VerifierError::Build)
}

/// [`ca_verifier`], `None` when `ca` makes none: for callers to whom such a CA verifies nothing.
pub fn verifier(ca: &Cert) -> Option<Arc<WebPkiServerVerifier>> {
    ca_verifier(ca).ok()
}

/// Why a part of the Secret (the CA, or the serving pair) cannot be kept: the error behind the
/// [`Why`] of its [`Change`]. Names the Secret's keys, never their content.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Unusable {
    /// Data this webhook's account did not write.
    #[error("the Secret's data was written by another than this webhook")]
    Foreign,
    /// The key is not there.
    #[error("{key} is missing")]
    Missing {
        /// The Secret's key.
        key: &'static str,
    },
    /// A value over [`MAX_VALUE_BYTES`], not read.
    #[error("{key} holds more than {MAX_VALUE_BYTES} bytes")]
    Oversized {
        /// The Secret's key.
        key: &'static str,
    },
    /// The certificate, or its key, cannot be read.
    #[error("{crt} and {key} are no pair: {source}")]
    Unreadable {
        /// The certificate's key in the Secret.
        crt: &'static str,
        /// The private key's key in the Secret.
        key: &'static str,
        /// Why.
        #[source]
        source: PairError,
    },
    /// A value that is not UTF-8 text, as PEM is.
    #[error("{key} is not text: {source}")]
    NotText {
        /// The Secret's key.
        key: &'static str,
        /// Where it stops being UTF-8.
        #[source]
        source: std::string::FromUtf8Error,
    },
    /// A certificate that is no CA where the CA belongs.
    #[error("{key} is not a CA")]
    NotCa {
        /// The Secret's key.
        key: &'static str,
    },
    /// The private key is not the certificate's.
    #[error("{key} is not the key of {crt}: {source}")]
    KeyMismatch {
        /// The certificate's key in the Secret.
        crt: &'static str,
        /// The private key's key in the Secret.
        key: &'static str,
        /// rustls' words.
        #[source]
        source: PairError,
    },
    /// Outside its validity.
    #[error("{key} is not valid now")]
    Expired {
        /// The Secret's key.
        key: &'static str,
    },
    /// The CA makes no verifier, so nothing it signed can be trusted.
    #[error("the CA makes no verifier: {0}")]
    NoVerifier(#[source] VerifierError),
    /// A name the webhook is called by that is no DNS name.
    #[error("{name:?} is no DNS name: {source}")]
    NotAName {
        /// The name.
        name: String,
        /// Why.
        #[source]
        source: rustls::pki_types::InvalidDnsNameError,
    },
    /// The serving certificate does not name a name the webhook is called by.
    #[error("the serving certificate is not valid for {name}: {source}")]
    WrongName {
        /// The name.
        name: String,
        /// rustls' words.
        #[source]
        source: rustls::Error,
    },
    /// The CA did not sign the serving certificate (or not for serving).
    #[error("the CA does not verify the serving certificate: {0}")]
    Untrusted(#[source] rustls::Error),
    /// Two thirds of its life gone.
    #[error("{key} is due for renewal")]
    Due {
        /// The Secret's key.
        key: &'static str,
    },
}

impl Unusable {
    /// The reason it gives, the rotation metric's label.
    pub fn why(&self) -> Why {
        match self {
            Unusable::Foreign => Why::Foreign,
            Unusable::Missing { .. } => Why::Missing,
            Unusable::Oversized { .. }
            | Unusable::Unreadable { .. }
            | Unusable::NotText { .. }
            | Unusable::NotCa { .. }
            | Unusable::NoVerifier(_) => Why::Unreadable,
            Unusable::KeyMismatch { .. } => Why::KeyMismatch,
            Unusable::Expired { .. } => Why::Expired,
            Unusable::NotAName { .. } | Unusable::WrongName { .. } => Why::WrongName,
            Unusable::Untrusted(_) => Why::Untrusted,
            Unusable::Due { .. } => Why::Due,
        }
    }
}

/// The certificate and key the Secret holds under `crt` and `key`, read into a pair: both
/// there, readable, the key the certificate's, a CA where one is wanted, and valid at `now`;
/// or why not. The one reading of them: the pair is served as read.
fn read_pair(
    raw: &Raw,
    crt: &'static str,
    key: &'static str,
    want_ca: bool,
    now: SystemTime,
) -> Result<(Pair, ServingPair), Unusable> {
    let cert_pem = raw.data.get(crt).ok_or(Unusable::Missing { key: crt })?;
    let key_pem = raw.data.get(key).ok_or(Unusable::Missing { key })?;
    for (key, value) in [(crt, cert_pem), (key, key_pem)] {
        if value.len() > MAX_VALUE_BYTES {
            return Err(Unusable::Oversized { key });
        }
    }
    let unreadable = |source| Unusable::Unreadable { crt, key, source };
    let chain = Chain::from_pem(cert_pem)
        .and_then(Chain::leaf_read)
        .map_err(unreadable)?;
    if want_ca && !chain.is_ca() {
        return Err(Unusable::NotCa { key: crt });
    }
    let pair = chain.with_key(key_pem).map_err(|source| match source {
        PairError::Mismatch(_) => Unusable::KeyMismatch { crt, key, source },
        source => unreadable(source),
    })?;
    if !pair.leaf().valid_at(now) {
        return Err(Unusable::Expired { key: crt });
    }
    let text = |key: &'static str, b: &[u8]| {
        String::from_utf8(b.to_vec()).map_err(|source| Unusable::NotText { key, source })
    };
    let pem = Pair {
        cert_pem: text(crt, cert_pem)?,
        key_pem: text(key, key_pem)?,
    };
    Ok((pem, pair))
}

/// The CA the Secret holds, or why it cannot be used.
fn read_ca(raw: &Raw, now: SystemTime) -> Result<(Pair, Cert), Unusable> {
    let (pair, read) = read_pair(raw, CA_CRT, CA_KEY, true, now)?;
    let cert = read.leaf().clone();
    if cert.due_at(now) {
        return Err(Unusable::Due { key: CA_CRT });
    }
    Ok((pair, cert))
}

/// The serving pair the Secret holds, judged against `ca` and the names wanted.
fn read_serving(
    raw: &Raw,
    ca: &Cert,
    names: &[String],
    now: SystemTime,
) -> Result<(Pair, ServingPair), Unusable> {
    let (pair, serving) = read_pair(raw, TLS_CRT, TLS_KEY, false, now)?;
    let verifier = ca_verifier(ca).map_err(Unusable::NoVerifier)?;
    let leaf = CertificateDer::from(serving.leaf().der.clone());
    let at = UnixTime::since_unix_epoch(now.duration_since(UNIX_EPOCH).unwrap_or_default());
    for name in names {
        let server = ServerName::try_from(name.clone()).map_err(|source| Unusable::NotAName {
            name: name.clone(),
            source,
        })?;
        match verifier.verify_server_cert(&leaf, &[], &server, &[], at) {
            Ok(_) => {}
            Err(
                source @ rustls::Error::InvalidCertificate(
                    rustls::CertificateError::NotValidForName
                    | rustls::CertificateError::NotValidForNameContext { .. },
                ),
            ) => {
                return Err(Unusable::WrongName {
                    name: name.clone(),
                    source,
                });
            }
            Err(source) => return Err(Unusable::Untrusted(source)),
        }
    }
    if serving.leaf().due_at(now) {
        return Err(Unusable::Due { key: TLS_CRT });
    }
    Ok((pair, serving))
}

/// The result of judging the Secret.
#[derive(Debug)]
pub struct Judged {
    /// What the Secret should hold.
    pub contents: Contents,
    /// What had to change for that; empty when the Secret holds it already.
    pub changes: Vec<Change>,
    /// Why each part was replaced: the error behind each [`Change::Ca`] and
    /// [`Change::Serving`] of `changes`, in their order (a [`Change::Bundle`] has none).
    pub causes: Vec<Unusable>,
}

/// Judges `raw` at `now`: keeps what is usable, replaces what is not, renews what is due.
/// `serving_ca` is the CA of the certificate this replica serves now (it stays trusted through
/// a CA rotation, even when the Secret that held it was deleted or was another's). `writer` is
/// this webhook's identity ([`WRITTEN_BY`]): data written by anyone else is replaced whole.
/// Errors only when minting fails.
pub fn judge(
    raw: &Raw,
    wanted: &Wanted,
    now: SystemTime,
    serving_ca: Option<&Cert>,
    writer: &str,
) -> Result<Judged, crate::Error> {
    judge_trusting(raw, wanted, now, serving_ca, writer, &[])
}

/// [`judge`], where `trusted` are the CAs every webhook configuration's `caBundle` already
/// holds. Of a Secret another wrote, only such a CA may be kept beside the new one, for the
/// overlap: keeping it trusts nothing the API server does not trust already, and it lets
/// replicas still serving a certificate of it (an older miggate, which wrote no
/// [`WRITTEN_BY`], during an upgrade) be verified until they switch. A CA planted in the
/// Secret is in no `caBundle`, and so never trusted.
pub fn judge_trusting(
    raw: &Raw,
    wanted: &Wanted,
    now: SystemTime,
    serving_ca: Option<&Cert>,
    writer: &str,
    trusted: &[Cert],
) -> Result<Judged, crate::Error> {
    let mut causes = Vec::new();
    let foreign = !raw.data.is_empty() && raw.written_by.as_deref() != Some(writer);
    let read = if foreign {
        Err(Unusable::Foreign)
    } else {
        read_ca(raw, now)
    };
    let (ca, ca_cert, previous, previous_until) = match read {
        Ok((ca, cert)) => {
            let (previous, until) = kept_previous(raw, &cert, wanted, now);
            (ca, cert, previous, until)
        }
        Err(cause) => {
            causes.push((Change::Ca(cause.why()), cause));
            let ca = crate::mint::authority(now, wanted.ca_lifetime)?;
            let cert = Cert::from_pem(ca.cert_pem.as_bytes()).map_err(MintError::CaReadBack)?;
            // Keep trusting what may still be served: this replica's CA first (from memory,
            // so trusted whoever wrote the Secret), then the old bundle's, but of a foreign
            // Secret's only what every configuration trusts already.
            let stored: Vec<Cert> = if foreign {
                stored_bundle(raw)
                    .into_iter()
                    .filter(|c| trusted.iter().any(|t| t.der == c.der))
                    .collect()
            } else {
                stored_bundle(raw)
            };
            let previous = previous_of(serving_ca.cloned().into_iter().chain(stored), &cert, now);
            let until = (!previous.is_empty()).then(|| now + wanted.overlap);
            (ca, cert, previous, until)
        }
    };
    let read = causes
        .is_empty()
        .then(|| read_serving(raw, &ca_cert, &wanted.names, now));
    let (leaf, serving) = match read {
        Some(Ok(read)) => read,
        Some(Err(cause)) => {
            causes.push((Change::Serving(cause.why()), cause));
            mint_serving(&ca, &ca_cert, wanted, now)?
        }
        // A new CA means a new serving pair: the one stored is not looked at.
        None => mint_serving(&ca, &ca_cert, wanted, now)?,
    };
    let mut bundle = pem_of(&ca_cert.der);
    for c in &previous {
        bundle.push_str(&pem_of(&c.der));
    }
    let stored_bundle = raw.data.get(CA_BUNDLE).map(Vec::as_slice);
    let stored_until = raw.previous_until.as_deref();
    let contents = Contents {
        ca,
        ca_cert,
        leaf,
        serving,
        bundle,
        previous_until,
        written_by: writer.to_string(),
    };
    let (mut changes, causes): (Vec<Change>, Vec<Unusable>) = causes.into_iter().unzip();
    if changes.is_empty()
        && (stored_bundle != Some(contents.bundle.as_bytes())
            || stored_until != contents.previous_until_text().as_deref())
    {
        changes.push(Change::Bundle);
    }
    Ok(Judged {
        contents,
        changes,
        causes,
    })
}

/// A new serving pair from `ca` for the names wanted, read back as the Secret's would be.
fn mint_serving(
    ca: &Pair,
    ca_cert: &Cert,
    wanted: &Wanted,
    now: SystemTime,
) -> Result<(Pair, ServingPair), crate::Error> {
    let leaf = crate::mint::serving(ca, &wanted.names, now, wanted.serving_lifetime, ca_cert.not_after)?;
    let serving = ServingPair::from_pem(leaf.cert_pem.as_bytes(), leaf.key_pem.as_bytes())
        .map_err(MintError::ServingReadBack)?;
    Ok((leaf, serving))
}

/// The certificates of the stored bundle; none when it is missing, unreadable or larger than
/// [`MAX_VALUE_BYTES`].
fn stored_bundle(raw: &Raw) -> Vec<Cert> {
    raw.data
        .get(CA_BUNDLE)
        .filter(|b| b.len() <= MAX_VALUE_BYTES)
        .and_then(|b| bundle_certs(b))
        .unwrap_or_default()
}

/// The CAs, of `candidates` in order, that a bundle whose current CA is `current` may keep:
/// each a CA (basic constraints), valid at `now`, not `current`, at most [`KEPT_PREVIOUS_CAS`].
fn previous_of(candidates: impl IntoIterator<Item = Cert>, current: &Cert, now: SystemTime) -> Vec<Cert> {
    let mut kept: Vec<Cert> = Vec::new();
    for c in candidates {
        if kept.len() == KEPT_PREVIOUS_CAS {
            break;
        }
        if c.is_ca && c.valid_at(now) && c.der != current.der && !kept.iter().any(|k| k.der == c.der) {
            kept.push(c);
        }
    }
    kept
}

/// What a Secret whose CA stays keeps of its bundle: the previous CA while its
/// [`PREVIOUS_CA_UNTIL`] lasts, that time capped ([`overlap_cap`]).
fn kept_previous(
    raw: &Raw,
    current: &Cert,
    wanted: &Wanted,
    now: SystemTime,
) -> (Vec<Cert>, Option<SystemTime>) {
    let until = raw
        .previous_until
        .as_deref()
        .and_then(|t| humantime::parse_rfc3339(t).ok())
        .map(|until| until.min(overlap_cap(current, wanted, now)));
    match until {
        Some(until) if now < until => {
            let previous = previous_of(stored_bundle(raw), current, now);
            let until = (!previous.is_empty()).then_some(until);
            (previous, until)
        }
        _ => (Vec::new(), None),
    }
}

/// The latest [`PREVIOUS_CA_UNTIL`] a bundle whose current CA is `current` may carry: one
/// overlap after that CA was made, and never more than one overlap from `now`. A previous CA
/// is kept for one rotation, never longer, whatever the annotation says. When it was made is
/// read from its not-before, which minting sets at most [`BACKDATE`](crate::mint::BACKDATE)
/// earlier (so that bound, not the not-before itself: a 10-minute overlap would otherwise end
/// 50 minutes before the rotation).
fn overlap_cap(current: &Cert, wanted: &Wanted, now: SystemTime) -> SystemTime {
    let made = current.not_before + crate::mint::BACKDATE;
    (made + wanted.overlap).min(now + wanted.overlap)
}

/// One certificate as PEM, `\n` line endings as the rest of the Secret.
pub fn pem_of(der: &[u8]) -> String {
    pem::encode_config(
        &pem::Pem::new("CERTIFICATE", der),
        pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
    )
}
