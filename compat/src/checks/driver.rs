//! `driver-version`, `driver-minimum`: the NVIDIA driver a CUDA checkpoint is restored under.

use super::{Ctx, Side, must_match, words};
use crate::report::{CheckResult, Text};
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
        words!("driver version"),
        versions_equal,
    )
}

/// The checkpoint/restore driver API needs a recent driver on the target.
pub(super) fn driver_minimum(ctx: &Ctx<'_>) -> CheckResult {
    let floor = ctx.options.min_driver;
    // The default floor's texts are written out once; only another floor builds its own.
    let default = floor == super::DEFAULT_MIN_DRIVER;
    let text = |fixed: &'static str, built: &dyn Fn() -> String| -> Text {
        if default {
            Text::fixed(fixed)
        } else {
            Text::from(built())
        }
    };
    let need = text("580 or newer", &|| format!("{floor} or newer"));
    let Some(version) = driver(ctx.target).map(str::trim).filter(|s| !s.is_empty()) else {
        return ctx.row(Outcome::Unknown, need, "unknown", "target driver not recorded");
    };
    match leading_number(version) {
        Some(major) if major >= floor => ctx.row(
            Outcome::Pass,
            need,
            Text::copied(version),
            text("driver is at least 580", &|| {
                format!("driver is at least {floor}")
            }),
        ),
        Some(_) => ctx.row(
            Outcome::Refuse,
            need,
            Text::copied(version),
            text("driver is older than 580", &|| {
                format!("driver is older than {floor}")
            }),
        ),
        None => ctx.row(
            Outcome::Unknown,
            need,
            Text::copied(version),
            format!("driver version `{version}` has no readable major number"),
        ),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_written_out_floor_is_the_default() {
        assert_eq!(super::super::DEFAULT_MIN_DRIVER.to_string(), "580");
    }
}
