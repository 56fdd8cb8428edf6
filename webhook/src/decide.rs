//! The admission decision: an `AdmissionRequest` and a store's lookups in, a response out.
//! Pure and synchronous: no I/O, no clock, so every answer can be tested from recorded reviews.
//!
//! Two requests are decided: a restore pod's CREATE (pod checks, and node checks when the pod
//! names its node) and a `pods/binding` CREATE of a restore pod (node checks in offer mode
//! against the chosen node's inventory). Every decision that reads a node inventory names its
//! source: in the refusal message, in a warning when the source is not a `GpuNode`, in the
//! `inventory-source` audit annotation and in the log.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use kube::core::response::Status;
use miggate_compat::escape::{escape, escape_within};
use miggate_compat::{CheckName, Mode, Options, Outcome, Target, evaluate_target, parse_skip, reduce_digest};
use serde::Deserialize;

use crate::lookup::{Lookup, NoInventory, NodeInventory, Source};
use crate::pod::{self, Choice};

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
/// The audit annotation naming the inventory source a decision read.
pub const INVENTORY_SOURCE: &str = "inventory-source";

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
    /// The node inventory's source, when the decision read one.
    pub inventory_source: Option<Source>,
}

/// The checks a pod's `miggate.io/skip-checks` annotation waives, read strictly (a typo never
/// looks like a waiver); the error says why it waives nothing, for the refusal.
fn waived(annotation: Option<&str>) -> Result<BTreeSet<CheckName>, String> {
    annotation.map_or(Ok(BTreeSet::new()), |list| {
        parse_skip(list).map_err(|e| {
            format!(
                "annotation {SKIP_CHECKS} waives nothing: {}",
                escape(&e.to_string())
            )
        })
    })
}

/// Decides one admission request against a store's lookups.
pub fn decide(req: &AdmissionRequest<DynamicObject>, store: &(impl Lookup + ?Sized)) -> Decision {
    let base = AdmissionResponse::from(req);
    if req.operation != Operation::Create {
        return ignored(base);
    }
    let core = req.resource.group.is_empty();
    let pods_binding =
        core && req.resource.resource == "pods" && req.sub_resource.as_deref() == Some("binding");
    // The legacy `bindings` resource places a pod just as `pods/binding` does.
    let legacy_binding = core && req.resource.resource == "bindings" && req.sub_resource.is_none();
    if pods_binding || legacy_binding {
        return decide_binding(req, base, store);
    }
    let is_pod = req.kind.group.is_empty() && req.kind.kind == "Pod" && req.sub_resource.is_none();
    if !is_pod {
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
    if !store.synced() {
        return refuse(
            base,
            format!(
                "miggate: cannot check checkpoint {checkpoint_ref} yet: the webhook's caches have not finished their first list; retry shortly"
            ),
            vec!["store-not-synced"],
            Vec::new(),
        );
    }
    let mut skip = match waived(annotations.and_then(|a| a.get(SKIP_CHECKS)).map(String::as_str)) {
        Ok(skip) => skip,
        Err(why) => {
            return refuse(
                base,
                format!("miggate: {why}"),
                vec!["skip-checks-invalid"],
                Vec::new(),
            );
        }
    };
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
    let spec = match pod::spec_of(obj) {
        Ok(spec) => spec.unwrap_or_default(),
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
        Some(n) => match store.inventory(n) {
            Ok(node) => Some(node),
            Err(missing) => {
                passed_over_warnings(n, &missing.passed_over, &mut warnings);
                return refuse(
                    base,
                    format!(
                        "miggate: pod {pod_name} is bound to node {}, which has {}; cannot check checkpoint {checkpoint_ref} against it",
                        escape_within(n, 256),
                        no_inventory(&missing)
                    ),
                    vec!["node-not-found"],
                    warnings,
                );
            }
        },
        None => None,
    };
    if let (Some(n), Some(inv)) = (node_name, node.as_ref()) {
        inventory_warnings(n, inv, &mut warnings);
    }
    let judged = node.as_ref().map(|n| n.manifest_for(&checkpoint.manifest));
    let target = match (node.as_ref(), judged.as_deref()) {
        (Some(node), Some(manifest)) => {
            Target::pod_on_node(&pod_facts, manifest).with_slices_listed(node.slices_listed)
        }
        _ => Target::pod(&pod_facts),
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

    let source = node.as_ref().map(|n| n.source);
    if report.compatible {
        allow(base, warnings, source)
    } else {
        let refused_by = report.refusals().map(|r| r.check.as_str()).collect();
        let place = match (node_name, source) {
            (Some(n), Some(src)) => format!(
                "on node {} (inventory from {}{})",
                escape_within(n, 256),
                src.as_str(),
                node.as_ref().map(fallback).unwrap_or_default()
            ),
            _ => "in this pod".to_string(),
        };
        let mut decision = refuse(
            base,
            format!(
                "miggate: checkpoint {checkpoint_ref} cannot be restored {place}: {}",
                report.reason
            ),
            refused_by,
            warnings,
        );
        with_source(&mut decision, source);
        decision
    }
}

/// The sources a missing inventory was looked for in, for messages.
const NO_INVENTORY: &str = "no GpuNode, DRA ResourceSlices or GFD labels";

/// What a node without an inventory has, for messages: nothing at all, or sources present
/// but unreadable, with why (an operator told "no GpuNode" while one exists would look in
/// the wrong place).
fn no_inventory(missing: &NoInventory) -> String {
    if missing.passed_over.is_empty() {
        format!("no GPU inventory ({NO_INVENTORY})")
    } else {
        format!("no usable GPU inventory: {}", missing.passed_over.join("; "))
    }
}

/// The tail of "inventory from X" when better sources were passed over for X.
/// Under DynamicMIG the refusal says so too: the node's slices are what it could make.
fn fallback(inventory: &NodeInventory) -> String {
    let on_demand = if inventory.supply.is_some() {
        ", DynamicMIG: partitions on demand"
    } else {
        ""
    };
    if inventory.passed_over.is_empty() {
        on_demand.to_string()
    } else {
        format!("{on_demand}, passed over: {}", inventory.passed_over.join("; "))
    }
}

/// One warning per source passed over (each is cut to a warning's length on its own).
fn passed_over_warnings(node: &str, passed_over: &[String], warnings: &mut Vec<String>) {
    for why in passed_over {
        warnings.push(format!("miggate: node {}: {why}", escape_within(node, 256)));
    }
}

#[derive(Deserialize)]
struct BindingObject {
    #[serde(default)]
    target: Option<BindingTarget>,
}

#[derive(Deserialize)]
struct BindingTarget {
    #[serde(default)]
    name: String,
}

/// A `pods/binding` CREATE: the scheduler (or a client) chose a node. A Binding carries no
/// annotations, so the store says whether the pod restores a checkpoint; only then do the
/// node checks run, in offer mode, against the node's inventory. Everything else is allowed
/// at the cost of one map lookup: every binding in the cluster passes through here.
fn decide_binding(
    req: &AdmissionRequest<DynamicObject>,
    base: AdmissionResponse,
    store: &(impl Lookup + ?Sized),
) -> Decision {
    let Some(namespace) = req.namespace.as_deref() else {
        return ignored(base);
    };
    let obj = req.object.as_ref();
    let pod = Some(req.name.as_str())
        .filter(|n| !n.is_empty())
        .or_else(|| obj.and_then(|o| o.metadata.name.as_deref()));
    let Some(pod) = pod else {
        return ignored(base);
    };
    if !store.synced() {
        return allow(
            base,
            vec![
                "miggate: binding not checked: the webhook's caches have not finished their first list"
                    .into(),
            ],
            None,
        );
    }
    let Some(restore) = store.restore_pod(namespace, pod) else {
        return ignored(base);
    };
    let pod_name = escape_within(&format!("{namespace}/{pod}"), 512).into_owned();
    let node = obj
        .and_then(|o| BindingObject::deserialize(&o.data).ok())
        .and_then(|b| b.target)
        .map(|t| t.name)
        .filter(|n| !n.is_empty());
    let Some(node) = node else {
        return allow(
            base,
            vec![format!(
                "miggate: binding of restore pod {pod_name} names no node; not checked"
            )],
            None,
        );
    };
    let node_esc = escape_within(&node, 256).into_owned();
    let from = restore.restore_from.trim();
    let checkpoint_ref = format!("{}/{}", escape_within(namespace, 256), escape_within(from, 256));
    let skip = match waived(restore.skip_checks.as_deref()) {
        Ok(skip) => skip,
        Err(why) => {
            return refuse(
                base,
                format!("miggate: pod {pod_name}: {why}"),
                vec!["skip-checks-invalid"],
                Vec::new(),
            );
        }
    };
    let Some(checkpoint) = store.checkpoint(namespace, from) else {
        return refuse(
            base,
            format!(
                "miggate: cannot bind pod {pod_name} to node {node_esc}: checkpoint {checkpoint_ref} named by annotation {RESTORE_FROM} does not exist"
            ),
            vec!["checkpoint-not-found"],
            Vec::new(),
        );
    };
    let inventory = match store.inventory(&node) {
        Ok(inventory) => inventory,
        Err(missing) => {
            // Warnings are cut to 256 bytes each: the reasons follow one per warning.
            let has = if missing.passed_over.is_empty() {
                format!("no GPU inventory ({NO_INVENTORY})")
            } else {
                "no usable GPU inventory (the sources present cannot be read, as follows)".to_string()
            };
            let mut warnings = vec![format!(
                "miggate: node {node_esc} has {has}; binding of restore pod {pod_name} not checked, the node agent decides"
            )];
            passed_over_warnings(&node, &missing.passed_over, &mut warnings);
            return allow(base, warnings, None);
        }
    };
    let mut warnings = Vec::new();
    inventory_warnings(&node, &inventory, &mut warnings);
    let options = Options {
        skip,
        ..Options::mode(Mode::Offer)
    };
    // --- DRA (issue 20): exact mode on the devices the pod's claims were allocated, when
    // known (crate::allocation); otherwise offer mode against the whole node.
    let at = crate::allocation::at_binding(
        store,
        namespace,
        &restore,
        &node,
        &checkpoint.manifest,
        &inventory,
        &options.skip,
    );
    let (report, allocated) = crate::allocation::binding_report(
        at,
        || {
            let judged = inventory.manifest_for(&checkpoint.manifest);
            let target = Target::node(&judged).with_slices_listed(inventory.slices_listed);
            evaluate_target(&checkpoint.manifest, target, &options)
        },
        &mut warnings,
    );
    let on_devices = allocated
        .as_deref()
        .map(|d| {
            format!(
                ", exact check on the allocated devices {}",
                escape_within(d, 1024)
            )
        })
        .unwrap_or_default();
    // --- end DRA
    if restore.skip_checks.is_some() {
        let waived: Vec<&str> = report
            .results
            .iter()
            .filter(|r| r.outcome == Outcome::Skipped && r.check.scope() != miggate_compat::Scope::Pod)
            .map(|r| r.check.as_str())
            .collect();
        if !waived.is_empty() {
            warnings.push(format!("miggate: waived by {SKIP_CHECKS}: {}", waived.join(", ")));
        }
    }
    for r in report.results.iter().filter(|r| r.outcome == Outcome::Unknown) {
        warnings.push(format!(
            "miggate: {} unknown: {} (source {}, target {})",
            r.check, r.message, r.source, r.target
        ));
    }
    for w in &report.warnings {
        warnings.push(format!("miggate: {w}"));
    }
    let source = Some(inventory.source);
    if report.compatible {
        let mut decision = allow(base, warnings, source);
        crate::allocation::audit(&mut decision.response, allocated.as_deref());
        return decision;
    }
    let refused_by = report.refusals().map(|r| r.check.as_str()).collect();
    let mut decision = refuse(
        base,
        format!(
            "miggate: checkpoint {checkpoint_ref} of pod {pod_name} cannot be restored on node {node_esc} (inventory from {}{}{on_devices}): {}",
            inventory.source.as_str(),
            fallback(&inventory),
            report.reason
        ),
        refused_by,
        warnings,
    );
    with_source(&mut decision, source);
    crate::allocation::audit(&mut decision.response, allocated.as_deref());
    decision
}

/// Warnings an inventory brings: its source when it is not a `GpuNode` (a partial view), and
/// what the source could not say.
fn inventory_warnings(node: &str, inventory: &NodeInventory, warnings: &mut Vec<String>) {
    if inventory.source != Source::GpuNode {
        let why = if inventory.passed_over.is_empty() {
            "no GpuNode"
        } else {
            "a better source cannot be read"
        };
        warnings.push(format!(
            "miggate: node {} inventory from {} ({why}): facts it does not publish are unknown",
            escape_within(node, 256),
            inventory.source.as_str()
        ));
    }
    for note in &inventory.notes {
        warnings.push(format!("miggate: node {}: {note}", escape_within(node, 256)));
    }
}

fn allow(base: AdmissionResponse, warnings: Vec<String>, source: Option<Source>) -> Decision {
    let verdict = if warnings.is_empty() {
        Verdict::Allowed
    } else {
        Verdict::Warned
    };
    let mut response = base;
    response.warnings = bounded(warnings);
    let mut decision = Decision {
        response,
        verdict,
        refused_by: Vec::new(),
        inventory_source: None,
    };
    with_source(&mut decision, source);
    decision
}

/// Records the inventory source on the decision and as an audit annotation.
fn with_source(decision: &mut Decision, source: Option<Source>) {
    if let Some(src) = source {
        decision.inventory_source = Some(src);
        decision
            .response
            .audit_annotations
            .insert(INVENTORY_SOURCE.to_string(), src.as_str().to_string());
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
        inventory_source: None,
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
        inventory_source: None,
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
