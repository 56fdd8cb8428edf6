//! Stage two for a restore pod's creation: the pod checks on each restore container (the
//! one the checkpoint names, or each destination of a `PodSnapshot`'s container map), and the
//! node checks when the pod names its node.

use std::collections::BTreeSet;
use std::sync::Arc;

use miggate_compat::escape::escape_within;
use miggate_compat::{
    CheckName, Mode, Options, Outcome, Report, Scope, Target, evaluate_target, reduce_digest,
};

use super::audit;
use super::warnings::{Warning, inventory_warnings, passed_over_warnings, report_warnings, waived_warning};
use super::{Judgement, PodSpec, RestoreRequest};
use crate::lookup::Checkpoint;
use crate::lookup::{Inventory, Lookup};
use crate::pod::{self as spec, Choice};
use crate::refusal::{Place, Refusal};
use crate::resolve::Kind;

/// A restore pod's creation: the pod checks on each restore container, and the node checks
/// when it names a node. A `PodSnapshot` restore names each destination container in its
/// reason, as the peer's agent does (`engine-1: memory-limit: …`).
pub(super) fn evaluate(
    restore: &RestoreRequest<'_>,
    spec: &PodSpec<'_>,
    checkpoint: &Arc<Checkpoint>,
    store: &(impl Lookup + ?Sized),
) -> Judgement {
    let mut warnings = Vec::new();
    let containers = match restore_containers(restore, spec, checkpoint, &mut warnings) {
        Ok(containers) => containers,
        Err(refusal) => return Judgement::refused(refusal, Vec::new()),
    };
    let node_name = restore.node.as_deref();
    let node = match named_node(restore, store, &mut warnings) {
        Ok(node) => node,
        Err(refusal) => return Judgement::refused(refusal, warnings),
    };
    let judged = node.as_ref().map(|n| n.manifest_for(&checkpoint.manifest));
    let mut reasons: Vec<String> = Vec::new();
    let mut checks: Vec<CheckName> = Vec::new();
    for (destination, pod_facts) in &containers {
        let pod_known = *pod_facts != miggate_compat::Pod::default();
        let mut skip = restore.waiver.checks.clone();
        let digests = Digests::compare(checkpoint, pod_facts, &mut skip, &mut warnings);
        let target = match (node.as_ref(), judged.as_deref()) {
            (Some(node), Some(manifest)) => {
                Target::pod_on_node(pod_facts, manifest).with_slices_listed(node.slices_listed)
            }
            _ => Target::pod(pod_facts),
        };
        let options = Options {
            skip,
            ..Options::mode(Mode::Offer)
        };
        let report = evaluate_target(&checkpoint.manifest, target, &options);
        pod_report_warnings(restore, &report, &digests, pod_known, &mut warnings);
        if !report.compatible {
            reasons.push(match destination {
                Some(d) => format!("{d}: {}", report.reason),
                None => report.reason.clone(),
            });
            for check in report.refusals().map(|r| r.check) {
                if !checks.contains(&check) {
                    checks.push(check);
                }
            }
        }
    }
    if containers.len() > 1 {
        dedup_in_order(&mut warnings);
    }
    let refusal = (!reasons.is_empty()).then(|| {
        let place = match (node_name, node.as_ref()) {
            (Some(n), Some(inv)) => Place::on_node(n, inv, None),
            _ => Box::new(Place::InPod),
        };
        Refusal::Incompatible {
            checkpoint: restore.checkpoint_ref(),
            of_pod: None,
            place,
            reason: reasons.join("; "),
            checks,
        }
    });
    Judgement {
        refusal,
        warnings,
        source: node.as_ref().map(|n| n.source),
        exact_on: None,
        subject: audit::Subject::default(),
    }
}

/// Drops repeated warnings, keeping the first of each: several destinations of one restore
/// give the same node and source notes.
fn dedup_in_order(warnings: &mut Vec<Warning>) {
    let mut seen = std::collections::HashSet::new();
    warnings.retain(|w| seen.insert(w.to_string()));
}

/// The containers a restore is compared with, each with the name its reasons carry: for a
/// `GpuCheckpoint`, the one restore container (unnamed in reasons, as always); for a
/// `PodSnapshot`, every destination of its container map, or the captured container itself.
fn restore_containers(
    restore: &RestoreRequest<'_>,
    spec: &PodSpec<'_>,
    checkpoint: &Checkpoint,
    warnings: &mut Vec<Warning>,
) -> Result<Vec<(Option<String>, miggate_compat::Pod)>, Refusal> {
    let captured = checkpoint.container_name.as_deref();
    let (Kind::PodSnapshot, Some(captured)) = (restore.reference.kind, captured) else {
        return restore_container_facts(restore, spec, checkpoint, warnings).map(|facts| vec![(None, facts)]);
    };
    let map = restore.container_map.as_deref();
    let destinations =
        miggate_crds::peer::destinations(map, captured).map_err(|why| Refusal::ContainerMapInvalid {
            pod: restore.pod(),
            why,
        })?;
    destinations
        .iter()
        .map(
            |name| match spec.containers.iter().find(|c| c.name == name.as_str()) {
                Some(c) => Ok((Some(escape_within(name, 128).into_owned()), spec::facts(c))),
                None => Err(container_not_found(restore, spec, name, map.is_some())),
            },
        )
        .collect()
}

/// The refusal of a restore into `name`, a container the pod does not have.
fn container_not_found(
    restore: &RestoreRequest<'_>,
    spec: &PodSpec<'_>,
    name: &str,
    mapped: bool,
) -> Refusal {
    Refusal::ContainerNotFound {
        checkpoint: restore.checkpoint_ref(),
        container: escape_within(name, 256).into_owned(),
        pod: restore.pod(),
        containers: spec
            .containers
            .iter()
            .map(|c| escape_within(&c.name, 128).into_owned())
            .collect(),
        mapped,
    }
}

/// The restore container's facts: the container the checkpoint names (refused when the pod
/// has none of that name), else the only one asking for GPUs; with neither, no facts and a
/// warning, since the node agent sees which container restores.
fn restore_container_facts(
    restore: &RestoreRequest<'_>,
    spec: &PodSpec<'_>,
    checkpoint: &Checkpoint,
    warnings: &mut Vec<Warning>,
) -> Result<miggate_compat::Pod, Refusal> {
    match spec::choose(spec, checkpoint.container_name.as_deref()) {
        Choice::Container(c) => Ok(spec::facts(c)),
        Choice::Missing(name) => Err(container_not_found(restore, spec, name, false)),
        Choice::Unknown(n) => {
            warnings.push(Warning::ContainerUnknown {
                checkpoint: restore.checkpoint_ref(),
                asking: n,
            });
            Ok(miggate_compat::Pod::default())
        }
    }
}

/// The image digests of the checkpoint and of the pod's spec, compared.
struct Digests {
    /// The checkpoint's digest, reduced to `sha256:…`.
    source: Option<String>,
    /// The digest the restore container's image pins, if it pins one.
    target: Option<String>,
    /// Whether `image-digest` was waived here because they differ (not by the pod's waiver).
    waived_here: bool,
}

impl Digests {
    /// The spec pins an image by digest at best; the checkpoint holds the runtime's image id,
    /// which may be an index digest of the same image. A difference is not proof of another
    /// image, so it is waived here, with a warning, and left to the node agent, which sees the
    /// runtime's id: `skip` (the pod's waiver) gains `image-digest`.
    fn compare(
        checkpoint: &Checkpoint,
        pod_facts: &miggate_compat::Pod,
        skip: &mut BTreeSet<CheckName>,
        warnings: &mut Vec<Warning>,
    ) -> Digests {
        let source = checkpoint
            .manifest
            .pod
            .as_ref()
            .and_then(|p| p.image_digest.as_deref())
            .and_then(reduce_digest);
        let target = pod_facts.image_digest.as_deref().and_then(reduce_digest);
        let mut waived_here = false;
        if let (Some(s), Some(t)) = (&source, &target)
            && s != t
            && !skip.contains(&CheckName::IMAGE_DIGEST)
        {
            waived_here = true;
            skip.insert(CheckName::IMAGE_DIGEST);
            warnings.push(Warning::DigestsDiffer {
                pod: t.clone(),
                checkpoint: s.clone(),
            });
        }
        Digests {
            source,
            target,
            waived_here,
        }
    }
}

/// The inventory of the node the pod names, with its notes as warnings; refused when no
/// source describes that node. `None` when the pod names no node.
fn named_node(
    restore: &RestoreRequest<'_>,
    store: &(impl Lookup + ?Sized),
    warnings: &mut Vec<Warning>,
) -> Result<Option<Inventory>, Refusal> {
    let Some(n) = restore.node.as_deref() else {
        return Ok(None);
    };
    match store.inventory(n) {
        Ok(inventory) => {
            inventory_warnings(n, &inventory, warnings);
            Ok(Some(inventory))
        }
        Err(missing) => {
            passed_over_warnings(n, &missing.passed_over, warnings);
            Err(Refusal::NodeNotFound {
                pod: restore.pod(),
                node: escape_within(n, 256).into_owned(),
                has: missing,
                checkpoint: restore.checkpoint_ref(),
            })
        }
    }
}

/// The warnings a pod's report gives: the waived checks (when the pod waives any), the
/// unknowns (pod checks only when the pod's facts are known, an unpinned image said in its own
/// words) and the report's own.
fn pod_report_warnings(
    restore: &RestoreRequest<'_>,
    report: &Report,
    digests: &Digests,
    pod_known: bool,
    warnings: &mut Vec<Warning>,
) {
    if restore.waiver.annotated {
        waived_warning(report, warnings, |r| {
            !(digests.waived_here && r.check == CheckName::IMAGE_DIGEST)
        });
    }
    for r in report.results.iter().filter(|r| r.outcome == Outcome::Unknown) {
        if !pod_known && r.check.scope() == Scope::Pod {
            continue;
        }
        if r.check == CheckName::IMAGE_DIGEST && digests.target.is_none() && digests.source.is_some() {
            warnings.push(Warning::ImageUnpinned);
            continue;
        }
        warnings.push(Warning::Unknown(r.clone()));
    }
    report_warnings(report, warnings);
}
