//! `driver-version`, `driver-minimum`: the NVIDIA driver a CUDA checkpoint is restored under.

use super::{Ctx, Side, must_match};
use crate::report::CheckResult;
use crate::text::{leading_number, versions_equal};
use crate::vocab::Outcome;

fn driver<'a>(side: Side<'a>) -> Option<&'a str> {
    side.nvidia?.driver_version.as_ref().map(|v| v.as_str())
}

/// cuda-checkpoint restores only under the driver build it checkpointed with
/// (560.35.03 → 560.35.05 failed upstream), compared per numeric component.
pub(super) fn driver_version(ctx: &Ctx<'_>) -> CheckResult {
    must_match(
        ctx,
        driver(ctx.source),
        driver(ctx.target),
        "driver version",
        versions_equal,
    )
}

/// The checkpoint/restore driver API needs a recent driver on the target.
pub(super) fn driver_minimum(ctx: &Ctx<'_>) -> CheckResult {
    let floor = ctx.options.min_driver;
    let need = format!("{floor} or newer");
    let Some(version) = driver(ctx.target).map(str::trim).filter(|s| !s.is_empty()) else {
        return ctx.row(Outcome::Unknown, need, "unknown", "target driver not recorded");
    };
    match leading_number(version) {
        Some(major) if major >= floor => ctx.row(
            Outcome::Pass,
            need,
            version.to_string(),
            format!("driver is at least {floor}"),
        ),
        Some(_) => ctx.row(
            Outcome::Refuse,
            need,
            version.to_string(),
            format!("driver is older than {floor}"),
        ),
        None => ctx.row(
            Outcome::Unknown,
            need,
            version.to_string(),
            format!("driver version `{version}` has no readable major number"),
        ),
    }
}
