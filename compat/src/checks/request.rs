//! `gpu-request`: would the restore container's GPU resource limits give it the source's devices?
//!
//! The NVIDIA device plugin advertises whole GPUs as `nvidia.com/gpu` and, under the `mixed`
//! strategy, each GPU-instance profile as `nvidia.com/mig-<profile>` with `+` turned into `.`.
//! Under `single`, `nvidia.com/gpu` hands out one slice of the node's only shape.

use super::{Ctx, Verdict};
use crate::device::{DeviceKind, SliceShape};
use crate::manifest::MigStrategy;
use crate::multiset::Multiset;
use crate::report::Outcome;

const GPU: &str = "nvidia.com/gpu";
const MIG_PREFIX: &str = "nvidia.com/mig-";

/// What the source's devices are called as device-plugin resources.
enum Needs {
    Resources(Multiset),
    Unknown(String),
    Unrequestable(String),
}

fn needs(devs: &[crate::Device]) -> Needs {
    let mut out = Multiset::new();
    for d in devs {
        match (d.kind(), d.slice_shape()) {
            (DeviceKind::Whole, _) => out.add(GPU),
            (DeviceKind::Slice, Some(SliceShape::Known(p))) => match p.device_plugin_resource() {
                Some(r) => out.add(r),
                None => {
                    return Needs::Unrequestable(format!(
                        "the checkpoint ran on compute-instance slice {p}, which the device plugin never advertises; request it through a DRA ResourceClaim"
                    ));
                }
            },
            (DeviceKind::Slice, _) => return Needs::Unknown("a slice's profile is not recorded on the source".into()),
            (DeviceKind::Unknown, _) => return Needs::Unknown("a device's kind is not known on the source".into()),
        }
    }
    Needs::Resources(out)
}

pub(super) fn gpu_request(ctx: &Ctx<'_>) -> Verdict {
    let pod = ctx.target.pod.as_ref();
    if pod.and_then(|p| p.resource_claims.as_ref()).is_some_and(|c| !c.is_empty()) {
        return Verdict::new(Outcome::NotApplicable, "-", "resource claims", "GPUs come through resource claims (DRA)");
    }
    let Some(requests) = pod.and_then(|p| p.gpu_requests.as_ref()) else {
        return Verdict::new(Outcome::NotApplicable, "-", "no GPU requests", "the target records no GPU requests");
    };
    let mut asked = Multiset::new();
    let mut odd = Vec::new();
    for (name, qty) in requests.iter().filter(|(n, _)| n.starts_with("nvidia.com/")) {
        match qty.whole() {
            Some(n) if name == GPU || name.starts_with(MIG_PREFIX) => asked.add_n(name.as_str(), n as usize),
            Some(0) => {}
            Some(_) => odd.push(format!("{name} is not a resource this check knows")),
            None => odd.push(format!("{name}: `{qty}` is not a whole number")),
        }
    }
    let Some(devs) = ctx.source.devices() else {
        return Verdict::new(Outcome::Unknown, "unknown", asked.render(), "devices not recorded on the source");
    };
    let need = match needs(devs) {
        Needs::Resources(m) => m,
        Needs::Unknown(why) => return Verdict::new(Outcome::Unknown, devs.len().to_string(), asked.render(), why),
        Needs::Unrequestable(why) => return Verdict::new(Outcome::Refuse, devs.len().to_string(), asked.render(), why),
    };
    let v = |o, m: String| Verdict::new(o, need.render(), asked.render(), m);
    if need.total() != asked.total() && odd.is_empty() {
        return v(Outcome::Refuse, format!("requests {} devices, the checkpoint used {}", asked.total(), need.total()));
    }
    if !odd.is_empty() {
        return v(Outcome::Unknown, odd.join("; "));
    }
    let gpus = asked.count(GPU);
    if gpus == 0 {
        return if need == asked {
            v(Outcome::Pass, "requests give the checkpoint's devices".into())
        } else {
            v(Outcome::Refuse, "requests give other devices than the checkpoint used".into())
        };
    }
    match ctx.target.nvidia.as_ref().and_then(|n| n.mig_strategy) {
        None => v(Outcome::Unknown, format!("{GPU} gives a whole GPU or a slice depending on the node's MIG strategy, which is not known")),
        Some(MigStrategy::None | MigStrategy::Mixed) if need == asked => v(Outcome::Pass, "requests give the checkpoint's devices".into()),
        Some(MigStrategy::None | MigStrategy::Mixed) => {
            v(Outcome::Refuse, format!("{GPU} gives whole GPUs here; the checkpoint used other devices"))
        }
        Some(MigStrategy::Single) if need.count(GPU) > 0 => v(
            Outcome::Unknown,
            format!("under the single strategy {GPU} gives a slice on a MIG node; the checkpoint used whole GPUs"),
        ),
        Some(MigStrategy::Single) if asked.count(GPU) == asked.total() => {
            v(Outcome::Pass, format!("under the single strategy {GPU} gives one slice each; mig-profile checks the shape"))
        }
        Some(MigStrategy::Single) => v(Outcome::Refuse, format!("the single strategy advertises no {MIG_PREFIX}* resources")),
    }
}
