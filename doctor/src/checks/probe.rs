//! The proof that the API server calls the webhook: a server-side dry run of a restore pod of
//! a checkpoint that does not exist must come back refused by `restore.miggate.io` for that.

use super::RESTORE_WEBHOOK;
use crate::install::PROBE_CHECKPOINT;
use crate::selector::matches;
use crate::{Area, Cluster, Finding, Probe, quoted};

pub(super) fn check(cluster: &Cluster, out: &mut Vec<Finding>) {
    let ns = quoted(&cluster.namespace);
    let probe_ns = cluster.probe_namespace.as_deref().map(quoted).unwrap_or_default();
    let finding = match &cluster.probe {
        Probe::NotRun(why) => Finding::warn(
            Area::Probe,
            format!(
                "the API server's call to the webhook was not tried: {}",
                quoted(why)
            ),
            "run miggate doctor without --no-probe, as a user who may create pods (a dry run stores nothing)",
        ),
        Probe::Refused(message) => judge_refusal(message, &ns, &probe_ns),
        Probe::Allowed if exempt(cluster) => Finding::warn(
            Area::Probe,
            format!(
                "a dry-run restore in namespace {probe_ns} was admitted: that namespace is exempt from the gate"
            ),
            "miggate doctor --probe-namespace NS, naming a namespace tenants restore in",
        ),
        Probe::Allowed => Finding::fail(
            Area::Probe,
            format!(
                "a dry-run restore of a checkpoint that does not exist was admitted in namespace {probe_ns}: \
                 the webhook was not asked, or let it pass"
            ),
            "check that the webhook is up (failure policy Ignore lets restores through while it is not) and that \
             admission.exemptNamespaces and the selectors leave this namespace in",
        ),
    };
    out.push(finding);
}

/// Whether the probe's namespace is one the restore webhook's namespaceSelector leaves out.
fn exempt(cluster: &Cluster) -> bool {
    let (Some(ns), Ok(Some(config)), Ok(namespaces)) = (
        cluster.probe_namespace.as_deref(),
        &cluster.validating,
        &cluster.namespaces,
    ) else {
        return false;
    };
    let Some(hook) = super::restore_webhook(config) else {
        return false;
    };
    namespaces
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(ns))
        .is_some_and(|n| {
            let labels = n.metadata.labels.clone().unwrap_or_default();
            !matches(hook.namespace_selector.as_ref(), &labels)
        })
}

/// What the API server's refusal of the probe says about the path to the webhook.
fn judge_refusal(message: &str, ns: &str, probe_ns: &str) -> Finding {
    let said = quoted(message);
    let denied = format!("admission webhook \"{RESTORE_WEBHOOK}\" denied the request");
    if message.contains(&denied) && message.contains(PROBE_CHECKPOINT) {
        return Finding::pass(
            Area::Probe,
            format!(
                "the API server called {RESTORE_WEBHOOK}, which refused a dry-run restore of a missing checkpoint in namespace {probe_ns}"
            ),
        );
    }
    if message.contains(&denied) {
        return Finding::warn(
            Area::Probe,
            format!("{RESTORE_WEBHOOK} refused the probe, but not for its missing checkpoint: {said}"),
            "the webhook answers; its message says what else it refused",
        );
    }
    if message.contains(&format!("failed calling webhook \"{RESTORE_WEBHOOK}\"")) {
        let hint = if ["x509", "certificate", "tls:"]
            .iter()
            .any(|w| message.contains(w))
        {
            format!(
                "the caBundle does not verify the served certificate: mode self, kubectl -n {ns} rollout restart deployment/miggate-webhook re-injects it; cert-manager, check its cainjector"
            )
        } else {
            format!(
                "no replica answered: kubectl -n {ns} get pods,endpointslices; kubectl -n {ns} logs deployment/miggate-webhook"
            )
        };
        return Finding::fail(
            Area::Probe,
            format!("the API server cannot call {RESTORE_WEBHOOK}: {said}"),
            hint,
        );
    }
    Finding::warn(
        Area::Probe,
        format!("the probe was refused before {RESTORE_WEBHOOK} was asked: {said}"),
        "miggate doctor --probe-namespace NS, naming a namespace where a restricted pod may be created",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Status;
    use rstest::rstest;

    #[rstest]
    #[case::refused_as_expected(
        "admission webhook \"restore.miggate.io\" denied the request: miggate: checkpoint default/miggate-doctor-probe-no-such-checkpoint named by annotation miggate.io/restore-from does not exist",
        Status::Pass,
        "the API server called restore.miggate.io"
    )]
    #[case::wrong_ca(
        "Internal error occurred: failed calling webhook \"restore.miggate.io\": failed to call webhook: Post \"https://miggate-webhook.miggate-system.svc:443/validate?timeout=5s\": tls: failed to verify certificate: x509: certificate signed by unknown authority",
        Status::Fail,
        "caBundle does not verify"
    )]
    #[case::no_endpoints(
        "Internal error occurred: failed calling webhook \"restore.miggate.io\": failed to call webhook: Post \"https://miggate-webhook.miggate-system.svc:443/validate?timeout=5s\": no endpoints available for service \"miggate-webhook\"",
        Status::Fail,
        "no replica answered"
    )]
    #[case::pod_security(
        "pods \"miggate-doctor-probe\" is forbidden: violates PodSecurity \"restricted:latest\"",
        Status::Warn,
        "--probe-namespace"
    )]
    fn the_probe_s_refusal_says_what_the_path_does(
        #[case] message: &str,
        #[case] status: Status,
        #[case] says: &str,
    ) {
        let finding = judge_refusal(message, "miggate-system", "default");
        assert_eq!(finding.status, status, "{finding:?}");
        let text = format!("{} {:?}", finding.message, finding.hint);
        assert!(text.contains(says), "{says:?} not in {text}");
    }
}
