//! `gpu-request`: would the restore container's GPU resource limits give it the source's devices?
//!
//! The NVIDIA device plugin advertises whole GPUs as `nvidia.com/gpu` and, under the `mixed`
//! strategy, each GPU-instance profile as `nvidia.com/mig-<profile>` with `+` turned into `.`.
//! Under `single`, `nvidia.com/gpu` hands out one slice of the node's only shape.

use std::collections::BTreeMap;

use super::{Ctx, Devices};
use crate::device::DeviceKind;
use crate::manifest::MigStrategy;
use crate::multiset::Multiset;
use crate::quantity::Quantity;
use crate::report::CheckResult;
use crate::vocab::Outcome;

use miggate_wire::nvidia::{GPU_RESOURCE as GPU, MIG_RESOURCE_PREFIX as MIG_PREFIX};

/// What the source's devices are called as device-plugin resources. `shown` names every
/// device (a resource name where there is one, the profile of a compute-instance slice, or
/// `unknown`) so that a refusal reports the source's value, not just a count.
struct Needs<'a> {
    shown: Multiset<'a>,
    problem: Option<Problem>,
}

enum Problem {
    Unknown(String),
    Unrequestable(String),
}

fn needs<'a>(devs: &Devices<'a>) -> Needs<'a> {
    let mut shown = Multiset::new();
    let mut problem = None;
    // Class by class, in the order they first appear, so the problem named is the first seen.
    for t in &devs.tallies {
        match (t.kind, t.profile) {
            (DeviceKind::Whole, _) => shown.add_n(GPU, t.count),
            (DeviceKind::Slice, Some(p)) => match p.device_plugin_resource() {
                Some(r) => shown.add_n(r, t.count),
                None => {
                    shown.add_n(p.as_str(), t.count);
                    if !matches!(problem, Some(Problem::Unrequestable(_))) {
                        problem = Some(Problem::Unrequestable(format!(
                            "the checkpoint ran on compute-instance slice {p}, which the device plugin never advertises; request it through a DRA ResourceClaim"
                        )));
                    }
                }
            },
            (kind, _) => {
                shown.add_n("unknown", t.count);
                // A device that cannot be requested refuses whatever the unknown ones are.
                if problem.is_none() {
                    problem = Some(Problem::Unknown(if kind == DeviceKind::Slice {
                        "a slice's profile is not recorded on the source".into()
                    } else {
                        "a device's kind is not known on the source".into()
                    }));
                }
            }
        }
    }
    Needs { shown, problem }
}

/// Whether every request could be one of the source's devices (an `unknown` one could be any).
fn part_of(asked: &Multiset<'_>, need: &Multiset<'_>) -> bool {
    let surplus = asked
        .iter()
        .map(|(k, n)| n.saturating_sub(need.count(k)))
        .fold(0usize, usize::saturating_add);
    surplus <= need.count("unknown")
}

pub(super) fn gpu_request(ctx: &Ctx<'_>) -> CheckResult {
    let pod = ctx.target.pod;
    let claims = pod.and_then(|p| p.resource_claims.as_ref());
    if claims.is_some_and(|c| !c.is_empty()) {
        return ctx.row(
            Outcome::NotApplicable,
            "-",
            "resource claims",
            "GPUs come through resource claims (DRA)",
        );
    }
    let Some(requests) = pod.and_then(|p| p.gpu_requests.as_ref()) else {
        return ctx.row(
            Outcome::NotApplicable,
            "-",
            "no GPU requests",
            "the target records no GPU requests",
        );
    };
    let (asked, odd) = asked_for(requests);
    let Some(devs) = ctx.devices().0 else {
        return ctx.row(
            Outcome::Unknown,
            "unknown",
            asked.render(),
            "devices not recorded on the source",
        );
    };
    let Needs { shown: need, problem } = needs(devs);
    let v = |o, m: String| ctx.row(o, need.render(), asked.render(), m);
    // Absent `resourceClaims` is unknown, not none: devices the requests fall short of could
    // still come through a claim. Requests for anything the checkpoint did not use still refuse.
    let maybe_claimed =
        claims.is_none() && odd.is_empty() && asked.total() < need.total() && part_of(&asked, &need);
    let strategy = ctx.target.nvidia.and_then(|n| n.mig_strategy);
    let gpus = asked.count(GPU);
    match problem {
        Some(Problem::Unknown(why)) => return v(Outcome::Unknown, why),
        Some(Problem::Unrequestable(why)) if !maybe_claimed => return v(Outcome::Refuse, why),
        _ => {}
    }
    if let Some(name) = unadvertised(strategy, &asked) {
        // The same names on both sides would read as a match, so the target says the node
        // cannot give them.
        let target = format!("{} (not advertised under the {name} strategy)", asked.render());
        let why = format!("the {name} strategy advertises no {MIG_PREFIX}* resources");
        return ctx.row(Outcome::Refuse, need.render(), target, why);
    }
    if let Some(why) = strategy_refusal(strategy, &need, &asked) {
        return v(Outcome::Refuse, why);
    }
    if maybe_claimed {
        return v(
            Outcome::Unknown,
            format!(
                "requests {} of the checkpoint's {} devices; resource claims are not recorded, and could give the rest",
                asked.total(),
                need.total()
            ),
        );
    }
    if !odd.is_empty() {
        return v(Outcome::Unknown, odd.join("; "));
    }
    if need.total() != asked.total() {
        return v(
            Outcome::Refuse,
            format!(
                "requests {} device(s), the checkpoint used {}",
                asked.total(),
                need.total()
            ),
        );
    }
    if gpus == 0 {
        return if need == asked {
            v(Outcome::Pass, "requests give the checkpoint's devices".into())
        } else {
            v(
                Outcome::Refuse,
                "requests give other devices than the checkpoint used".into(),
            )
        };
    }
    let (outcome, why) = whole_gpus(strategy, &need, &asked);
    v(outcome, why)
}

/// The pod's `nvidia.com/` requests: those this check counts, and what it cannot read.
fn asked_for(requests: &BTreeMap<String, Quantity>) -> (Multiset<'_>, Vec<String>) {
    let mut asked = Multiset::new();
    let mut odd = Vec::new();
    for (name, qty) in requests
        .iter()
        .filter(|(n, _)| n.starts_with(miggate_wire::NVIDIA_RESOURCE_PREFIX))
    {
        match qty.whole() {
            Some(n) if name == GPU || name.starts_with(MIG_PREFIX) => {
                asked.add_n(name.as_str(), usize::try_from(n).unwrap_or(usize::MAX));
            }
            Some(0) => {}
            Some(_) => odd.push(format!("{name} is not a resource this check knows")),
            None => odd.push(format!("{name}: `{qty}` is not a whole number")),
        }
    }
    (asked, odd)
}

/// The strategy's name when the requests name slices (`nvidia.com/mig-…`) a node of that
/// strategy does not advertise: `single` and `none` advertise only `nvidia.com/gpu`.
fn unadvertised(strategy: Option<MigStrategy>, asked: &Multiset<'_>) -> Option<&'static str> {
    if !asked.iter().any(|(k, _)| k != GPU) {
        return None;
    }
    match strategy {
        Some(MigStrategy::Single) => Some("single"),
        Some(MigStrategy::None) => Some("none"),
        _ => None,
    }
}

/// Why no node of any strategy could give the checkpoint's devices (`need`) for these
/// requests (`asked`) while the node's `strategy` is not known, if none could.
fn strategy_refusal(
    strategy: Option<MigStrategy>,
    need: &Multiset<'_>,
    asked: &Multiset<'_>,
) -> Option<String> {
    // Whatever the node's strategy, `nvidia.com/gpu` never serves slices of two profiles:
    // under `single` every device it gives on a node has the one shape, under `mixed` and
    // `none` it gives whole GPUs. No node needs to be known to refuse this (with a known
    // strategy, [`whole_gpus`] says it in that strategy's words).
    let mig = |k: &&str| k.starts_with(MIG_PREFIX);
    // Slices a pod asks for by their own resource name are not left to `nvidia.com/gpu`: when
    // every slice is, `nvidia.com/gpu` serves only the whole GPUs (the mixed strategy).
    let left_to_gpu = need.iter().any(|(k, n)| mig(&k) && asked.count(k) < n);
    // Counted before anything is collected: the refusal's list is built only when it is said.
    if strategy.is_none()
        && asked.count(GPU) > 0
        && left_to_gpu
        && need.iter().map(|(k, _)| k).filter(mig).nth(1).is_some()
    {
        let profiles: Vec<&str> = need.iter().map(|(k, _)| k).filter(mig).collect();
        return Some(format!(
            "the checkpoint used slices of {} profiles ({}), which {GPU} can never give: under the single strategy every device it gives on a node has one shape, under mixed and none it gives whole GPUs",
            profiles.len(),
            profiles.join(", ")
        ));
    }
    None
}

/// The verdict on requests that name `nvidia.com/gpu` and as many devices as the checkpoint
/// used: what `nvidia.com/gpu` gives depends on the node's strategy.
fn whole_gpus(strategy: Option<MigStrategy>, need: &Multiset<'_>, asked: &Multiset<'_>) -> (Outcome, String) {
    match strategy {
        None => (
            Outcome::Unknown,
            format!(
                "{GPU} gives a whole GPU or a slice depending on the node's MIG strategy, which is not known"
            ),
        ),
        Some(MigStrategy::None | MigStrategy::Mixed) if need == asked => {
            (Outcome::Pass, "requests give the checkpoint's devices".into())
        }
        Some(MigStrategy::None | MigStrategy::Mixed) => (
            Outcome::Refuse,
            format!("{GPU} gives whole GPUs here; the checkpoint used other devices"),
        ),
        // The single strategy needs every GPU of a node cut the same way (or none cut), so
        // `nvidia.com/gpu` never gives two shapes on one node.
        Some(MigStrategy::Single) if need.iter().count() > 1 => (
            Outcome::Refuse,
            format!(
                "under the single strategy every device {GPU} gives on a node has the same shape; the checkpoint used {} shapes ({})",
                need.iter().count(),
                need.iter().map(|(k, _)| k).collect::<Vec<_>>().join(", ")
            ),
        ),
        Some(MigStrategy::Single) if need.count(GPU) > 0 => (
            Outcome::Unknown,
            format!(
                "under the single strategy {GPU} gives a slice on a MIG node; the checkpoint used whole GPUs"
            ),
        ),
        // Only `nvidia.com/gpu` is left here (mig-* resources under single refused above).
        Some(MigStrategy::Single) => (
            Outcome::Pass,
            format!("under the single strategy {GPU} gives one slice each; mig-profile checks the shape"),
        ),
    }
}
