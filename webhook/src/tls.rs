//! TLS for the admission port: rustls with the ring provider, TLS 1.2 and 1.3, the certificate
//! and key read from files and reloaded when their content changes.
//!
//! Kubernetes updates a Secret volume by swapping a `..data` symlink, which inotify on the file
//! path does not report reliably; so the files are polled, read through the link, and compared
//! by content. A new pair that does not load (a half-written file, a key that does not match)
//! keeps the old one serving and is logged once.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum_server::tls_rustls::RustlsConfig;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::Error;

/// Paths of the PEM certificate chain and private key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertPaths {
    /// PEM certificate chain, leaf first (`tls.crt`).
    pub cert: PathBuf,
    /// PEM private key (`tls.key`): PKCS#8, PKCS#1 or SEC1.
    pub key: PathBuf,
}

fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// A rustls server configuration from PEM bytes: ring only, TLS 1.2+, HTTP/1.1 ALPN. Errors
/// name the file, never its content.
pub fn server_config(paths: &CertPaths, cert_pem: &[u8], key_pem: &[u8]) -> Result<ServerConfig, Error> {
    let tls = |path: &Path, why: String| Error::Tls {
        path: path.to_path_buf(),
        why,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| tls(&paths.cert, format!("not a PEM certificate chain: {e}")))?;
    if certs.is_empty() {
        return Err(tls(&paths.cert, "no CERTIFICATE block".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| tls(&paths.key, format!("no usable PEM private key: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| tls(&paths.cert, e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            tls(
                &paths.cert,
                format!("certificate and key do not make a pair: {e}"),
            )
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The serving configuration and what it was loaded from, for reloads.
#[derive(Debug, Clone)]
pub struct Reloader {
    paths: CertPaths,
    config: RustlsConfig,
    /// The (certificate, key) bytes serving now, and the last pair that failed to load.
    seen: Arc<Mutex<Seen>>,
}

#[derive(Debug, Default)]
struct Seen {
    serving: (Vec<u8>, Vec<u8>),
    rejected: Option<(Vec<u8>, Vec<u8>)>,
}

/// What one reload check did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reload {
    /// The files hold what is serving.
    Unchanged,
    /// A new pair is serving for new connections.
    Reloaded,
    /// The files changed but do not load; the old pair keeps serving.
    Rejected,
}

impl Reloader {
    /// Loads the pair; an error here stops start-up (there is nothing to serve yet).
    pub fn load(paths: CertPaths) -> Result<Self, Error> {
        let cert = read(&paths.cert)?;
        let key = read(&paths.key)?;
        let config = server_config(&paths, &cert, &key)?;
        Ok(Reloader {
            config: RustlsConfig::from_config(Arc::new(config)),
            paths,
            seen: Arc::new(Mutex::new(Seen {
                serving: (cert, key),
                rejected: None,
            })),
        })
    }

    /// The configuration the acceptor reads on each handshake.
    pub fn rustls_config(&self) -> RustlsConfig {
        self.config.clone()
    }

    /// Re-reads both files (through any symlink) and swaps in a new configuration when their
    /// content changed and loads. Blocking: call it off the async executor.
    pub fn check(&self) -> Reload {
        let mut seen = match self.seen.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        let pair = match (read(&self.paths.cert), read(&self.paths.key)) {
            (Ok(c), Ok(k)) => (c, k),
            (Err(e), _) | (_, Err(e)) => {
                // A swap in progress can leave a link dangling for a moment: try next time.
                tracing::debug!(error = %e, "certificate files unreadable; keeping the serving pair");
                return Reload::Unchanged;
            }
        };
        if pair == seen.serving || seen.rejected.as_ref() == Some(&pair) {
            return Reload::Unchanged;
        }
        match server_config(&self.paths, &pair.0, &pair.1) {
            Ok(config) => {
                self.config.reload_from_config(Arc::new(config));
                tracing::info!(cert = %self.paths.cert.display(), "TLS certificate reloaded");
                seen.serving = pair;
                seen.rejected = None;
                Reload::Reloaded
            }
            Err(e) => {
                tracing::error!(error = %e, "new TLS certificate rejected; the previous one keeps serving");
                seen.rejected = Some(pair);
                Reload::Rejected
            }
        }
    }
}
