//! The replicas' watch caches, as each replica's `/readyz` reports them: listed, current, or
//! behind and by how much.

use serde_json::Value;

use crate::{Area, Cluster, Finding, quoted};

pub(super) fn check(cluster: &Cluster, out: &mut Vec<Finding>) {
    let Ok(replicas) = &cluster.replicas else {
        return;
    };
    let ns = quoted(&cluster.namespace);
    let mut read = 0;
    for replica in replicas {
        let Ok(body) = &replica.readyz else { continue };
        read += 1;
        let pod = quoted(&replica.name);
        match body.pointer("/store/kube").and_then(Value::as_array) {
            Some(caches) => out.push(judge(&pod, caches, &ns)),
            // `--store dir:PATH`: no caches, a directory read into memory.
            None => out.push(Finding::pass(
                Area::Caches,
                format!(
                    "pod {pod}: no watch caches (a file store at {})",
                    quoted(body.pointer("/store/root").and_then(Value::as_str).unwrap_or("?"))
                ),
            )),
        }
    }
    if read == 0 && !replicas.is_empty() {
        out.push(Finding::warn(
            Area::Caches,
            "no replica's caches could be read (their /readyz did not answer)",
            format!("kubectl -n {ns} get pods; kubectl get --raw /api/v1/namespaces/{ns}/pods/POD:8080/proxy/readyz"),
        ));
    }
}

/// One replica's caches: the worst of them.
fn judge(pod: &str, caches: &[Value], ns: &str) -> Finding {
    let mut unlisted = Vec::new();
    let mut failing = Vec::new();
    let mut behind = Vec::new();
    for cache in caches {
        let kind = quoted(cache.get("kind").and_then(Value::as_str).unwrap_or("?"));
        let stale = cache.get("stale_seconds").and_then(Value::as_f64).unwrap_or(0.0);
        if cache.get("synced") == Some(&Value::Bool(false)) {
            unlisted.push(kind);
        } else if cache.get("failing") == Some(&Value::Bool(true)) {
            failing.push(format!("{kind} ({stale:.0}s)"));
        } else if stale > 0.0 {
            behind.push(format!("{kind} ({stale:.0}s)"));
        }
    }
    let hint =
        format!("kubectl -n {ns} logs {pod} | grep -i watch (the API server's load, or RBAC on the kind)");
    if !failing.is_empty() {
        return Finding::fail(
            Area::Caches,
            format!(
                "pod {pod}: caches behind past --max-staleness, restores refused: {}",
                failing.join(", ")
            ),
            hint,
        );
    }
    if !unlisted.is_empty() {
        return Finding::fail(
            Area::Caches,
            format!("pod {pod}: caches not listed yet: {}", unlisted.join(", ")),
            hint,
        );
    }
    if !behind.is_empty() {
        return Finding::warn(
            Area::Caches,
            format!(
                "pod {pod}: caches behind, within --max-staleness: {}",
                behind.join(", ")
            ),
            hint,
        );
    }
    Finding::pass(
        Area::Caches,
        format!("pod {pod}: {} caches listed and current", caches.len()),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::Status;
    use rstest::rstest;
    use serde_json::json;

    #[rstest]
    #[case::current(json!({"kind": "pods", "synced": true, "failing": false, "stale_seconds": 0.0}), Status::Pass, "1 caches listed and current")]
    #[case::behind(json!({"kind": "pods", "synced": true, "failing": false, "stale_seconds": 12.4}), Status::Warn, "within --max-staleness: pods (12s)")]
    #[case::failing(json!({"kind": "pods", "synced": true, "failing": true, "stale_seconds": 90.0}), Status::Fail, "restores refused: pods (90s)")]
    #[case::unlisted(json!({"kind": "pods", "synced": false, "failing": false, "stale_seconds": 0.0}), Status::Fail, "not listed yet: pods")]
    fn a_replica_s_caches_are_judged(#[case] cache: Value, #[case] status: Status, #[case] says: &str) {
        let finding = judge("p", &[cache], "ns");
        assert_eq!(finding.status, status);
        assert!(finding.message.contains(says), "{finding:?}");
    }

    #[test]
    fn a_file_store_has_no_caches_and_says_so() {
        let cluster = Cluster {
            replicas: Ok(vec![crate::Replica {
                name: "w-1".into(),
                ready: true,
                readyz: Ok(json!({"ready": true, "store": {"root": "/store", "checkpoints": 3}})),
            }]),
            ..Cluster::bare()
        };
        let mut out = Vec::new();
        check(&cluster, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].status, Status::Pass);
        assert_eq!(
            out[0].message,
            "pod w-1: no watch caches (a file store at /store)"
        );
    }
}
