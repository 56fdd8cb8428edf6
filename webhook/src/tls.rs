//! TLS for the admission port: rustls with the ring provider, TLS 1.2 and 1.3, the certificate
//! and key read from files and reloaded when their content changes, or installed in place by
//! the webhook's own certificate manager (`--tls-secret`, [`Reloader::managed`]).
//!
//! Kubernetes updates a Secret volume by swapping a `..data` symlink, which inotify on the file
//! path does not report reliably; so the files are polled, read through the link, and compared
//! by content. A new pair that does not load (a half-written file, a key that does not match)
//! keeps the old one serving and is logged once.
//!
//! With a client CA (`--client-ca`), a client must present a certificate that chains to it
//! before any request is read: the port is reachable from every pod, and only the API server
//! is given such a certificate (its `AdmissionConfiguration`), so a review made by anyone else
//! fails the handshake. The bundle is reloaded with the pair, by the same rules.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

use crate::Error;
use crate::error::TlsProblem;

/// Paths of the PEM certificate chain and private key, and of the CA bundle clients'
/// certificates must chain to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertPaths {
    /// PEM certificate chain, leaf first (`tls.crt`).
    pub cert: PathBuf,
    /// PEM private key (`tls.key`): PKCS#8, PKCS#1 or SEC1.
    pub key: PathBuf,
    /// PEM bundle of the CAs a client's certificate must chain to (`--client-ca`); `None`: no
    /// client certificate is asked for.
    pub client_ca: Option<PathBuf>,
}

/// The files' content, as read together.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pems {
    /// The certificate chain.
    pub cert: Vec<u8>,
    /// The private key.
    pub key: Vec<u8>,
    /// The client CA bundle, when one is configured.
    pub client_ca: Option<Vec<u8>>,
}

impl Pems {
    /// Reads every file `paths` names.
    pub fn read(paths: &CertPaths) -> Result<Pems, Error> {
        Ok(Pems {
            cert: read(&paths.cert)?,
            key: read(&paths.key)?,
            client_ca: paths.client_ca.as_deref().map(read).transpose()?,
        })
    }
}

fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// A rustls server configuration from PEM bytes: ring only, TLS 1.2+, HTTP/1.1 ALPN, and a
/// client certificate required when `pems` has a client CA bundle. Errors name the file,
/// never its content.
pub fn server_config(paths: &CertPaths, pems: &Pems) -> Result<ServerConfig, Error> {
    let tls = |path: &Path, why: TlsProblem| Error::Tls {
        path: path.to_path_buf(),
        why,
    };
    let (cert_pem, key_pem) = (&pems.cert, &pems.key);
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| tls(&paths.cert, TlsProblem::NotCertificateChain(e)))?;
    if certs.is_empty() {
        return Err(tls(&paths.cert, TlsProblem::NoCertificate));
    }
    let key =
        PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| tls(&paths.key, TlsProblem::NoPrivateKey(e)))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| tls(&paths.cert, TlsProblem::Protocols(e)))?;
    let builder = match (paths.client_ca.as_deref(), pems.client_ca.as_deref()) {
        (Some(path), Some(pem)) => {
            let roots = client_roots(pem).map_err(|why| tls(path, why))?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| tls(path, TlsProblem::NotClientCaBundle(e)))?;
            builder.with_client_cert_verifier(verifier)
        }
        _ => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| tls(&paths.cert, TlsProblem::NotAPair(e)))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The CAs of a PEM bundle, for the client verifier; at least one.
fn client_roots(pem: &[u8]) -> Result<RootCertStore, TlsProblem> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(TlsProblem::NotCertificateBundle)?;
        roots.add(cert).map_err(TlsProblem::NotCa)?;
    }
    if roots.is_empty() {
        return Err(TlsProblem::NoCertificate);
    }
    Ok(roots)
}

/// The serving configuration and what it was loaded from, for reloads.
#[derive(Debug, Clone)]
pub struct Reloader {
    paths: CertPaths,
    /// The pair comes from [`Reloader::install`], not from the files; only the client CA
    /// bundle is re-read.
    managed: bool,
    config: Arc<ArcSwap<ServerConfig>>,
    /// The files' content serving now, and the last content that failed to load.
    seen: Arc<Mutex<Seen>>,
}

#[derive(Debug, Default)]
struct Seen {
    serving: Pems,
    rejected: Option<Pems>,
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
    /// Loads the pair (and the client CA bundle); an error here stops start-up (there is
    /// nothing to serve yet).
    pub fn load(paths: CertPaths) -> Result<Self, Error> {
        let pems = Pems::read(&paths)?;
        let config = server_config(&paths, &pems)?;
        Ok(Reloader {
            config: Arc::new(ArcSwap::from_pointee(config)),
            paths,
            managed: false,
            seen: Arc::new(Mutex::new(Seen {
                serving: pems,
                rejected: None,
            })),
        })
    }

    /// A configuration serving `cert` and `key` (PEM) as given, not read from files; `source`
    /// names where they come from in errors (`Secret miggate-system/miggate-webhook-certs`).
    /// Later pairs come through [`Reloader::install`]; the client CA bundle, when given, is
    /// read now and re-read by [`Reloader::check`].
    pub fn managed(
        source: &str,
        cert: Vec<u8>,
        key: Vec<u8>,
        client_ca: Option<PathBuf>,
    ) -> Result<Self, Error> {
        let paths = CertPaths {
            cert: PathBuf::from(format!("{source} ({})", miggate_certs::material::TLS_CRT)),
            key: PathBuf::from(format!("{source} ({})", miggate_certs::material::TLS_KEY)),
            client_ca,
        };
        let pems = Pems {
            cert,
            key,
            client_ca: paths.client_ca.as_deref().map(read).transpose()?,
        };
        let config = server_config(&paths, &pems)?;
        Ok(Reloader {
            config: Arc::new(ArcSwap::from_pointee(config)),
            paths,
            managed: true,
            seen: Arc::new(Mutex::new(Seen {
                serving: pems,
                rejected: None,
            })),
        })
    }

    /// Serves `cert` and `key` (PEM) for new connections from now on; an error leaves the
    /// pair serving now in place.
    pub fn install(&self, cert: Vec<u8>, key: Vec<u8>) -> Result<(), Error> {
        let mut seen = match self.seen.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        let pems = Pems {
            cert,
            key,
            client_ca: seen.serving.client_ca.clone(),
        };
        let config = server_config(&self.paths, &pems)?;
        self.config.store(Arc::new(config));
        seen.serving = pems;
        seen.rejected = None;
        Ok(())
    }

    /// The configuration serving now: each handshake reads it, so a reload serves the next
    /// connection and leaves open ones as they are.
    pub fn current(&self) -> Arc<ServerConfig> {
        self.config.load_full()
    }

    /// Re-reads the files (through any symlink) and swaps in a new configuration when their
    /// content changed and loads. Blocking: call it off the async executor.
    pub fn check(&self) -> Reload {
        let mut seen = match self.seen.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        let read = if self.managed {
            self.paths
                .client_ca
                .as_deref()
                .map(read)
                .transpose()
                .map(|client_ca| Pems {
                    client_ca,
                    ..seen.serving.clone()
                })
        } else {
            Pems::read(&self.paths)
        };
        let pems = match read {
            Ok(pems) => pems,
            Err(e) => {
                // A swap in progress can leave a link dangling for a moment: try next time.
                tracing::debug!(error = %e, "certificate files unreadable; keeping the serving pair");
                return Reload::Unchanged;
            }
        };
        if pems == seen.serving || seen.rejected.as_ref() == Some(&pems) {
            return Reload::Unchanged;
        }
        match server_config(&self.paths, &pems) {
            Ok(config) => {
                self.config.store(Arc::new(config));
                tracing::info!(cert = %self.paths.cert.display(), "TLS certificate reloaded");
                seen.serving = pems;
                seen.rejected = None;
                Reload::Reloaded
            }
            Err(e) => {
                tracing::error!(error = %e, "new TLS certificate rejected; the previous one keeps serving");
                seen.rejected = Some(pems);
                Reload::Rejected
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    use rstest::rstest;

    fn ca_pem() -> String {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.self_signed(&key).unwrap().pem()
    }

    /// A directory with a server pair and `client_ca` as the client CA bundle, when given.
    fn files(client_ca: Option<&str>) -> (tempfile::TempDir, CertPaths) {
        let dir = tempfile::tempdir().unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let paths = CertPaths {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
            client_ca: client_ca.map(|_| dir.path().join("ca.crt")),
        };
        std::fs::write(&paths.cert, cert.pem()).unwrap();
        std::fs::write(&paths.key, key.serialize_pem()).unwrap();
        if let (Some(path), Some(pem)) = (&paths.client_ca, client_ca) {
            std::fs::write(path, pem).unwrap();
        }
        (dir, paths)
    }

    #[rstest]
    #[case::none("", "no CERTIFICATE block")]
    #[case::garbage(
        "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n",
        "not a PEM certificate bundle"
    )]
    fn an_unusable_client_ca_bundle_stops_start_up_naming_the_file(#[case] pem: &str, #[case] why: &str) {
        let (_dir, paths) = files(Some(pem));
        let e = Reloader::load(paths).unwrap_err().to_string();
        assert!(e.contains("ca.crt") && e.contains(why), "{e}");
    }

    #[test]
    fn the_client_ca_bundle_reloads_with_the_pair() {
        let (_dir, paths) = files(Some(&ca_pem()));
        let reloader = Reloader::load(paths.clone()).unwrap();
        assert_eq!(reloader.check(), Reload::Unchanged);
        let ca = paths.client_ca.as_ref().unwrap();
        // A rotation: the bundle holds the old CA and the new one.
        let both = format!("{}{}", std::fs::read_to_string(ca).unwrap(), ca_pem());
        std::fs::write(ca, both).unwrap();
        assert_eq!(reloader.check(), Reload::Reloaded);
        std::fs::write(ca, "half a file").unwrap();
        assert_eq!(reloader.check(), Reload::Rejected);
        assert_eq!(
            reloader.check(),
            Reload::Unchanged,
            "a rejected bundle is logged once"
        );
    }
}
