//! Stage two for a restore pod's binding: the node checks in offer mode against the chosen
//! node's inventory, in exact mode on the devices a DRA pod's claims were allocated when they
//! are known ([`crate::allocation`]), and `gpu-request` against the node's MIG strategy.

use std::collections::BTreeSet;
use std::sync::Arc;

use miggate_compat::escape::escape_within;
use miggate_compat::{CheckName, Mode, Options, Outcome, Report, Scope, Target, evaluate_target};

use super::audit;
use super::warnings::{Warning, inventory_warnings, passed_over_warnings, report_warnings, waived_warning};
use super::{Judgement, RestoreRequest};
use crate::allocation::{AtBinding, ExactNotRun};
use crate::lookup::Checkpoint;
use crate::lookup::{GpuAsk, Inventory, Lookup, NoInventory, RestorePod};
use crate::refusal::{Place, Refusal};
use crate::resolve::Kind;

/// A restore pod's binding: the node checks in offer mode against the chosen node's
/// inventory. A node without one is allowed with warnings: the node agent decides.
pub(super) fn evaluate(
    restore: &RestoreRequest<'_>,
    pod_cached: &RestorePod,
    checkpoint: &Arc<Checkpoint>,
    store: &(impl Lookup + ?Sized),
) -> Judgement {
    let node = restore.node.as_deref().unwrap_or_default();
    let inventory = match store.inventory(node) {
        Ok(inventory) => inventory,
        Err(missing) => return binding_unchecked(restore, node, &missing),
    };
    let mut warnings = Vec::new();
    inventory_warnings(node, &inventory, &mut warnings);
    let options = Options {
        skip: restore.waiver.checks.clone(),
        ..Options::mode(Mode::Offer)
    };
    // --- DRA: exact mode on the devices the pod's claims were allocated, when
    // known (crate::allocation); otherwise offer mode against the whole node.
    let at = crate::allocation::at_binding(
        store,
        restore.namespace,
        pod_cached,
        node,
        &checkpoint.manifest,
        &inventory,
        &options.skip,
    );
    let (report, exact_on) = binding_report(
        at,
        || {
            let judged = inventory.manifest_for(&checkpoint.manifest);
            let target = Target::node(&judged).with_slices_listed(inventory.slices_listed);
            evaluate_target(&checkpoint.manifest, target, &options)
        },
        &mut warnings,
    );
    // --- end DRA
    binding_report_warnings(restore, &report, &mut warnings);
    let requests = binding_gpu_requests(restore, pod_cached, checkpoint, &inventory, &options.skip);
    let mut checks: Vec<CheckName> = report.refusals().map(|r| r.check).collect();
    let mut reasons: Vec<String> = Vec::new();
    if !report.compatible {
        reasons.push(report.reason.clone());
    }
    if !requests.is_empty() {
        if !checks.contains(&CheckName::GPU_REQUEST) {
            checks.push(CheckName::GPU_REQUEST);
        }
        reasons.extend(requests);
    }
    let refusal = (!reasons.is_empty()).then(|| Refusal::Incompatible {
        checkpoint: restore.checkpoint_ref(),
        of_pod: Some(restore.pod()),
        place: Place::on_node(node, &inventory, exact_on.as_deref()),
        reason: reasons.join("; "),
        checks,
    });
    Judgement {
        refusal,
        warnings,
        source: Some(inventory.source),
        exact_on,
        subject: audit::Subject::default(),
    }
}

/// The report a binding is decided on: the exact one when the pod's allocated devices are
/// known, else the offer report `offer` computes; a warning says why the exact check could
/// not run. Returns the devices judged, for the refusal message and the audit annotation.
fn binding_report(
    at: AtBinding,
    offer: impl FnOnce() -> Report,
    warnings: &mut Vec<Warning>,
) -> (Report, Option<String>) {
    match at {
        AtBinding::Judged { report, devices } => (report, Some(devices)),
        AtBinding::NoClaims => (offer(), None),
        AtBinding::NotAllocated(why) => not_run(ExactNotRun::NotAllocated(why), offer, warnings),
        AtBinding::Unmatched(why) => not_run(ExactNotRun::Unmatched(Arc::new(why)), offer, warnings),
    }
}

/// The offer report, with a warning saying why the exact check did not run.
fn not_run(
    why: ExactNotRun,
    offer: impl FnOnce() -> Report,
    warnings: &mut Vec<Warning>,
) -> (Report, Option<String>) {
    warnings.push(Warning::ExactCheckNotRun(why));
    (offer(), None)
}

/// `gpu-request` of each restore container against the node it is being bound to: the node's
/// MIG strategy, which the pod's creation could not know, decides what `nvidia.com/gpu` gives
/// (whole GPUs only under `mixed` and `none`, slices only under `single`), so a one-slice
/// checkpoint asking `nvidia.com/gpu: 1` is refused on a mixed-strategy node. The containers
/// are the creation's: the one the checkpoint names (or the only one asking for GPUs), or each
/// destination of a `PodSnapshot`'s container map; one that asks for no GPU was judged at
/// creation. The refusals' reasons, each prefixed with its destination for the peer's pods;
/// none when the node's strategy is unknown or the pod's waiver covers `gpu-request`.
fn binding_gpu_requests(
    restore: &RestoreRequest<'_>,
    pod_cached: &RestorePod,
    checkpoint: &Checkpoint,
    inventory: &Inventory,
    skip: &BTreeSet<CheckName>,
) -> Vec<String> {
    let judged = inventory.manifest_for(&checkpoint.manifest);
    let strategy_known = judged.nvidia.as_ref().and_then(|n| n.mig_strategy).is_some();
    if skip.contains(&CheckName::GPU_REQUEST) || !strategy_known || pod_cached.gpu_asks.is_empty() {
        return Vec::new();
    }
    let asks = &pod_cached.gpu_asks;
    let find = |name: &str| asks.iter().find(|a| a.container == name);
    let chosen: Vec<(Option<&str>, &GpuAsk)> =
        match (restore.reference.kind, checkpoint.container_name.as_deref()) {
            (Kind::PodSnapshot, Some(captured)) => {
                let Ok(destinations) =
                    miggate_crds::peer::destinations(restore.container_map.as_deref(), captured)
                else {
                    // A map that cannot be read was refused at creation.
                    return Vec::new();
                };
                destinations
                    .iter()
                    .filter_map(|d| find(d).map(|a| (Some(a.container.as_str()), a)))
                    .collect()
            }
            (_, Some(named)) => find(named).map(|a| (None, a)).into_iter().collect(),
            (_, None) => match asks.as_slice() {
                [only] => vec![(None, only)],
                _ => Vec::new(),
            },
        };
    let options = Options {
        skip: CheckName::ALL
            .into_iter()
            .filter(|c| *c != CheckName::GPU_REQUEST)
            .collect(),
        ..Options::mode(Mode::Offer)
    };
    let mut reasons = Vec::new();
    for (destination, ask) in chosen {
        let pod = ask.pod_facts();
        let target = Target::pod_on_node(&pod, &judged).with_slices_listed(inventory.slices_listed);
        let report = evaluate_target(&checkpoint.manifest, target, &options);
        if !report.compatible {
            reasons.push(match destination {
                Some(d) => format!("{}: {}", escape_within(d, 128), report.reason),
                None => report.reason,
            });
        }
    }
    reasons
}

/// A binding to a node no source describes: allowed unchecked, with why as warnings (cut to
/// 256 bytes each, so the unusable sources follow one per warning).
fn binding_unchecked(restore: &RestoreRequest<'_>, node: &str, missing: &NoInventory) -> Judgement {
    let mut warnings = Vec::new();
    warnings.push(Warning::BindingNoInventory {
        node: node.to_string(),
        unusable: !missing.passed_over.is_empty(),
        pod: restore.pod(),
    });
    passed_over_warnings(node, &missing.passed_over, &mut warnings);
    Judgement::unchecked(warnings)
}

/// The warnings a binding's report gives: the waived node checks (when the pod waives any),
/// every unknown and the report's own.
fn binding_report_warnings(restore: &RestoreRequest<'_>, report: &Report, warnings: &mut Vec<Warning>) {
    if restore.waiver.annotated {
        waived_warning(report, warnings, |r| r.check.scope() != Scope::Pod);
    }
    for r in report.results.iter().filter(|r| r.outcome == Outcome::Unknown) {
        warnings.push(Warning::Unknown(r.clone()));
    }
    report_warnings(report, warnings);
}
