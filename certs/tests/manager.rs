//! The manager against the fake API server: a first start, replicas racing, a wiped
//! `caBundle`, garbage in the Secret, and a rotation by deletion, each seen through what the
//! API server holds and what each replica serves.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube_fake::FakeApiServer;
use miggate_certs::material::{CA_BUNDLE, CA_CRT, Cert, TLS_CRT, bundle_certs};
use miggate_certs::{CertMetrics, Config, ConfigurationRef, Handle, Pair, Wanted};
use serde_json::{Value, json};

const NS: &str = "miggate-system";
const SECRET: &str = "miggate-webhook-certs";

fn config(propagation: Duration) -> Config {
    Config {
        namespace: NS.into(),
        secret: SECRET.into(),
        configurations: vec![
            "validating/miggate".parse::<ConfigurationRef>().unwrap(),
            "mutating/miggate-steer".parse().unwrap(),
        ],
        wanted: Wanted {
            names: vec!["miggate-webhook.miggate-system.svc".into()],
            ca_lifetime: Duration::from_secs(3650 * 86_400),
            serving_lifetime: Duration::from_secs(365 * 86_400),
            overlap: Duration::from_secs(600),
        },
        propagation,
        resync: Duration::from_secs(30),
    }
}

fn webhook(name: &str, url: bool) -> Value {
    let client = if url {
        json!({"url": "https://miggate.example:8443/validate"})
    } else {
        json!({"service": {"name": "miggate-webhook", "namespace": NS, "path": "/validate", "port": 443}})
    };
    json!({"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
        "timeoutSeconds": 7, "failurePolicy": "Fail", "clientConfig": client})
}

fn configurations(fake: &FakeApiServer) {
    fake.apply(
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "miggate"},
        "webhooks": [webhook("restore.miggate.io", false), webhook("binding.miggate.io", true)]}),
    );
    fake.apply(
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "miggate-steer"}, "webhooks": [webhook("steer.miggate.io", false)]}),
    );
    // Not miggate's: never touched.
    fake.apply(
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "someone-else"}, "webhooks": [webhook("other.example.com", false)]}),
    );
}

/// What one replica serves, as its TLS server would be told.
#[derive(Default, Clone)]
struct Served(Arc<Mutex<Vec<Pair>>>);

impl Served {
    fn last(&self) -> Option<Pair> {
        self.0.lock().unwrap().last().cloned()
    }
    fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

async fn replica(fake: &FakeApiServer, propagation: Duration) -> (Handle, Served, CertMetrics) {
    let served = Served::default();
    let sink = served.clone();
    let install = move |p: &Pair| -> Result<(), miggate_certs::Error> {
        sink.0.lock().unwrap().push(p.clone());
        Ok(())
    };
    let metrics = CertMetrics::default();
    let handle = miggate_certs::start(
        fake.client().unwrap(),
        config(propagation),
        Arc::new(install),
        metrics.clone(),
    )
    .await;
    (handle, served, metrics)
}

fn secret_data(fake: &FakeApiServer, key: &str) -> Option<Vec<u8>> {
    let s = fake.get("secrets", Some(NS), SECRET)?;
    let b64 = s.get("data")?.get(key).cloned()?;
    let bytes: k8s_openapi::ByteString = serde_json::from_value(b64).ok()?;
    Some(bytes.0)
}

/// Every webhook's caBundle of a configuration, decoded.
fn bundles(fake: &FakeApiServer, plural: &str, name: &str) -> Vec<Option<Vec<u8>>> {
    let c = fake.get(plural, None, name).unwrap();
    c["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            w.pointer("/clientConfig/caBundle").map(|b| {
                serde_json::from_value::<k8s_openapi::ByteString>(b.clone())
                    .unwrap()
                    .0
            })
        })
        .collect()
}

fn all_bundles(fake: &FakeApiServer) -> Vec<Option<Vec<u8>>> {
    let mut out = bundles(fake, "validatingwebhookconfigurations", "miggate");
    out.extend(bundles(fake, "mutatingwebhookconfigurations", "miggate-steer"));
    out
}

async fn until(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn ca_of(pair: &Pair, bundle: &[u8]) -> bool {
    // The served certificate chains to a CA of the bundle.
    let leaf = Cert::from_pem(pair.cert_pem.as_bytes()).unwrap();
    bundle_certs(bundle).unwrap().iter().any(|ca| {
        let verifier = miggate_certs::material::verifier(ca).unwrap();
        use rustls::client::danger::ServerCertVerifier;
        verifier
            .verify_server_cert(
                &rustls::pki_types::CertificateDer::from(leaf.der.clone()),
                &[],
                &rustls::pki_types::ServerName::try_from("miggate-webhook.miggate-system.svc").unwrap(),
                &[],
                rustls::pki_types::UnixTime::now(),
            )
            .is_ok()
    })
}

#[tokio::test]
async fn a_first_start_makes_the_secret_injects_every_webhook_and_serves() {
    let fake = FakeApiServer::start().await.unwrap();
    configurations(&fake);
    let (handle, served, metrics) = replica(&fake, Duration::from_millis(300)).await;
    let pair = served.last().expect("something is served once start returns");
    let bundle = secret_data(&fake, CA_BUNDLE).unwrap();
    assert_eq!(
        all_bundles(&fake),
        vec![Some(bundle.clone()); 3],
        "every webhook, service and url alike"
    );
    assert!(ca_of(&pair, &bundle));
    assert_eq!(secret_data(&fake, TLS_CRT).unwrap(), pair.cert_pem.as_bytes());
    assert_eq!(
        bundles(&fake, "validatingwebhookconfigurations", "someone-else"),
        vec![None]
    );
    // The patch touched the caBundle alone.
    let v = fake
        .get("validatingwebhookconfigurations", None, "miggate")
        .unwrap();
    assert_eq!(
        v["webhooks"][1]["clientConfig"]["url"],
        "https://miggate.example:8443/validate"
    );
    assert_eq!(v["webhooks"][0]["timeoutSeconds"], 7);
    until("verified after the propagation time", || handle.status().verified).await;
    assert!(handle.status().not_after.is_some());
    assert_eq!(metrics.verified.get(), 1);
    assert!(metrics.not_after.get() > 0);
}

#[tokio::test]
async fn replicas_started_together_end_with_one_ca() {
    let fake = FakeApiServer::start().await.unwrap();
    configurations(&fake);
    let (a, b, c) = tokio::join!(
        replica(&fake, Duration::ZERO),
        replica(&fake, Duration::ZERO),
        replica(&fake, Duration::ZERO)
    );
    let ca = secret_data(&fake, CA_CRT).unwrap();
    let bundle = secret_data(&fake, CA_BUNDLE).unwrap();
    for (handle, served, _) in [&a, &b, &c] {
        until("each replica serves the Secret's certificate", || {
            served
                .last()
                .is_some_and(|p| p.cert_pem.as_bytes() == secret_data(&fake, TLS_CRT).unwrap().as_slice())
        })
        .await;
        until("verified", || handle.status().verified).await;
        assert!(ca_of(&served.last().unwrap(), &ca));
    }
    assert_eq!(all_bundles(&fake), vec![Some(bundle); 3]);
}

#[tokio::test]
async fn a_wiped_ca_bundle_comes_back() {
    let fake = FakeApiServer::start().await.unwrap();
    configurations(&fake);
    let (_handle, _served, metrics) = replica(&fake, Duration::ZERO).await;
    let bundle = secret_data(&fake, CA_BUNDLE).unwrap();
    let injected = metrics.injections.get();
    // A re-apply that carries no caBundle (as `kubectl replace` or a client-side apply would).
    configurations(&fake);
    assert_eq!(
        bundles(&fake, "mutatingwebhookconfigurations", "miggate-steer"),
        vec![None]
    );
    until("the bundle is back", || {
        all_bundles(&fake) == vec![Some(bundle.clone()); 3]
    })
    .await;
    assert!(metrics.injections.get() > injected);
}

#[tokio::test]
async fn garbage_in_the_secret_is_replaced_and_counted() {
    let fake = FakeApiServer::start().await.unwrap();
    configurations(&fake);
    let (_handle, served, metrics) = replica(&fake, Duration::ZERO).await;
    let first = served.last().unwrap();
    let mut secret = fake.get("secrets", Some(NS), SECRET).unwrap();
    secret["data"]["tls.crt"] = json!("Z2FyYmFnZQ==");
    fake.apply(secret);
    until("the serving certificate is reissued", || {
        secret_data(&fake, TLS_CRT).is_some_and(|c| c != b"garbage" && c != first.cert_pem.as_bytes())
    })
    .await;
    let text = {
        let mut r = prometheus_client::registry::Registry::default();
        metrics.register(&mut r);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &r).unwrap();
        out
    };
    assert!(
        text.contains(r#"certificate_rotations_total{what="serving",reason="unreadable"} 1"#),
        "{text}"
    );
    // Same CA: the new certificate is served at once.
    until("served", || served.last().is_some_and(|p| p != first)).await;
}

#[tokio::test]
async fn a_deleted_secret_rotates_the_ca_with_both_trusted_before_the_switch() {
    let fake = FakeApiServer::start().await.unwrap();
    configurations(&fake);
    let propagation = Duration::from_millis(500);
    let (handle, served, _) = replica(&fake, propagation).await;
    until("verified", || handle.status().verified).await;
    let old = served.last().unwrap();
    let old_ca = secret_data(&fake, CA_CRT).unwrap();
    assert!(fake.delete("secrets", Some(NS), SECRET));

    // A new CA is written, and every configuration trusts the old and the new.
    until("a new CA", || {
        secret_data(&fake, CA_CRT).is_some_and(|c| c != old_ca)
    })
    .await;
    let bundle = secret_data(&fake, CA_BUNDLE).unwrap();
    assert_eq!(bundle_certs(&bundle).unwrap().len(), 2);
    until("both CAs injected", || {
        all_bundles(&fake) == vec![Some(bundle.clone()); 3]
    })
    .await;
    // Until the switch, the old certificate keeps serving, and the API server trusts it.
    assert_eq!(served.last().unwrap(), old);
    assert!(ca_of(&old, &bundle));
    until("the switch", || served.count() == 2).await;
    let new = served.last().unwrap();
    assert!(ca_of(&new, &bundle));
    assert!(handle.status().verified, "ready throughout");
}

/// Helm 4 leaves at uninstall an object without its release's annotations: a Secret deleted
/// to rotate must come back with them.
#[tokio::test]
async fn a_deleted_secret_comes_back_with_its_labels_and_annotations() {
    let fake = FakeApiServer::start().await.unwrap();
    configurations(&fake);
    fake.apply(json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": SECRET, "namespace": NS,
            "labels": {"app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/part-of": "miggate"},
            "annotations": {"meta.helm.sh/release-name": "miggate", "meta.helm.sh/release-namespace": NS}}}));
    let (handle, _, _) = replica(&fake, Duration::from_millis(200)).await;
    until("verified", || handle.status().verified).await;
    let old_ca = secret_data(&fake, CA_CRT).unwrap();
    assert!(fake.delete("secrets", Some(NS), SECRET));
    until("a new CA", || {
        secret_data(&fake, CA_CRT).is_some_and(|c| c != old_ca)
    })
    .await;
    let meta = &fake.get("secrets", Some(NS), SECRET).unwrap()["metadata"];
    assert_eq!(meta["labels"]["app.kubernetes.io/managed-by"], "Helm");
    assert_eq!(meta["labels"]["app.kubernetes.io/part-of"], "miggate");
    assert_eq!(meta["annotations"]["meta.helm.sh/release-name"], "miggate");
    assert_eq!(meta["annotations"]["meta.helm.sh/release-namespace"], NS);
}

#[tokio::test]
async fn a_configuration_that_does_not_exist_keeps_the_replica_unready_and_says_which() {
    let fake = FakeApiServer::start().await.unwrap();
    fake.apply(
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "miggate"}, "webhooks": [webhook("restore.miggate.io", false)]}),
    );
    let (handle, served, _) = replica(&fake, Duration::ZERO).await;
    assert!(
        served.last().is_some(),
        "it serves, so the API server can call it once it trusts it"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = handle.status();
    assert!(!status.verified);
    assert_eq!(
        status.waiting.as_deref(),
        Some("mutating/miggate-steer does not exist")
    );
    // Created later (a configuration applied last, as the install does): trusted, then ready.
    configurations(&fake);
    until("verified once it exists", || handle.status().verified).await;
}

#[tokio::test]
async fn a_refused_read_is_retried_until_it_goes_through() {
    let fake = FakeApiServer::start().await.unwrap();
    configurations(&fake);
    fake.fail_next("secrets", 403);
    fake.fail_next("secrets", 403);
    let (handle, served, metrics) = replica(&fake, Duration::ZERO).await;
    assert!(served.last().is_some());
    until("verified", || handle.status().verified).await;
    let mut r = prometheus_client::registry::Registry::default();
    metrics.register(&mut r);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &r).unwrap();
    // The watch's list of the Secret may take one of the two refusals.
    assert!(
        text.contains(r#"certificate_errors_total{step="read"} 1"#)
            || text.contains(r#"certificate_errors_total{step="read"} 2"#),
        "{text}"
    );
}

#[tokio::test]
async fn a_serving_certificate_is_renewed_ahead_of_expiry_from_the_same_ca() {
    let fake = FakeApiServer::start().await.unwrap();
    configurations(&fake);
    let served = Served::default();
    let sink = served.clone();
    let install = move |p: &Pair| -> Result<(), miggate_certs::Error> {
        sink.0.lock().unwrap().push(p.clone());
        Ok(())
    };
    let mut config = config(Duration::ZERO);
    config.wanted.serving_lifetime = Duration::from_secs(4);
    let _handle = miggate_certs::start(
        fake.client().unwrap(),
        config,
        Arc::new(install),
        CertMetrics::default(),
    )
    .await;
    let ca = secret_data(&fake, CA_CRT).unwrap();
    let first = served.last().unwrap();
    // Due with two thirds gone (about 2.7 s), the loop wakes then, not at the 30 s resync.
    until("renewed", || served.count() >= 2).await;
    let renewed = served.last().unwrap();
    assert_ne!(renewed, first);
    assert_eq!(secret_data(&fake, CA_CRT).unwrap(), ca, "the same CA");
    let leaf = Cert::from_pem(renewed.cert_pem.as_bytes()).unwrap();
    assert!(leaf.valid_at(std::time::SystemTime::now()));
}
