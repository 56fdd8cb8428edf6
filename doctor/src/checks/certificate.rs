//! The serving certificate: its Secret, its not-after with a warning past the renewal point
//! (two thirds of its life, where the webhook renews its own), and whether a `caBundle`
//! verifies it.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use miggate_certs::material::{Cert, bundle_certs, verifier};
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use super::unreadable;
use crate::{Area, Cluster, Finding, quoted};

pub(super) fn check(cluster: &Cluster, out: &mut Vec<Finding>) {
    let serving = match &cluster.serving {
        Err(e) => return out.push(unreadable(Area::Certificate, "the certificate Secret", e)),
        Ok(None) => return,
        Ok(Some(s)) => s,
    };
    let secret = quoted(&serving.secret);
    let Some(pem) = &serving.cert_pem else {
        return out.push(Finding::fail(
            Area::Certificate,
            format!("Secret {secret} holds no tls.crt"),
            "mode self: the webhook writes it once a replica runs; cert-manager: kubectl describe certificate; secret: put tls.crt and tls.key in it",
        ));
    };
    let cert = match Cert::from_pem(pem) {
        Ok(cert) => cert,
        Err(e) => {
            return out.push(Finding::fail(
                Area::Certificate,
                format!("Secret {secret}: tls.crt cannot be read: {e}"),
                "mode self: delete the Secret, the webhook makes a new one; else replace tls.crt",
            ));
        }
    };
    out.push(judge(&secret, &cert, cluster.now));
}

/// The certificate's dates at `now`.
fn judge(secret: &str, cert: &Cert, now: SystemTime) -> Finding {
    let at = |t: SystemTime| humantime::format_rfc3339_seconds(t).to_string();
    if !cert.valid_at(now) {
        return Finding::fail(
            Area::Certificate,
            format!(
                "the serving certificate of Secret {secret} is not valid now (valid {} to {})",
                at(cert.not_before),
                at(cert.not_after)
            ),
            "mode self: delete the Secret and restart the webhook; cert-manager: kubectl describe certificate",
        );
    }
    let left = cert.not_after.duration_since(now).unwrap_or_default();
    if cert.due_at(now) {
        return Finding::warn(
            Area::Certificate,
            format!(
                "the serving certificate of Secret {secret} is past its renewal point: expires {} ({} left)",
                at(cert.not_after),
                days(left)
            ),
            "mode self: the webhook renews it; its /readyz and logs say why it has not (cert-manager: kubectl describe certificate)",
        );
    }
    Finding::pass(
        Area::Certificate,
        format!(
            "Secret {secret}: serving certificate valid until {} ({} left, renewed from {})",
            at(cert.not_after),
            days(left),
            at(cert.due())
        ),
    )
}

fn days(d: Duration) -> String {
    let days = d.as_secs() / 86_400;
    if days > 0 {
        format!("{days}d")
    } else {
        format!("{}h", d.as_secs() / 3600)
    }
}

/// How a `caBundle` fares against the serving certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Trust {
    /// A CA of the bundle verifies it for the host; how many CAs the bundle holds.
    Verifies(usize),
    /// No CA of the bundle does.
    Untrusted,
    /// The bundle is not PEM certificates.
    Unreadable,
}

/// Whether a CA of `bundle` verifies `leaf_pem` for `host` at `now`, as the API server would.
pub(super) fn trust(bundle: &[u8], leaf_pem: &[u8], host: &str, now: SystemTime) -> Trust {
    let Some(cas) = bundle_certs(bundle).filter(|c| !c.is_empty()) else {
        return Trust::Unreadable;
    };
    let Ok(leaf) = Cert::from_pem(leaf_pem) else {
        return Trust::Unreadable;
    };
    let Ok(server) = ServerName::try_from(host.to_string()) else {
        return Trust::Untrusted;
    };
    let leaf = CertificateDer::from(leaf.der);
    let at = UnixTime::since_unix_epoch(now.duration_since(UNIX_EPOCH).unwrap_or_default());
    let verifies = cas
        .iter()
        .filter_map(verifier)
        .any(|v: Arc<_>| v.verify_server_cert(&leaf, &[], &server, &[], at).is_ok());
    if verifies {
        Trust::Verifies(cas.len())
    } else {
        Trust::Untrusted
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::Status;

    fn cert(valid_from: SystemTime, life: Duration) -> Cert {
        Cert {
            der: Vec::new(),
            not_before: valid_from,
            not_after: valid_from + life,
            is_ca: false,
        }
    }

    #[test]
    fn dates_are_judged_by_the_renewal_point() {
        let now = SystemTime::now();
        let year = Duration::from_secs(365 * 86_400);
        let fresh = judge("ns/s", &cert(now - Duration::from_secs(86_400), year), now);
        assert_eq!(fresh.status, Status::Pass, "{fresh:?}");
        let due = judge("ns/s", &cert(now - year / 4 * 3, year), now);
        assert_eq!(due.status, Status::Warn, "{due:?}");
        assert!(due.message.contains("past its renewal point"), "{due:?}");
        let expired = judge("ns/s", &cert(now - year * 2, year), now);
        assert_eq!(expired.status, Status::Fail, "{expired:?}");
    }

    #[test]
    fn a_bundle_verifies_only_the_certificates_of_its_cas() {
        let now = SystemTime::now();
        let mint = super::super::testkit::mint;
        let (ca, leaf) = mint("miggate-webhook.miggate-system.svc");
        let (other_ca, _) = mint("x");
        let host = "miggate-webhook.miggate-system.svc";
        assert_eq!(
            trust(ca.as_bytes(), leaf.as_bytes(), host, now),
            Trust::Verifies(1)
        );
        let both = format!("{other_ca}{ca}");
        assert_eq!(
            trust(both.as_bytes(), leaf.as_bytes(), host, now),
            Trust::Verifies(2)
        );
        assert_eq!(
            trust(other_ca.as_bytes(), leaf.as_bytes(), host, now),
            Trust::Untrusted
        );
        assert_eq!(
            trust(ca.as_bytes(), leaf.as_bytes(), "elsewhere.svc", now),
            Trust::Untrusted
        );
        assert_eq!(trust(b"not pem", leaf.as_bytes(), host, now), Trust::Unreadable);
    }
}
