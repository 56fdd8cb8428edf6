//! `driver-version`, `driver-minimum`: the NVIDIA driver a CUDA checkpoint is restored under.

use super::{Ctx, Side, must_match, words};
use crate::report::{CheckResult, Text};
use crate::text::versions_equal;
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

/// The checkpoint/restore driver API needs a recent driver on the target: at least the floor,
/// per numeric component (`--min-driver 580.82` refuses 580.65.06).
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
    match floor.admits(version) {
        Some(true) => ctx.row(
            Outcome::Pass,
            need,
            Text::copied(version),
            text("driver is at least 580", &|| {
                format!("driver is at least {floor}")
            }),
        ),
        Some(false) => ctx.row(
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
            format!("driver version `{version}` has no number where {floor} has one"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{DEFAULT_MIN_DRIVER, parse_min_driver};
    use rstest::rstest;

    #[test]
    fn the_written_out_floor_is_the_default() {
        assert_eq!(DEFAULT_MIN_DRIVER.to_string(), "580");
        assert_eq!(parse_min_driver("580").ok(), Some(DEFAULT_MIN_DRIVER));
    }

    /// `--min-driver` as people type it, shown back as typed.
    #[rstest]
    #[case("580", Some("580"))]
    #[case("580.82", Some("580.82"))]
    #[case(" 580.82.07 ", Some("580.82.07"))]
    #[case("535.104.05.1", Some("535.104.05.1"))]
    #[case("535.104.05.1.2", None)]
    #[case("", None)]
    #[case("580.", None)]
    #[case(".82", None)]
    #[case("580..82", None)]
    #[case("+580", None)]
    #[case("580.82-open", None)]
    #[case("v580", None)]
    #[case("99999999999999999999", None)]
    fn min_driver_reads_what_people_type(#[case] text: &str, #[case] shown: Option<&str>) {
        assert_eq!(
            parse_min_driver(text).ok().map(|f| f.to_string()).as_deref(),
            shown,
            "{text:?}"
        );
    }

    /// A target's driver against a floor, per numeric component.
    #[rstest]
    #[case("580", "580.65.06", Some(true))]
    #[case("580", "575.51.03", Some(false))]
    #[case("580.82", "580.82.07", Some(true))]
    #[case("580.82", "580.65.06", Some(false))]
    #[case("580.82", "590.48.01", Some(true))]
    #[case("580.82.07", "580.82.7", Some(true))]
    #[case("580.82.07", "580.82.06", Some(false))]
    #[case("580.82", "580", Some(false))]
    #[case("580.82", "580.95.05-open", Some(true))]
    #[case("580.82", "r580", None)]
    #[case("580.82", "580.beta", None)]
    #[case("580", "580.beta", Some(true))]
    fn a_target_driver_is_compared_per_component(
        #[case] floor: &str,
        #[case] target: &str,
        #[case] admits: Option<bool>,
    ) {
        let floor = parse_min_driver(floor).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(floor.admits(target), admits, "{floor} vs {target}");
    }
}
