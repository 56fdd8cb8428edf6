//! The manager against the fake API server: a first start, replicas racing, a wiped
//! `caBundle`, garbage in the Secret, a rotation by deletion, a Secret another wrote, one that
//! cannot be updated in place, and a renewal that keeps failing, each seen through what the
//! API server holds, what it was sent, and what each replica serves and reports.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube_fake::FakeApiServer;
use miggate_certs::material::{
    CA_BUNDLE, CA_CRT, Cert, PREVIOUS_CA_UNTIL, TLS_CRT, TLS_KEY, WRITTEN_BY, bundle_certs, pem_of,
};
use miggate_certs::{CertMetrics, Config, ConfigurationRef, Handle, ServingPair, Wanted};
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
struct Served(Arc<Mutex<Vec<ServingPair>>>);

impl Served {
    fn last(&self) -> Option<ServingPair> {
        self.0.lock().unwrap().last().cloned()
    }
    fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

async fn replica(fake: &FakeApiServer, propagation: Duration) -> (Handle, Served, CertMetrics) {
    replica_with(fake, config(propagation)).await
}

/// A replica started with `config`, recording what it serves.
async fn replica_with(fake: &FakeApiServer, config: Config) -> (Handle, Served, CertMetrics) {
    let served = Served::default();
    let sink = served.clone();
    let install = move |p: &ServingPair| -> Result<(), miggate_certs::Error> {
        sink.0.lock().unwrap().push(p.clone());
        Ok(())
    };
    let metrics = CertMetrics::default();
    let handle =
        miggate_certs::start(fake.client().unwrap(), config, Arc::new(install), metrics.clone()).await;
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

/// The serving pair the Secret holds, read as the manager reads it.
fn secret_pair(fake: &FakeApiServer) -> Option<ServingPair> {
    ServingPair::from_pem(&secret_data(fake, TLS_CRT)?, &secret_data(fake, TLS_KEY)?).ok()
}

fn ca_of(pair: &ServingPair, bundle: &[u8]) -> bool {
    // The served certificate chains to a CA of the bundle.
    let leaf = pair.leaf();
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
    assert_eq!(secret_pair(&fake).unwrap(), pair, "the Secret's pair, as read");
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
            served.last().is_some_and(|p| Some(p) == secret_pair(&fake))
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
        secret_pair(&fake).is_some_and(|p| p != first)
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
    let mut config = config(Duration::ZERO);
    config.wanted.serving_lifetime = Duration::from_secs(4);
    let (_handle, served, _) = replica_with(&fake, config).await;
    let ca = secret_data(&fake, CA_CRT).unwrap();
    let first = served.last().unwrap();
    // Due with two thirds gone (about 2.7 s), the loop wakes then, not at the 30 s resync.
    until("renewed", || served.count() >= 2).await;
    let renewed = served.last().unwrap();
    assert_ne!(renewed, first);
    assert_eq!(secret_data(&fake, CA_CRT).unwrap(), ca, "the same CA");
    assert!(renewed.leaf().valid_at(std::time::SystemTime::now()));
}

/// The Prometheus text of `metrics`.
fn metrics_text(metrics: &CertMetrics) -> String {
    let mut r = prometheus_client::registry::Registry::default();
    metrics.register(&mut r);
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &r).unwrap();
    out
}

/// Every `caBundle` the manager ever sent to a configuration, decoded: what the API server
/// could have loaded at any moment.
fn bundles_sent(fake: &FakeApiServer) -> Vec<Vec<u8>> {
    fake.requests()
        .iter()
        .filter(|r| r.method == "PATCH" && r.path.contains("webhookconfigurations"))
        .flat_map(|r| {
            r.body
                .clone()
                .and_then(|b| b.as_array().cloned())
                .unwrap_or_default()
        })
        .filter(|op| op["path"].as_str().is_some_and(|p| p.ends_with("/caBundle")))
        .map(|op| {
            serde_json::from_value::<k8s_openapi::ByteString>(op["value"].clone())
                .unwrap()
                .0
        })
        .collect()
}

fn secret_meta(fake: &FakeApiServer) -> Value {
    fake.get("secrets", Some(NS), SECRET).unwrap()["metadata"].clone()
}

/// A Secret as someone other than the webhook's account would make it: a CA of theirs, a
/// serving certificate of it for the webhook's name, every key in place.
fn planted(marker: Option<&str>) -> (Value, Vec<u8>) {
    let now = std::time::SystemTime::now();
    let ca = miggate_certs::mint::authority(now, Duration::from_secs(3650 * 86_400)).unwrap();
    let ca_cert = Cert::from_pem(ca.cert_pem.as_bytes()).unwrap();
    let names = vec!["miggate-webhook.miggate-system.svc".to_string()];
    let leaf = miggate_certs::mint::serving(&ca, &names, now, Duration::from_secs(86_400), ca_cert.not_after)
        .unwrap();
    let b64 = |s: &str| serde_json::to_value(k8s_openapi::ByteString(s.as_bytes().to_vec())).unwrap();
    let mut secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": SECRET, "namespace": NS, "annotations": {}},
        "data": {"ca.crt": b64(&ca.cert_pem), "ca.key": b64(&ca.key_pem), "tls.crt": b64(&leaf.cert_pem),
            "tls.key": b64(&leaf.key_pem), "ca-bundle.crt": b64(&ca.cert_pem)}});
    if let Some(m) = marker {
        secret["metadata"]["annotations"][WRITTEN_BY] = json!(m);
    }
    (secret, ca_cert.der)
}

fn trusts(bundle: &[u8], der: &[u8]) -> bool {
    bundle_certs(bundle).unwrap().iter().any(|c| c.der == der)
}

const UID: &str = "3b0e7f0c-6a51-4d0e-8f63-2f5f1f7e9c11";
const USER: &str = "system:serviceaccount:miggate-system:miggate";

/// A CA planted in the Secret before the install (with no marker, or with one anyone could
/// guess) is never adopted: the Secret is rewritten with a new CA, marked with the account's
/// UID, and no configuration is ever sent the planted CA.
#[tokio::test]
async fn a_secret_planted_before_the_start_is_replaced_and_its_ca_never_injected() {
    for marker in [None, Some(USER)] {
        let fake = FakeApiServer::start().await.unwrap();
        fake.set_user(USER, Some(UID));
        configurations(&fake);
        let (secret, planted_ca) = planted(marker);
        fake.apply(secret);
        let (handle, served, metrics) = replica(&fake, Duration::ZERO).await;
        let ca = secret_data(&fake, CA_CRT).unwrap();
        assert_ne!(Cert::from_pem(&ca).unwrap().der, planted_ca);
        assert_eq!(secret_meta(&fake)["annotations"][WRITTEN_BY], UID);
        let bundle = secret_data(&fake, CA_BUNDLE).unwrap();
        assert!(!trusts(&bundle, &planted_ca), "{marker:?}");
        until("verified", || handle.status().verified).await;
        assert!(ca_of(&served.last().unwrap(), &bundle));
        let sent = bundles_sent(&fake);
        assert!(!sent.is_empty());
        assert!(
            sent.iter().all(|b| !trusts(b, &planted_ca)),
            "the planted CA was sent"
        );
        assert_eq!(all_bundles(&fake), vec![Some(bundle); 3]);
        assert!(
            metrics_text(&metrics).contains(r#"certificate_rotations_total{what="ca",reason="foreign"} 1"#),
            "{}",
            metrics_text(&metrics)
        );
    }
}

/// An upgrade from a miggate that wrote no marker: its Secret reads as another's and is
/// replaced, but its CA, which every configuration trusts already, stays in the bundle for the
/// overlap, so the older replicas still serving a certificate of it are verified until they
/// switch. A planted CA no configuration trusts is never kept (the test above).
#[tokio::test]
async fn an_upgrade_from_an_unmarked_secret_keeps_the_trusted_ca_for_the_overlap() {
    let fake = FakeApiServer::start().await.unwrap();
    fake.set_user(USER, Some(UID));
    configurations(&fake);
    let (secret, old_ca) = planted(None);
    let old_bundle = pem_of(&old_ca).into_bytes();
    let b64 = serde_json::to_value(k8s_openapi::ByteString(old_bundle.clone())).unwrap();
    for (kind, name, count) in [
        ("ValidatingWebhookConfiguration", "miggate", 2),
        ("MutatingWebhookConfiguration", "miggate-steer", 1),
    ] {
        let plural = if kind.starts_with('V') {
            "validatingwebhookconfigurations"
        } else {
            "mutatingwebhookconfigurations"
        };
        let mut c = fake.get(plural, None, name).unwrap();
        for i in 0..count {
            c["webhooks"][i]["clientConfig"]["caBundle"] = b64.clone();
        }
        assert_eq!(c["kind"], kind);
        fake.apply(c);
    }
    fake.apply(secret);
    let (handle, _, metrics) = replica(&fake, Duration::ZERO).await;
    until("verified", || handle.status().verified).await;
    let bundle = secret_data(&fake, CA_BUNDLE).unwrap();
    let new_ca = Cert::from_pem(&secret_data(&fake, CA_CRT).unwrap()).unwrap();
    assert_ne!(new_ca.der, old_ca);
    assert!(trusts(&bundle, &new_ca.der) && trusts(&bundle, &old_ca));
    assert_eq!(bundle_certs(&bundle).unwrap().len(), 2);
    assert!(secret_meta(&fake)["annotations"][PREVIOUS_CA_UNTIL].is_string());
    assert_eq!(all_bundles(&fake), vec![Some(bundle); 3]);
    assert!(metrics_text(&metrics).contains(r#"certificate_rotations_total{what="ca",reason="foreign"} 1"#));
}

/// Two writers race to create the Secret and the other wins: the create's `409` is followed by
/// a read, and the foreign Secret is replaced by an update.
#[tokio::test]
async fn a_foreign_secret_that_wins_the_create_is_replaced() {
    let fake = FakeApiServer::start().await.unwrap();
    fake.set_user(USER, Some(UID));
    configurations(&fake);
    let (secret, planted_ca) = planted(None);
    fake.race_next_create(secret);
    let (handle, _, _) = replica(&fake, Duration::ZERO).await;
    let secret_writes: Vec<(String, String)> = fake
        .requests()
        .iter()
        .filter(|r| {
            r.path.ends_with("/secrets") && r.method == "POST"
                || r.path.ends_with(&format!("/secrets/{SECRET}")) && r.method == "PUT"
        })
        .map(|r| (r.method.clone(), r.path.clone()))
        .collect();
    assert_eq!(
        secret_writes.iter().map(|(m, _)| m.as_str()).collect::<Vec<_>>(),
        ["POST", "PUT"],
        "a create that lost, then an update of what won"
    );
    assert_eq!(secret_meta(&fake)["annotations"][WRITTEN_BY], UID);
    let bundle = secret_data(&fake, CA_BUNDLE).unwrap();
    assert!(!trusts(&bundle, &planted_ca));
    until("verified", || handle.status().verified).await;
    assert!(bundles_sent(&fake).iter().all(|b| !trusts(b, &planted_ca)));
}

/// The Secret made immutable after the start is deleted at the version read and created again
/// (same CA, its labels kept, no longer immutable), and the renewal that follows is an update.
#[tokio::test]
async fn an_immutable_secret_is_recreated_and_renewal_goes_on() {
    let fake = FakeApiServer::start().await.unwrap();
    configurations(&fake);
    let mut config = config(Duration::ZERO);
    config.wanted.serving_lifetime = Duration::from_secs(4);
    let (_handle, served, metrics) = replica_with(&fake, config).await;
    let ca = secret_data(&fake, CA_CRT).unwrap();
    let mut secret = fake.get("secrets", Some(NS), SECRET).unwrap();
    let uid = secret["metadata"]["uid"].clone();
    secret["immutable"] = json!(true);
    secret["metadata"]["labels"]["team"] = json!("gpu");
    fake.apply(secret);
    until("recreated", || {
        fake.get("secrets", Some(NS), SECRET)
            .is_some_and(|s| s["metadata"]["uid"] != uid && s.get("immutable").is_none())
    })
    .await;
    assert_eq!(secret_data(&fake, CA_CRT).unwrap(), ca, "the same CA");
    assert_eq!(secret_meta(&fake)["labels"]["team"], "gpu");
    let deletes: Vec<Value> = fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "DELETE")
        .filter_map(|r| r.body)
        .collect();
    assert_eq!(deletes.len(), 1);
    assert_eq!(deletes[0]["preconditions"]["uid"], uid, "deleted only as read");
    assert!(deletes[0]["preconditions"]["resourceVersion"].is_string());
    let text = metrics_text(&metrics);
    assert!(
        text.contains(r#"certificate_rotations_total{what="secret",reason="immutable"} 1"#),
        "{text}"
    );
    until("renewed", || served.count() >= 2).await;
    assert_eq!(secret_data(&fake, CA_CRT).unwrap(), ca);
}

/// A Secret of another type (one installed as `kubernetes.io/tls`, one given a made-up type
/// later) is made again as `Opaque` at the next round; an update the API server refuses as
/// invalid is followed by the same.
#[tokio::test]
async fn a_secret_of_another_type_or_refused_as_invalid_is_recreated() {
    let fake = FakeApiServer::start().await.unwrap();
    configurations(&fake);
    fake.apply(
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": SECRET, "namespace": NS, "labels": {"app.kubernetes.io/managed-by": "Helm"}}}),
    );
    let (handle, _, metrics) = replica(&fake, Duration::ZERO).await;
    let secret = fake.get("secrets", Some(NS), SECRET).unwrap();
    assert_eq!(secret["type"], "Opaque");
    assert_eq!(
        secret["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "Helm"
    );
    assert!(
        metrics_text(&metrics)
            .contains(r#"certificate_rotations_total{what="secret",reason="wrong-type"} 1"#)
    );
    until("verified", || handle.status().verified).await;

    // Given a made-up type later, with nothing in it to renew: made again at once, not when
    // a renewal first needs a write, and with the same CA.
    let ca = secret_data(&fake, CA_CRT).unwrap();
    let mut retyped = fake.get("secrets", Some(NS), SECRET).unwrap();
    retyped["type"] = json!("example.com/made-up");
    fake.apply(retyped);
    until("Opaque again", || {
        fake.get("secrets", Some(NS), SECRET)
            .is_some_and(|s| s["type"] == "Opaque")
    })
    .await;
    assert_eq!(secret_data(&fake, CA_CRT).unwrap(), ca);
    assert!(
        metrics_text(&metrics)
            .contains(r#"certificate_rotations_total{what="secret",reason="wrong-type"} 2"#)
    );

    // Every update refused as invalid (a rule of the cluster's own): the mended Secret is
    // written by a delete and a create.
    fake.refuse("update", "secrets", 422);
    let mut broken = fake.get("secrets", Some(NS), SECRET).unwrap();
    broken["data"]["tls.crt"] = json!("Z2FyYmFnZQ==");
    fake.apply(broken);
    until("mended", || {
        secret_data(&fake, TLS_CRT).is_some_and(|c| c != b"garbage")
    })
    .await;
    let text = metrics_text(&metrics);
    assert!(
        text.contains(r#"certificate_rotations_total{what="secret",reason="invalid"} 1"#),
        "{text}"
    );
}

/// A Secret that cannot be updated and may not be deleted (RBAC without delete): the replica
/// keeps serving, and reports not ready once its certificate is past its renewal point, in
/// words that say why; allowed to delete, it recovers.
#[tokio::test]
async fn a_renewal_that_keeps_failing_turns_the_replica_unready_past_the_due_point() {
    let fake = FakeApiServer::start().await.unwrap();
    configurations(&fake);
    let mut config = config(Duration::ZERO);
    config.wanted.serving_lifetime = Duration::from_secs(3);
    let (handle, _, metrics) = replica_with(&fake, config).await;
    until("verified", || handle.status().verified).await;
    fake.refuse("delete", "secrets", 403);
    let mut secret = fake.get("secrets", Some(NS), SECRET).unwrap();
    secret["immutable"] = json!(true);
    fake.apply(secret);
    let leaf = Cert::from_pem(&secret_data(&fake, TLS_CRT).unwrap()).unwrap();
    until("the write fails", || {
        metrics_text(&metrics).contains(r#"certificate_errors_total{step="write"}"#)
    })
    .await;
    let before = handle.status();
    if std::time::SystemTime::now() < leaf.due() {
        assert!(
            before.verified,
            "ready while the certificate is not due: {before:?}"
        );
    }
    until("not ready past the due point", || !handle.status().verified).await;
    assert!(std::time::SystemTime::now() >= leaf.due());
    let status = handle.status();
    assert!(status.renewal_overdue);
    let waiting = status.waiting.unwrap();
    assert!(
        waiting.starts_with("the serving certificate is past its renewal point (not after ")
            && waiting.contains(
                "and renewal fails: cannot write Secret miggate-system/miggate-webhook-certs: it is immutable"
            )
            && waiting.contains("forbidden")
            && waiting.contains("delete"),
        "{waiting}"
    );
    // The metrics follow at the first round past the due point.
    until("the metrics say so", || {
        let text = metrics_text(&metrics);
        text.contains("certificate_verified 0") && text.contains("certificate_renewal_overdue 1")
    })
    .await;

    // Allowed (RBAC fixed): the next round recreates the Secret and renews. Rounds back off
    // up to 30 s after failures; a write of the Secret wakes one at once.
    fake.allow("delete", "secrets");
    fake.apply(fake.get("secrets", Some(NS), SECRET).unwrap());
    until("ready again", || handle.status().verified).await;
    assert!(!handle.status().renewal_overdue);
    assert!(
        fake.get("secrets", Some(NS), SECRET)
            .unwrap()
            .get("immutable")
            .is_none()
    );
}

/// The identity is asked of the API server: a refused review is a failed round, retried; a
/// user without a UID marks the Secret with its name.
#[tokio::test]
async fn the_identity_is_learnt_from_a_self_subject_review_and_retried() {
    let fake = FakeApiServer::start().await.unwrap();
    configurations(&fake);
    fake.set_user("admin", None);
    fake.fail_next("selfsubjectreviews", 403);
    let (handle, _, metrics) = replica(&fake, Duration::ZERO).await;
    until("verified", || handle.status().verified).await;
    assert_eq!(secret_meta(&fake)["annotations"][WRITTEN_BY], "admin");
    let text = metrics_text(&metrics);
    assert!(
        text.contains(r#"certificate_errors_total{step="identity"} 1"#),
        "{text}"
    );
    let reviews = fake
        .requests()
        .iter()
        .filter(|r| r.path == "/apis/authentication.k8s.io/v1/selfsubjectreviews")
        .count();
    assert_eq!(reviews, 2, "asked until answered, then never again");
}
