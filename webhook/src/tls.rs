//! TLS for the admission port: rustls with the ring provider, TLS 1.2 and 1.3, the certificate
//! and key read from files and reloaded when their content changes, or installed in place by
//! the webhook's own certificate manager (`--tls-secret`, [`Reloader::managed`]).
//!
//! Kubernetes updates a Secret volume by swapping a `..data` symlink, which inotify on the file
//! path does not report reliably; so the files are polled, read through the link, and compared
//! by content. A new pair that does not load (a half-written file, a key that does not match)
//! keeps the old one serving and is logged once.
//!
//! Either way what serves is a [`ServingPair`]: the files' content read into one by
//! [`ServingPair::from_pem`] once per change, or the manager's, as it judged the Secret. No PEM
//! of the pair is parsed here; rustls serves the pair's own [`rustls::sign::CertifiedKey`].
//!
//! With a client CA (`--client-ca`), a client must present a certificate that chains to it
//! before any request is read: the port is reachable from every pod, and only the API server
//! is given such a certificate (its `AdmissionConfiguration`), so a review made by anyone else
//! fails the handshake. The bundle is reloaded with the pair, by the same rules.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use miggate_certs::material::{TLS_CRT, TLS_KEY};
use miggate_certs::{PairError, ServingPair};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls::sign::SingleCertAndKey;
use rustls::{RootCertStore, ServerConfig};

use crate::Error;
use crate::error::TlsProblem;

/// Paths of the PEM certificate chain and private key, and of the CA bundle clients'
/// certificates must chain to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertPaths {
    /// PEM certificate chain, leaf first (a Secret volume's `tls.crt`).
    pub cert: PathBuf,
    /// PEM private key (a Secret volume's `tls.key`): PKCS#8, PKCS#1 or SEC1.
    pub key: PathBuf,
    /// PEM bundle of the CAs a client's certificate must chain to (`--client-ca`, a Secret
    /// volume's `ca.crt`); `None`: no client certificate is asked for.
    pub client_ca: Option<PathBuf>,
}

impl CertPaths {
    /// The names a pair served from the Secret `source` (`Secret NAMESPACE/NAME`) goes by in
    /// errors, its keys' (`Secret miggate-system/miggate-webhook-certs (tls.crt)`), and the
    /// client CA bundle's path.
    fn of_secret(source: &str, client_ca: Option<PathBuf>) -> Self {
        CertPaths {
            cert: PathBuf::from(format!("{source} ({TLS_CRT})")),
            key: PathBuf::from(format!("{source} ({TLS_KEY})")),
            client_ca,
        }
    }

    /// Why the files are no pair, naming the file it concerns: the key file for a key that
    /// does not read, else the certificate file (the pair's, when the two do not make one), in
    /// the words rustls' own reading gave.
    fn pair_error(&self, e: PairError) -> Error {
        let (path, why) = match e {
            PairError::Chain(e) => (&self.cert, TlsProblem::NotCertificateChain(e)),
            PairError::NoCertificate => (&self.cert, TlsProblem::NoCertificate),
            PairError::Leaf(e) => (&self.cert, TlsProblem::NotALeaf(e)),
            PairError::Key(e) => (&self.key, TlsProblem::NoPrivateKey(e)),
            PairError::Unusable(e) | PairError::Mismatch(e) => (&self.cert, TlsProblem::NotAPair(e)),
        };
        tls(path, why)
    }
}

fn tls(path: &Path, why: TlsProblem) -> Error {
    Error::Tls {
        path: path.to_path_buf(),
        why,
    }
}

/// The files' content, as read together: compared with the last read to see a change, and
/// read into a pair only then.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Pems {
    /// The certificate chain; empty where the pair is not read from files.
    cert: Vec<u8>,
    /// The private key; empty where the pair is not read from files.
    key: Vec<u8>,
    /// The client CA bundle, when one is configured.
    client_ca: Option<Vec<u8>>,
}

impl Pems {
    /// Reads every file `paths` names.
    fn read(paths: &CertPaths) -> Result<Pems, Error> {
        Ok(Pems {
            cert: read(&paths.cert)?,
            key: read(&paths.key)?,
            client_ca: read_client_ca(paths)?,
        })
    }
}

fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn read_client_ca(paths: &CertPaths) -> Result<Option<Vec<u8>>, Error> {
    paths.client_ca.as_deref().map(read).transpose()
}

/// The verifier of client certificates (a certificate chaining to a CA of the client CA
/// bundle), or none when no bundle is configured.
type ClientAuth = Option<Arc<dyn ClientCertVerifier>>;

/// The verifier of client certificates for the bundle `pem` (from `paths.client_ca`), or none
/// when no bundle is configured. Errors name the bundle's file.
fn client_auth(paths: &CertPaths, pem: Option<&[u8]>) -> Result<ClientAuth, Error> {
    let (Some(path), Some(pem)) = (paths.client_ca.as_deref(), pem) else {
        return Ok(None);
    };
    let roots = client_roots(pem).map_err(|why| tls(path, why))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map(Some)
        .map_err(|e| tls(path, TlsProblem::NotClientCaBundle(e)))
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

/// A rustls server configuration serving `pair` as it was read (no PEM parsed here): ring
/// only, TLS 1.2+, HTTP/1.1 ALPN, and a client certificate required when `client` verifies
/// one. Errors name the certificate's file, never its content.
fn server_config(paths: &CertPaths, pair: &ServingPair, client: ClientAuth) -> Result<ServerConfig, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| tls(&paths.cert, TlsProblem::Protocols(e)))?;
    let builder = match client {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(Arc::new(SingleCertAndKey::from(pair.certified_key())));
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// What serves now: the pair, the client verifier, and the configuration made of them.
struct Loaded {
    pair: ServingPair,
    client: ClientAuth,
    config: ServerConfig,
}

/// Reads the files' content `pems` into what serves: the pair through the one reader of
/// serving pairs ([`ServingPair::from_pem`]), unless `serving` already holds it read from the
/// same bytes. A chain or key that does not read is said before a client CA bundle that does
/// not, and a pair that does not match after it.
fn load_files(
    paths: &CertPaths,
    pems: &Pems,
    serving: Option<(&Pems, &ServingPair)>,
) -> Result<Loaded, Error> {
    let pair = match serving {
        Some((seen, pair)) if seen.cert == pems.cert && seen.key == pems.key => Ok(pair.clone()),
        _ => ServingPair::from_pem(&pems.cert, &pems.key),
    };
    let pair = match pair {
        Err(e) if !e.both_read() => return Err(paths.pair_error(e)),
        read => read,
    };
    let client = client_auth(paths, pems.client_ca.as_deref())?;
    let pair = pair.map_err(|e| paths.pair_error(e))?;
    let config = server_config(paths, &pair, client.clone())?;
    Ok(Loaded { pair, client, config })
}

/// The serving configuration and what it was loaded from, for reloads.
#[derive(Debug, Clone)]
pub struct Reloader {
    paths: CertPaths,
    /// The pair comes from [`Reloader::install`], not from the files; only the client CA
    /// bundle is re-read.
    managed: bool,
    config: Arc<ArcSwap<ServerConfig>>,
    /// What serves now, and the last content that failed to load.
    seen: Arc<Mutex<Seen>>,
}

#[derive(Debug)]
struct Seen {
    /// The files' content serving now (of a managed pair, the client CA bundle's alone).
    serving: Pems,
    /// The pair serving now, as read.
    pair: ServingPair,
    /// The client verifier serving now.
    client: ClientAuth,
    /// The last content that did not load.
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
        let loaded = load_files(&paths, &pems, None)?;
        Ok(Reloader::serving(paths, false, pems, loaded))
    }

    /// A configuration serving `pair` as the certificate manager judged it, not read from
    /// files; `source` names where it comes from in errors
    /// (`Secret miggate-system/miggate-webhook-certs`). Later pairs come through
    /// [`Reloader::install`]; the client CA bundle, when given, is read now and re-read by
    /// [`Reloader::check`].
    pub fn managed(source: &str, pair: &ServingPair, client_ca: Option<PathBuf>) -> Result<Self, Error> {
        let paths = CertPaths::of_secret(source, client_ca);
        let pems = Pems {
            client_ca: read_client_ca(&paths)?,
            ..Pems::default()
        };
        let client = client_auth(&paths, pems.client_ca.as_deref())?;
        let config = server_config(&paths, pair, client.clone())?;
        let loaded = Loaded {
            pair: pair.clone(),
            client,
            config,
        };
        Ok(Reloader::serving(paths, true, pems, loaded))
    }

    fn serving(paths: CertPaths, managed: bool, pems: Pems, loaded: Loaded) -> Self {
        Reloader {
            config: Arc::new(ArcSwap::from_pointee(loaded.config)),
            paths,
            managed,
            seen: Arc::new(Mutex::new(Seen {
                serving: pems,
                pair: loaded.pair,
                client: loaded.client,
                rejected: None,
            })),
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        match self.seen.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Serves `pair` for new connections from now on, with the client verifier serving now;
    /// an error leaves the pair serving now in place.
    pub fn install(&self, pair: &ServingPair) -> Result<(), Error> {
        let mut seen = self.seen();
        let config = server_config(&self.paths, pair, seen.client.clone())?;
        self.config.store(Arc::new(config));
        seen.pair = pair.clone();
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
        let mut seen = self.seen();
        let read = if self.managed {
            read_client_ca(&self.paths).map(|client_ca| Pems {
                client_ca,
                ..Pems::default()
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
        let loaded = if self.managed {
            // The pair is the manager's, as it installed it: only the bundle is new.
            client_auth(&self.paths, pems.client_ca.as_deref()).and_then(|client| {
                let config = server_config(&self.paths, &seen.pair, client.clone())?;
                Ok(Loaded {
                    pair: seen.pair.clone(),
                    client,
                    config,
                })
            })
        } else {
            load_files(&self.paths, &pems, Some((&seen.serving, &seen.pair)))
        };
        match loaded {
            Ok(loaded) => {
                self.config.store(Arc::new(loaded.config));
                tracing::info!(cert = %self.paths.cert.display(), "TLS certificate reloaded");
                seen.serving = pems;
                seen.pair = loaded.pair;
                seen.client = loaded.client;
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
    use miggate_certs::material::CA_CRT;
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
            cert: dir.path().join(TLS_CRT),
            key: dir.path().join(TLS_KEY),
            client_ca: client_ca.map(|_| dir.path().join(CA_CRT)),
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
        assert!(e.contains(CA_CRT) && e.contains(why), "{e}");
    }

    /// A self-signed pair for `localhost`, PEM.
    fn pem_pair() -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// Each way the files can fail to be a pair, named by the file it concerns, in the words
    /// rustls' own reading gave.
    #[rstest]
    #[case::no_certificate(true, "", "", TLS_CRT, "no CERTIFICATE block")]
    #[case::garbage_certificate(
        true,
        "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n",
        "",
        TLS_CRT,
        "not a PEM certificate chain"
    )]
    #[case::not_x509(
        true,
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        "",
        TLS_CRT,
        "certificate and key do not make a pair"
    )]
    #[case::no_key(false, "", "", TLS_KEY, "no usable PEM private key")]
    #[case::key_that_cannot_sign(
        false,
        "",
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        TLS_CRT,
        "certificate and key do not make a pair"
    )]
    #[case::key_of_another(false, "", "another", TLS_CRT, "certificate and key do not make a pair")]
    fn a_file_that_is_not_a_pair_stops_start_up_naming_it(
        #[case] cert_broken: bool,
        #[case] cert: &str,
        #[case] key: &str,
        #[case] file: &str,
        #[case] why: &str,
    ) {
        let (_dir, paths) = files(None);
        if cert_broken {
            std::fs::write(&paths.cert, cert).unwrap();
        } else if key == "another" {
            std::fs::write(&paths.key, pem_pair().1).unwrap();
        } else {
            std::fs::write(&paths.key, key).unwrap();
        }
        let e = Reloader::load(paths.clone()).unwrap_err();
        let text = e.to_string();
        let named = paths.cert.parent().unwrap().join(file);
        assert!(
            text.starts_with(&format!("TLS material in {} is unusable: {why}", named.display())),
            "{text}"
        );
        assert!(
            std::error::Error::source(&e).is_some(),
            "the cause is kept: {e:?}"
        );
    }

    /// Of a chain and key that read and a client CA bundle that does not, the bundle is named
    /// first, as before the pair was read apart from the configuration.
    #[test]
    fn a_bad_client_ca_bundle_is_named_before_a_key_of_another() {
        let (_dir, paths) = files(Some("half a file"));
        std::fs::write(&paths.key, pem_pair().1).unwrap();
        let e = Reloader::load(paths).unwrap_err().to_string();
        assert!(e.contains(CA_CRT) && e.contains("no CERTIFICATE block"), "{e}");
    }

    #[test]
    fn a_changed_pair_reloads_and_a_broken_one_keeps_the_old_serving() {
        let (_dir, paths) = files(None);
        let reloader = Reloader::load(paths.clone()).unwrap();
        let first = reloader.current();
        let (cert, key) = pem_pair();
        std::fs::write(&paths.cert, &cert).unwrap();
        std::fs::write(&paths.key, &key).unwrap();
        assert_eq!(reloader.check(), Reload::Reloaded);
        assert!(!Arc::ptr_eq(&first, &reloader.current()));
        let served = reloader.current();
        std::fs::write(&paths.key, pem_pair().1).unwrap();
        assert_eq!(reloader.check(), Reload::Rejected);
        assert!(
            Arc::ptr_eq(&served, &reloader.current()),
            "the old pair serves on"
        );
        assert_eq!(
            reloader.check(),
            Reload::Unchanged,
            "a rejected pair is logged once"
        );
    }

    /// A pair the certificate manager judged is served as it is, and a new one replaces it.
    #[test]
    fn a_managed_pair_is_served_and_replaced_in_place() {
        let pair =
            |(cert, key): (String, String)| ServingPair::from_pem(cert.as_bytes(), key.as_bytes()).unwrap();
        let reloader = Reloader::managed("Secret ns/certs", &pair(pem_pair()), None).unwrap();
        assert_eq!(reloader.check(), Reload::Unchanged, "no file to re-read");
        let first = reloader.current();
        reloader.install(&pair(pem_pair())).unwrap();
        assert!(!Arc::ptr_eq(&first, &reloader.current()));
        assert_eq!(reloader.current().alpn_protocols, vec![b"http/1.1".to_vec()]);
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
