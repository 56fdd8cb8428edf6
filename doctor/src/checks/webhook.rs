//! The webhook's Deployment, and each replica's readiness with the reasons its `/readyz` gives.

use serde_json::Value;

use super::unreadable;
use crate::{Area, Cluster, Finding, Replica, quoted};
use miggate_wire::install as names;

pub(super) fn check(cluster: &Cluster, out: &mut Vec<Finding>) {
    let ns = quoted(&cluster.namespace);
    let what = format!("Deployment {ns}/{}", names::WEBHOOK);
    let deployment = match &cluster.deployment {
        Err(e) => return out.push(unreadable(Area::Webhook, &what, e)),
        Ok(None) => {
            return out.push(Finding::fail(
                Area::Webhook,
                format!("{what} does not exist: no restore pod can be created while the failure policy is Fail"),
                format!(
                    "helm install miggate charts/miggate -n {ns} --create-namespace (or pass --namespace where it is installed)"
                ),
            ));
        }
        Ok(Some(d)) => d,
    };
    let desired = deployment.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let available = deployment
        .status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0);
    let describe = format!(
        "kubectl -n {ns} describe deployment {w}; kubectl -n {ns} logs deployment/{w}",
        w = names::WEBHOOK
    );
    if available == 0 {
        out.push(Finding::fail(
            Area::Webhook,
            format!("{what}: 0 of {desired} replicas available: restores are refused (or pass unchecked under failure policy Ignore)"),
            if desired == 0 {
                format!("kubectl -n {ns} scale deployment {} --replicas=2", names::WEBHOOK)
            } else {
                describe.clone()
            },
        ));
    } else if available < desired {
        out.push(Finding::warn(
            Area::Webhook,
            format!("{what}: {available} of {desired} replicas available"),
            describe.clone(),
        ));
    } else {
        out.push(Finding::pass(
            Area::Webhook,
            format!("{what}: {available} of {desired} replicas available"),
        ));
    }
    let replicas = match &cluster.replicas {
        Err(e) => return out.push(unreadable(Area::Webhook, &format!("the pods of {what}"), e)),
        Ok(r) => r,
    };
    let any_ready = replicas.iter().any(|r| r.ready);
    for replica in replicas {
        out.push(judge(replica, any_ready, &ns));
    }
}

/// One replica: ready, or why not (its `/readyz` reasons).
fn judge(replica: &Replica, any_ready: bool, ns: &str) -> Finding {
    let name = quoted(&replica.name);
    if replica.ready {
        return Finding::pass(Area::Webhook, format!("pod {name} ready"));
    }
    let why = match &replica.readyz {
        Ok(body) => not_ready_reasons(body).join("; "),
        Err(e) => format!("/readyz unreadable: {e}"),
    };
    let message = format!("pod {name} not ready: {why}");
    let hint = format!("kubectl -n {ns} logs {name}; kubectl -n {ns} describe pod {name}");
    if any_ready {
        Finding::warn(Area::Webhook, message, hint)
    } else {
        Finding::fail(Area::Webhook, message, hint)
    }
}

/// What a `/readyz` body says is not ready: the certificate's state, caches not listed or
/// behind, or just `ready: false` when it says nothing more.
pub(super) fn not_ready_reasons(body: &Value) -> Vec<String> {
    let mut why = Vec::new();
    if let Some(certs) = body.get("certificates") {
        if certs.get("verified") == Some(&Value::Bool(false)) {
            let waiting = certs
                .get("waiting")
                .and_then(Value::as_str)
                .unwrap_or("not verified");
            why.push(format!("certificate: {}", quoted(waiting)));
        }
        if certs.get("renewal_overdue") == Some(&Value::Bool(true)) {
            why.push("certificate renewal overdue".to_string());
        }
    }
    for cache in body
        .pointer("/store/kube")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let kind = quoted(cache.get("kind").and_then(Value::as_str).unwrap_or("?"));
        if cache.get("synced") == Some(&Value::Bool(false)) {
            why.push(format!("cache {kind} has not finished its first list"));
        } else if cache.get("failing") == Some(&Value::Bool(true)) {
            let stale = cache.get("stale_seconds").and_then(Value::as_f64).unwrap_or(0.0);
            why.push(format!("cache {kind} behind for {stale:.0}s"));
        }
    }
    if why.is_empty() {
        why.push("its /readyz says not ready".to_string());
    }
    why
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::Status;
    use serde_json::json;

    #[test]
    fn a_replica_not_ready_says_why_from_its_readyz() {
        let replica = Replica {
            name: "miggate-webhook-1".into(),
            ready: false,
            readyz: Ok(json!({
                "ready": false,
                "store": {"kube": [
                    {"kind": "gpunodes", "synced": true, "failing": true, "stale_seconds": 75.2},
                    {"kind": "pods", "synced": false, "failing": false}
                ]},
                "certificates": {"verified": false, "renewal_overdue": true, "waiting": "secret: delete refused"}
            })),
        };
        let alone = judge(&replica, false, "miggate-system");
        assert_eq!(alone.status, Status::Fail);
        insta::assert_snapshot!(alone.message, @"pod miggate-webhook-1 not ready: certificate: secret: delete refused; certificate renewal overdue; cache gpunodes behind for 75s; cache pods has not finished its first list");
        assert_eq!(judge(&replica, true, "miggate-system").status, Status::Warn);
    }
}
