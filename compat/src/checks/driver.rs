//! `driver-version`, `driver-minimum`: the NVIDIA driver a CUDA checkpoint is restored under.

use super::{Ctx, Verdict, must_match};
use crate::report::Outcome;
use crate::text::{leading_number, versions_equal};

fn driver(m: &crate::GpuManifest) -> Option<&str> {
    m.nvidia.as_ref()?.driver_version.as_ref().map(|v| v.as_str())
}

/// cuda-checkpoint restores only under the driver build it checkpointed with
/// (560.35.03 → 560.35.05 failed upstream), compared per numeric component.
pub(super) fn driver_version(ctx: &Ctx<'_>) -> Verdict {
    must_match(
        driver(ctx.source),
        driver(ctx.target),
        "driver version",
        versions_equal,
    )
}

/// The checkpoint/restore driver API needs a recent driver on the target.
pub(super) fn driver_minimum(ctx: &Ctx<'_>) -> Verdict {
    let floor = ctx.options.min_driver;
    let need = format!("{floor} or newer");
    let Some(version) = driver(ctx.target).map(str::trim).filter(|s| !s.is_empty()) else {
        return Verdict::new(Outcome::Unknown, need, "unknown", "target driver not recorded");
    };
    match leading_number(version) {
        Some(major) if major >= floor => Verdict::new(
            Outcome::Pass,
            need,
            version,
            format!("driver is at least {floor}"),
        ),
        Some(_) => Verdict::new(
            Outcome::Refuse,
            need,
            version,
            format!("driver is older than {floor}"),
        ),
        None => Verdict::new(
            Outcome::Unknown,
            need,
            version,
            format!("driver version `{version}` has no readable major number"),
        ),
    }
}
