//! The CRDs: present, established, serving and storing the versions this binary reads, with
//! this binary's schema.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use super::unreadable;
use crate::{Area, Cluster, Finding};

const APPLY: &str = "apply this binary's CRDs: miggate crds | kubectl apply --server-side -f - (helm upgrade does not update CRDs)";

pub(super) fn check(cluster: &Cluster, out: &mut Vec<Finding>) {
    for (expected, live) in &cluster.crds {
        let name = expected.metadata.name.as_deref().unwrap_or_default();
        match live {
            Err(e) => out.push(unreadable(Area::Crds, &format!("CRD {name}"), e)),
            Ok(None) => out.push(Finding::fail(
                Area::Crds,
                format!("CRD {name} is not installed"),
                APPLY,
            )),
            Ok(Some(live)) => out.push(judge(name, expected, live)),
        }
    }
}

/// One CRD against the binary's.
fn judge(name: &str, expected: &CustomResourceDefinition, live: &CustomResourceDefinition) -> Finding {
    let established = live
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Established" && c.status == "True"));
    if !established {
        return Finding::fail(
            Area::Crds,
            format!("CRD {name} is not established"),
            format!("kubectl get crd {name} -o yaml (its status.conditions say why)"),
        );
    }
    let storage = |crd: &CustomResourceDefinition| {
        crd.spec
            .versions
            .iter()
            .find(|v| v.storage)
            .map(|v| v.name.clone())
            .unwrap_or_default()
    };
    for version in expected.spec.versions.iter().filter(|v| v.served) {
        let served = live.spec.versions.iter().find(|v| v.name == version.name);
        match served {
            Some(v) if v.served => {
                if v.schema != version.schema {
                    return Finding::warn(
                        Area::Crds,
                        format!(
                            "CRD {name} {}: its schema differs from this binary's",
                            version.name
                        ),
                        APPLY,
                    );
                }
            }
            _ => {
                return Finding::fail(
                    Area::Crds,
                    format!(
                        "CRD {name} does not serve {}, which this binary reads",
                        version.name
                    ),
                    APPLY,
                );
            }
        }
    }
    let (want, have) = (storage(expected), storage(live));
    if want != have {
        return Finding::warn(
            Area::Crds,
            format!("CRD {name} stores {have}; this binary stores {want}"),
            APPLY,
        );
    }
    let known: Vec<&str> = expected.spec.versions.iter().map(|v| v.name.as_str()).collect();
    let stored = live
        .status
        .as_ref()
        .and_then(|s| s.stored_versions.clone())
        .unwrap_or_default();
    if let Some(old) = stored.iter().find(|v| !known.contains(&v.as_str())) {
        return Finding::warn(
            Area::Crds,
            format!(
                "CRD {name}: objects may still be stored at {}, which this binary does not read",
                crate::quoted(old)
            ),
            "migrate the stored objects (read and write each back), then drop the version from status.storedVersions",
        );
    }
    Finding::pass(
        Area::Crds,
        format!("CRD {name} established, serving and storing {want}"),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::Status;
    use rstest::rstest;

    fn established(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
        crd.status = Some(
            serde_json::from_value(serde_json::json!({
                "conditions": [{"type": "Established", "status": "True"}],
                "storedVersions": ["v1alpha1"]
            }))
            .unwrap(),
        );
        crd
    }

    #[rstest]
    #[case::same(|c: &mut CustomResourceDefinition| { let _ = c; }, Status::Pass, "established, serving and storing v1alpha1")]
    #[case::not_served(|c: &mut CustomResourceDefinition| c.spec.versions[0].served = false, Status::Fail, "does not serve v1alpha1")]
    #[case::schema(|c: &mut CustomResourceDefinition| c.spec.versions[0].schema = None, Status::Warn, "schema differs")]
    #[case::not_established(|c: &mut CustomResourceDefinition| c.status = None, Status::Fail, "is not established")]
    #[case::old_stored(|c: &mut CustomResourceDefinition| {
        c.status.as_mut().unwrap().stored_versions = Some(vec!["v1alpha0".into(), "v1alpha1".into()]);
    }, Status::Warn, "stored at v1alpha0")]
    fn a_crd_is_judged_against_the_binary_s(
        #[case] change: fn(&mut CustomResourceDefinition),
        #[case] status: Status,
        #[case] says: &str,
    ) {
        let expected = miggate_crds::crds().remove(0);
        let mut live = established(expected.clone());
        change(&mut live);
        let name = expected.metadata.name.clone().unwrap();
        let finding = judge(&name, &expected, &live);
        assert_eq!(finding.status, status, "{finding:?}");
        assert!(finding.message.contains(says), "{says:?} not in {finding:?}");
    }
}
