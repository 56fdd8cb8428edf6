//! `cpu-arch`, `kernel-version`, `kernel-minimum`: the host a process is restored on.

use super::{Ctx, Side, must_match, words};
use crate::report::{CheckResult, Text};
use crate::text::kernel_major_minor;
use crate::vocab::Outcome;

fn host_field<'a>(side: Side<'a>, f: impl Fn(&'a crate::Host) -> Option<&'a str>) -> Option<&'a str> {
    side.host.and_then(f)
}

/// CRIU restores machine code as is: the architecture must be the same.
pub(super) fn cpu_arch(ctx: &Ctx<'_>) -> CheckResult {
    must_match(
        ctx,
        host_field(ctx.source, |h| h.cpu_arch.as_deref()),
        host_field(ctx.target, |h| h.cpu_arch.as_deref()),
        words!("CPU architecture"),
        |a, b| a == b,
    )
}

/// The full release is compared: kernels of one major.minor still differ in what CRIU restores.
pub(super) fn kernel_version(ctx: &Ctx<'_>) -> CheckResult {
    must_match(
        ctx,
        host_field(ctx.source, |h| h.kernel_version.as_ref().map(|v| v.as_str())),
        host_field(ctx.target, |h| h.kernel_version.as_ref().map(|v| v.as_str())),
        words!("kernel release"),
        |a, b| a == b,
    )
}

/// CRIU needs rseq support, which arrived in 5.13; older kernels fail the restore late.
pub(super) fn kernel_minimum(ctx: &Ctx<'_>) -> CheckResult {
    let (maj, min) = ctx.options.min_kernel;
    // The default floor's texts are written out once; only another floor builds its own.
    let default = (maj, min) == super::DEFAULT_MIN_KERNEL;
    let text = |fixed: &'static str, built: &dyn Fn() -> String| -> Text {
        if default {
            Text::fixed(fixed)
        } else {
            Text::from(built())
        }
    };
    let floor = text("5.13 or newer", &|| format!("{maj}.{min} or newer"));
    let target = host_field(ctx.target, |h| h.kernel_version.as_ref().map(|v| v.as_str()))
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let Some(release) = target else {
        return ctx.row(Outcome::Unknown, floor, "unknown", "target kernel not recorded");
    };
    match kernel_major_minor(release) {
        Some(have) if have >= (maj, min) => ctx.row(
            Outcome::Pass,
            floor,
            Text::copied(release),
            text("kernel is at least 5.13", &|| {
                format!("kernel is at least {maj}.{min}")
            }),
        ),
        Some(_) => ctx.row(
            Outcome::Refuse,
            floor,
            Text::copied(release),
            text("kernel is older than 5.13", &|| {
                format!("kernel is older than {maj}.{min}")
            }),
        ),
        None => ctx.row(
            Outcome::Unknown,
            floor,
            Text::copied(release),
            format!("kernel release `{release}` has no readable major.minor"),
        ),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_written_out_floor_is_the_default() {
        let (maj, min) = super::super::DEFAULT_MIN_KERNEL;
        assert_eq!(format!("{maj}.{min}"), "5.13");
    }
}
