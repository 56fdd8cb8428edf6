//! The webhook configurations: present, each webhook calling the webhook's Service (or a
//! `url`), each `caBundle` verifying the certificate the replicas serve, and the failure
//! policies and selectors that decide what goes unchecked.

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhook, ValidatingWebhook, WebhookClientConfig};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::certificate::{Trust, trust};
use super::unreadable;
use crate::{Area, Cluster, Finding, quoted};
use miggate_wire::install as names;

/// What the checks read of one webhook, validating or mutating.
struct Hook<'a> {
    name: &'a str,
    client: &'a WebhookClientConfig,
    failure_policy: Option<&'a str>,
    object_selector: Option<&'a LabelSelector>,
}

impl<'a> From<&'a ValidatingWebhook> for Hook<'a> {
    fn from(w: &'a ValidatingWebhook) -> Self {
        Hook {
            name: &w.name,
            client: &w.client_config,
            failure_policy: w.failure_policy.as_deref(),
            object_selector: w.object_selector.as_ref(),
        }
    }
}

impl<'a> From<&'a MutatingWebhook> for Hook<'a> {
    fn from(w: &'a MutatingWebhook) -> Self {
        Hook {
            name: &w.name,
            client: &w.client_config,
            failure_policy: w.failure_policy.as_deref(),
            object_selector: w.object_selector.as_ref(),
        }
    }
}

pub(super) fn check(cluster: &Cluster, out: &mut Vec<Finding>) {
    match &cluster.validating {
        Err(e) => out.push(unreadable(
            Area::Configurations,
            "ValidatingWebhookConfiguration miggate",
            e,
        )),
        Ok(None) => out.push(Finding::fail(
            Area::Configurations,
            format!(
                "ValidatingWebhookConfiguration {} does not exist: no restore is checked",
                names::VALIDATING_CONFIGURATION
            ),
            "helm upgrade --install miggate charts/miggate (or kubectl apply -f deploy/)",
        )),
        Ok(Some(config)) => {
            let hooks: Vec<Hook<'_>> = config.webhooks.iter().flatten().map(Hook::from).collect();
            judge(
                cluster,
                &format!(
                    "ValidatingWebhookConfiguration {}",
                    names::VALIDATING_CONFIGURATION
                ),
                &hooks,
                out,
            );
        }
    }
    for (name, got) in &cluster.mutating {
        let what = format!("MutatingWebhookConfiguration {name}");
        match got {
            Err(e) => out.push(unreadable(Area::Configurations, &what, e)),
            Ok(None) => out.push(Finding::warn(
                Area::Configurations,
                format!("{what} does not exist"),
                "an install with that part turned off (steering.enabled) has none; else helm upgrade restores it",
            )),
            Ok(Some(config)) => {
                let hooks: Vec<Hook<'_>> = config.webhooks.iter().flatten().map(Hook::from).collect();
                judge(cluster, &what, &hooks, out);
            }
        }
    }
}

/// One configuration's webhooks: where they call, what trusts the serving certificate, and
/// (for the restore webhook) what its settings leave unchecked.
fn judge(cluster: &Cluster, what: &str, hooks: &[Hook<'_>], out: &mut Vec<Finding>) {
    let ns = &cluster.namespace;
    let host = format!("{}.{ns}.svc", names::WEBHOOK);
    let leaf = cluster
        .serving
        .as_ref()
        .ok()
        .and_then(Option::as_ref)
        .and_then(|s| s.cert_pem.as_deref());
    let inject = "mode self: the webhook injects its CA into every configuration once a replica runs (kubectl -n NS rollout restart deployment/miggate-webhook); cert-manager: its cainjector does; mode secret: certificates.caBundle";
    let mut problems: Vec<Finding> = Vec::new();
    let mut risks: Vec<Finding> = Vec::new();
    let mut cas = 0;
    for hook in hooks {
        let name = quoted(hook.name);
        if let Some(url) = &hook.client.url {
            risks.push(Finding::warn(
                Area::Configurations,
                format!("{what}: webhook {name} calls {} instead of the Service", quoted(url)),
                "an admin's choice (certificates.extraDnsNames names its host); else helm upgrade puts the Service back",
            ));
        } else if let Some(service) = &hook.client.service
            && (service.name != names::WEBHOOK || &service.namespace != ns)
        {
            problems.push(Finding::fail(
                Area::Configurations,
                format!(
                    "{what}: webhook {name} calls Service {}/{}, not {ns}/{}",
                    quoted(&service.namespace),
                    quoted(&service.name),
                    names::WEBHOOK
                ),
                "helm upgrade (or kubectl apply -f deploy/) puts the Service back; --namespace names where miggate runs",
            ));
        }
        match (hook.client.ca_bundle.as_ref(), leaf) {
            (None, _) => problems.push(Finding::fail(
                Area::Configurations,
                format!("{what}: webhook {name} has no caBundle: the API server cannot call it"),
                inject.replace("NS", ns),
            )),
            (Some(bundle), Some(leaf)) => match trust(&bundle.0, leaf, &host, cluster.now) {
                Trust::Verifies(n) => cas = cas.max(n),
                Trust::Untrusted => problems.push(Finding::fail(
                    Area::Configurations,
                    format!(
                        "{what}: webhook {name}'s caBundle does not verify the certificate the replicas serve (for {host}): the API server's calls fail"
                    ),
                    inject.replace("NS", ns),
                )),
                Trust::Unreadable => problems.push(Finding::fail(
                    Area::Configurations,
                    format!("{what}: webhook {name}'s caBundle is not PEM certificates"),
                    inject.replace("NS", ns),
                )),
            },
            (Some(_), None) => {}
        }
        if hook.name == super::RESTORE_WEBHOOK {
            gate_risks(what, hook, &mut risks);
        }
    }
    if problems.is_empty() {
        let trusted = match (leaf, cas) {
            (None, _) => "caBundle set (no serving certificate to verify it against)".to_string(),
            (Some(_), 1) => "caBundle verifies the serving certificate".to_string(),
            (Some(_), n) => {
                format!("caBundle verifies the serving certificate ({n} CAs: a rotation's overlap)")
            }
        };
        out.push(Finding::pass(
            Area::Configurations,
            format!(
                "{what}: {} webhooks call Service {ns}/{}; {trusted}",
                hooks.len(),
                names::WEBHOOK
            ),
        ));
    }
    out.append(&mut problems);
    out.append(&mut risks);
}

/// What the restore webhook's own settings leave unchecked: failure policy `Ignore`, an
/// objectSelector. (The binding webhook fails open by design: a replica down must not stop
/// every pod's scheduling.)
fn gate_risks(what: &str, hook: &Hook<'_>, risks: &mut Vec<Finding>) {
    let name = quoted(hook.name);
    if hook.failure_policy == Some("Ignore") {
        risks.push(Finding::warn(
            Area::Configurations,
            format!("{what}: webhook {name} has failure policy Ignore: while no replica answers, restores pass unchecked"),
            "admission.failurePolicy=Fail (the default)",
        ));
    }
    if let Some(selector) = hook.object_selector
        && *selector != LabelSelector::default()
    {
        risks.push(Finding::warn(
            Area::Configurations,
            format!(
                "{what}: webhook {name} checks only pods its objectSelector selects ({}): pod authors set their own labels",
                quoted(&serde_json::to_string(selector).unwrap_or_default())
            ),
            "admission.restorePodSelector keeps the labels on restore pods; admission.objectSelector={} checks every pod",
        ));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::checks::testkit::mint;
    use crate::{Serving, Status};
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    use serde_json::json;

    const HOST: &str = "miggate-webhook.miggate-system.svc";

    fn configured(ca: &str, restore_policy: &str) -> Cluster {
        let (_, leaf) = mint(HOST);
        let hook = |name: &str, policy: &str| {
            json!({
                "name": name, "failurePolicy": policy, "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "clientConfig": {
                    "service": {"name": "miggate-webhook", "namespace": "miggate-system"},
                    "caBundle": k8s_openapi::ByteString(ca.as_bytes().to_vec())
                }
            })
        };
        let config: ValidatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": "miggate"},
            "webhooks": [hook("restore.miggate.io", restore_policy), hook("binding.miggate.io", "Ignore")]
        }))
        .unwrap();
        Cluster {
            validating: Ok(Some(config)),
            serving: Ok(Some(Serving {
                secret: "miggate-system/miggate-webhook-certs".into(),
                cert_pem: Some(leaf.into_bytes()),
            })),
            ..Cluster::bare()
        }
    }

    #[test]
    fn a_bundle_of_another_ca_fails_with_the_fix() {
        let (other_ca, _) = mint("elsewhere");
        let mut out = Vec::new();
        check(&configured(&other_ca, "Fail"), &mut out);
        let failures: Vec<_> = out.iter().filter(|f| f.status == Status::Fail).collect();
        assert_eq!(failures.len(), 2, "{out:?}");
        assert!(
            failures[0]
                .message
                .contains("caBundle does not verify the certificate the replicas serve")
        );
        assert!(
            failures[0]
                .hint
                .as_deref()
                .unwrap()
                .contains("rollout restart deployment/miggate-webhook")
        );
    }

    #[test]
    fn only_the_restore_webhook_s_failure_policy_is_judged() {
        // The serving certificate's own CA: mint once, and use that pair's CA.
        let (ca, leaf) = mint(HOST);
        let mut cluster = configured(&ca, "Fail");
        cluster.serving = Ok(Some(Serving {
            secret: "s".into(),
            cert_pem: Some(leaf.clone().into_bytes()),
        }));
        let mut out = Vec::new();
        check(&cluster, &mut out);
        assert!(out.iter().all(|f| f.status == Status::Pass), "{out:?}");
        assert!(
            out[0]
                .message
                .contains("caBundle verifies the serving certificate"),
            "{out:?}"
        );

        let mut cluster = configured(&ca, "Ignore");
        cluster.serving = Ok(Some(Serving {
            secret: "s".into(),
            cert_pem: Some(leaf.into_bytes()),
        }));
        let mut out = Vec::new();
        check(&cluster, &mut out);
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(out[0].status, Status::Pass);
        assert_eq!(out[1].status, Status::Warn);
        assert!(
            out[1]
                .message
                .contains("webhook restore.miggate.io has failure policy Ignore"),
            "{out:?}"
        );
    }
}
