//! The admission decision: an `AdmissionRequest` and a store snapshot in, a response out.
//! Pure and synchronous: no I/O, no clock, so every answer can be tested from recorded reviews.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use k8s_openapi::api::core::v1::PodSpec;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use kube::core::response::Status;
use miggate_compat::escape::{escape, escape_within};
use miggate_compat::{CheckName, Mode, Options, Outcome, Target, evaluate_target, parse_skip, reduce_digest};
use serde::Deserialize;

use crate::pod::{self, Choice};
use crate::store::Snapshot;

/// The annotation naming the `GpuCheckpoint` a pod restores (same namespace).
pub const RESTORE_FROM: &str = "miggate.io/restore-from";
/// The annotation waiving checks: `all`, or check names separated by commas.
pub const SKIP_CHECKS: &str = "miggate.io/skip-checks";
/// At most this many warnings go back to the client: the apiserver may truncate a long list.
pub const MAX_WARNINGS: usize = 12;
/// Each warning is cut to this many bytes, the length Kubernetes keeps.
pub const MAX_WARNING_BYTES: usize = 256;
/// A refusal message is cut to this many bytes.
pub const MAX_MESSAGE_BYTES: usize = 8 * 1024;

/// How a request was answered, for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Not a restore pod's creation: allowed without a look.
    Ignored,
    /// A restore pod, compatible, nothing unknown.
    Allowed,
    /// A restore pod, compatible, with warnings (unknown facts, waived checks).
    Warned,
    /// A restore pod refused.
    Refused,
}

impl Verdict {
    /// The label value used in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ignored => "ignored",
            Verdict::Allowed => "allowed",
            Verdict::Warned => "warned",
            Verdict::Refused => "refused",
        }
    }
}

/// An answer with what it rests on.
#[derive(Debug)]
pub struct Decision {
    /// The response to send (uid echoed).
    pub response: AdmissionResponse,
    /// How it was answered.
    pub verdict: Verdict,
    /// What refused: check names, or a reason such as `checkpoint-not-found`.
    pub refused_by: Vec<&'static str>,
}

#[derive(Deserialize)]
struct PodObject {
    #[serde(default)]
    spec: Option<PodSpec>,
}

/// Decides one admission request against a snapshot of the store.
pub fn decide(req: &AdmissionRequest<DynamicObject>, store: &Snapshot) -> Decision {
    let base = AdmissionResponse::from(req);
    let is_pod = req.kind.group.is_empty() && req.kind.kind == "Pod" && req.sub_resource.is_none();
    if !is_pod || req.operation != Operation::Create {
        return ignored(base);
    }
    let Some(obj) = req.object.as_ref() else {
        return ignored(base);
    };
    let annotations = obj.metadata.annotations.as_ref();
    let Some(from) = annotations.and_then(|a| a.get(RESTORE_FROM)) else {
        return ignored(base);
    };
    let pod_name = req_pod_name(req, obj);
    let from = from.trim();
    if from.is_empty() {
        return refuse(
            base,
            format!("miggate: pod {pod_name}: annotation {RESTORE_FROM} is empty; name a GpuCheckpoint"),
            vec!["restore-from-invalid"],
            Vec::new(),
        );
    }
    let Some(namespace) = req.namespace.as_deref().or(obj.metadata.namespace.as_deref()) else {
        return refuse(
            base,
            "miggate: the request names no namespace to find the checkpoint in".into(),
            vec!["no-namespace"],
            Vec::new(),
        );
    };
    let checkpoint_ref = format!("{}/{}", escape_within(namespace, 256), escape_within(from, 256));
    let mut skip = BTreeSet::new();
    if let Some(list) = annotations.and_then(|a| a.get(SKIP_CHECKS)) {
        match parse_skip(list) {
            Ok(s) => skip = s,
            Err(e) => {
                return refuse(
                    base,
                    format!(
                        "miggate: annotation {SKIP_CHECKS} waives nothing: {}",
                        escape(&e.to_string())
                    ),
                    vec!["skip-checks-invalid"],
                    Vec::new(),
                );
            }
        }
    }
    let Some(checkpoint) = store.checkpoint(namespace, from) else {
        return refuse(
            base,
            format!(
                "miggate: checkpoint {checkpoint_ref} named by annotation {RESTORE_FROM} does not exist (no GpuCheckpoint of that name in namespace {})",
                escape_within(namespace, 256)
            ),
            vec!["checkpoint-not-found"],
            Vec::new(),
        );
    };
    let spec = match PodObject::deserialize(&obj.data) {
        Ok(PodObject { spec: Some(spec) }) => spec,
        Ok(PodObject { spec: None }) => PodSpec::default(),
        Err(e) => {
            return refuse(
                base,
                format!(
                    "miggate: pod {pod_name}: spec cannot be read: {}",
                    escape(&e.to_string())
                ),
                vec!["pod-unreadable"],
                Vec::new(),
            );
        }
    };

    let mut warnings = Vec::new();
    let pod_facts = match pod::choose(&spec, checkpoint.container_name.as_deref()) {
        Choice::Container(c) => pod::facts(c),
        Choice::Missing(name) => {
            let names: Vec<String> = spec
                .containers
                .iter()
                .map(|c| escape_within(&c.name, 128).into_owned())
                .collect();
            return refuse(
                base,
                format!(
                    "miggate: checkpoint {checkpoint_ref} was taken from container `{}`, which pod {pod_name} does not have (containers: {})",
                    escape_within(name, 256),
                    names.join(", ")
                ),
                vec!["container-not-found"],
                Vec::new(),
            );
        }
        Choice::Unknown(n) => {
            warnings.push(format!(
                "miggate: the restore container is unknown: checkpoint {checkpoint_ref} names none and {n} containers ask for GPUs; pod facts are not checked here, the node agent decides"
            ));
            miggate_compat::Pod::default()
        }
    };
    let pod_known = pod_facts != miggate_compat::Pod::default();

    // The spec pins an image by digest at best; the checkpoint holds the runtime's image id,
    // which may be an index digest of the same image. A difference is not proof of another
    // image, so it is waived here and left to the node agent, which sees the runtime's id.
    let source_digest = checkpoint
        .manifest
        .pod
        .as_ref()
        .and_then(|p| p.image_digest.as_deref())
        .and_then(reduce_digest);
    let target_digest = pod_facts.image_digest.as_deref().and_then(reduce_digest);
    let mut digest_waived = false;
    if let (Some(s), Some(t)) = (&source_digest, &target_digest)
        && s != t
        && !skip.contains(&CheckName::IMAGE_DIGEST)
    {
        digest_waived = true;
        skip.insert(CheckName::IMAGE_DIGEST);
        warnings.push(format!(
            "miggate: image-digest unknown: pod pins {t}, checkpoint has {s}; may be an index digest, the node agent decides"
        ));
    }

    let node_name = spec.node_name.as_deref().filter(|n| !n.is_empty());
    let node = match node_name {
        Some(n) => match store.node(n) {
            Some(node) => Some(node),
            None => {
                return refuse(
                    base,
                    format!(
                        "miggate: pod {pod_name} is bound to node {}, which has no GPU inventory (GpuNode); cannot check checkpoint {checkpoint_ref} against it",
                        escape_within(n, 256)
                    ),
                    vec!["node-not-found"],
                    warnings,
                );
            }
        },
        None => None,
    };
    let target = match node {
        Some(node) => Target::pod_on_node(&pod_facts, &node.manifest),
        None => Target::pod(&pod_facts),
    };
    let options = Options {
        skip,
        ..Options::mode(Mode::Offer)
    };
    let report = evaluate_target(&checkpoint.manifest, target, &options);

    let waived: Vec<&str> = annotations
        .and_then(|a| a.get(SKIP_CHECKS))
        .map(|_| {
            report
                .results
                .iter()
                .filter(|r| {
                    r.outcome == Outcome::Skipped && !(digest_waived && r.check == CheckName::IMAGE_DIGEST)
                })
                .map(|r| r.check.as_str())
                .collect()
        })
        .unwrap_or_default();
    if !waived.is_empty() {
        warnings.push(format!("miggate: waived by {SKIP_CHECKS}: {}", waived.join(", ")));
    }
    for r in report.results.iter().filter(|r| r.outcome == Outcome::Unknown) {
        if !pod_known && r.check.scope() == miggate_compat::Scope::Pod {
            continue;
        }
        if r.check == CheckName::IMAGE_DIGEST && target_digest.is_none() && source_digest.is_some() {
            warnings.push(
                "miggate: image-digest unknown: the pod names its image without an @sha256: digest; the node agent compares the runtime's image id".into(),
            );
            continue;
        }
        warnings.push(format!(
            "miggate: {} unknown: {} (source {}, target {})",
            r.check, r.message, r.source, r.target
        ));
    }
    for w in &report.warnings {
        warnings.push(format!("miggate: {w}"));
    }

    if report.compatible {
        let verdict = if warnings.is_empty() {
            Verdict::Allowed
        } else {
            Verdict::Warned
        };
        let mut response = base;
        response.warnings = bounded(warnings);
        Decision {
            response,
            verdict,
            refused_by: Vec::new(),
        }
    } else {
        let refused_by = report.refusals().map(|r| r.check.as_str()).collect();
        let place = match node_name {
            Some(n) => format!("on node {}", escape_within(n, 256)),
            None => "in this pod".to_string(),
        };
        refuse(
            base,
            format!(
                "miggate: checkpoint {checkpoint_ref} cannot be restored {place}: {}",
                report.reason
            ),
            refused_by,
            warnings,
        )
    }
}

/// `namespace/name` of the pod, or its generateName, for messages.
fn req_pod_name(req: &AdmissionRequest<DynamicObject>, obj: &DynamicObject) -> String {
    let ns = req
        .namespace
        .as_deref()
        .or(obj.metadata.namespace.as_deref())
        .unwrap_or("");
    let name = obj
        .metadata
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .or((!req.name.is_empty()).then_some(req.name.as_str()))
        .map(|n| n.to_string())
        .or_else(|| obj.metadata.generate_name.as_ref().map(|g| format!("{g}*")))
        .unwrap_or_else(|| "(unnamed)".to_string());
    escape_within(&format!("{ns}/{name}"), 512).into_owned()
}

fn ignored(response: AdmissionResponse) -> Decision {
    Decision {
        response,
        verdict: Verdict::Ignored,
        refused_by: Vec::new(),
    }
}

fn refuse(
    base: AdmissionResponse,
    message: String,
    refused_by: Vec<&'static str>,
    warnings: Vec<String>,
) -> Decision {
    let mut response = base;
    response.allowed = false;
    response.result =
        Status::failure(&escape_within(&message, MAX_MESSAGE_BYTES), "Forbidden").with_code(403);
    response.warnings = bounded(warnings);
    Decision {
        response,
        verdict: Verdict::Refused,
        refused_by,
    }
}

/// At most [`MAX_WARNINGS`] warnings of at most [`MAX_WARNING_BYTES`] each, escaped; the last
/// says how many were left out.
fn bounded(warnings: Vec<String>) -> Option<Vec<String>> {
    if warnings.is_empty() {
        return None;
    }
    let total = warnings.len();
    let keep = if total > MAX_WARNINGS {
        MAX_WARNINGS - 1
    } else {
        total
    };
    let mut out: Vec<String> = warnings
        .iter()
        .take(keep)
        .map(|w| escape_within(w, MAX_WARNING_BYTES).into_owned())
        .collect();
    if total > keep {
        let mut more = String::new();
        let _ = write!(more, "miggate: {} more warnings not shown", total - keep);
        out.push(more);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_bounded() {
        let many: Vec<String> = (0..30).map(|i| format!("w{i} {}", "x".repeat(400))).collect();
        let out = bounded(many).unwrap_or_default();
        assert_eq!(out.len(), MAX_WARNINGS);
        assert!(out.iter().all(|w| w.len() <= MAX_WARNING_BYTES + 40));
        assert_eq!(out[MAX_WARNINGS - 1], "miggate: 19 more warnings not shown");
        assert!(bounded(Vec::new()).is_none());
    }
}
