//! The named checks and the policy that turns their outcomes into a verdict.
//!
//! Names are protocol: they appear in reasons, events and skip lists, so a name never changes
//! once released. Report order is the order of [`CheckName::ALL`].

mod driver;
mod gpu;
mod host;
mod pod;
mod request;

pub use pod::reduce_digest;

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::Error;
use crate::device_map;
use crate::manifest::GpuManifest;
use crate::report::{CheckResult, Outcome, Report, reason};

/// A check's stable name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckName {
    /// `host.cpuArch` equal.
    CpuArch,
    /// `host.kernelVersion` equal (full release).
    KernelVersion,
    /// The target kernel is at least the minimum (CRIU needs rseq support).
    KernelMinimum,
    /// `pod.imageDigest` equal after reduction to a content digest.
    ImageDigest,
    /// The target's memory limit is at least the source's.
    MemoryLimit,
    /// The target's CPU limit is at least the source's.
    CpuLimit,
    /// Every externalized source mount exists on the target.
    Mount,
    /// The devices' product names, counted.
    GpuModel,
    /// The number of devices.
    GpuCount,
    /// The kinds of device present (whole GPU, MIG slice).
    MigPartitioning,
    /// The slice shapes, counted per (model, profile).
    MigProfile,
    /// `nvidia.driverVersion` equal per component.
    DriverVersion,
    /// The target driver's major version is at least the minimum.
    DriverMinimum,
    /// The restore container's GPU resource limits would give the source's devices.
    GpuRequest,
}

impl CheckName {
    /// Every check, in report order.
    pub const ALL: [CheckName; 14] = [
        CheckName::CpuArch,
        CheckName::KernelVersion,
        CheckName::KernelMinimum,
        CheckName::ImageDigest,
        CheckName::MemoryLimit,
        CheckName::CpuLimit,
        CheckName::Mount,
        CheckName::GpuModel,
        CheckName::GpuCount,
        CheckName::MigPartitioning,
        CheckName::MigProfile,
        CheckName::DriverVersion,
        CheckName::DriverMinimum,
        CheckName::GpuRequest,
    ];

    /// The stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckName::CpuArch => "cpu-arch",
            CheckName::KernelVersion => "kernel-version",
            CheckName::KernelMinimum => "kernel-minimum",
            CheckName::ImageDigest => "image-digest",
            CheckName::MemoryLimit => "memory-limit",
            CheckName::CpuLimit => "cpu-limit",
            CheckName::Mount => "mount",
            CheckName::GpuModel => "gpu-model",
            CheckName::GpuCount => "gpu-count",
            CheckName::MigPartitioning => "mig-partitioning",
            CheckName::MigProfile => "mig-profile",
            CheckName::DriverVersion => "driver-version",
            CheckName::DriverMinimum => "driver-minimum",
            CheckName::GpuRequest => "gpu-request",
        }
    }

    /// Whether the check reads the target's `pod` (and so is not applicable without one).
    pub fn reads_pod(self) -> bool {
        matches!(
            self,
            CheckName::ImageDigest
                | CheckName::MemoryLimit
                | CheckName::CpuLimit
                | CheckName::Mount
                | CheckName::GpuRequest
        )
    }
}

impl fmt::Display for CheckName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for CheckName {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        CheckName::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| Error::UnknownCheck {
                name: s.to_string(),
                known: CheckName::ALL.map(CheckName::as_str).join(", "),
            })
    }
}

/// How the target is read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// The target is the device set a restore container actually got: equal.
    #[default]
    Exact,
    /// The target is a node's whole inventory: it must be able to offer a matching set.
    Offer,
}

impl FromStr for Mode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "exact" => Ok(Mode::Exact),
            "offer" => Ok(Mode::Offer),
            _ => Err(Error::InvalidOption {
                what: "mode",
                value: s.to_string(),
                why: "expected `exact` or `offer`",
            }),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Exact => "exact",
            Mode::Offer => "offer",
        })
    }
}

/// The kernel release a restore target needs at least (CRIU's rseq support).
pub const DEFAULT_MIN_KERNEL: (u64, u64) = (5, 13);
/// The driver major version a restore target needs at least (cuda-checkpoint's restore API).
pub const DEFAULT_MIN_DRIVER: u64 = 580;

/// How to compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Exact or offer.
    pub mode: Mode,
    /// Turn unknown outcomes into refusals.
    pub strict: bool,
    /// Checks waived by the caller.
    pub skip: BTreeSet<CheckName>,
    /// `kernel-minimum`'s floor as (major, minor).
    pub min_kernel: (u64, u64),
    /// `driver-minimum`'s floor.
    pub min_driver: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mode: Mode::Exact,
            strict: false,
            skip: BTreeSet::new(),
            min_kernel: DEFAULT_MIN_KERNEL,
            min_driver: DEFAULT_MIN_DRIVER,
        }
    }
}

/// Reads a skip list: `all`, or check names separated by commas. An unknown name is an error,
/// so a typo never waives nothing while looking like it waived something.
pub fn parse_skip(list: &str) -> Result<BTreeSet<CheckName>, Error> {
    let list = list.trim();
    if list == "all" {
        return Ok(CheckName::ALL.into_iter().collect());
    }
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::parse)
        .collect()
}

/// Reads `--min-kernel` (`5.13`).
pub fn parse_min_kernel(text: &str) -> Result<(u64, u64), Error> {
    let bad = || Error::InvalidOption {
        what: "minimum kernel",
        value: text.to_string(),
        why: "expected `<major>.<minor>`, such as 5.13",
    };
    let (major, minor) = text.trim().split_once('.').ok_or_else(bad)?;
    Ok((
        major.parse().map_err(|_| bad())?,
        minor.parse().map_err(|_| bad())?,
    ))
}

/// What the two sides are and how to compare them; each check reads only this.
pub(crate) struct Ctx<'a> {
    pub source: &'a GpuManifest,
    pub target: &'a GpuManifest,
    pub options: &'a Options,
}

/// What one check returns before policy (strict, skip) is applied.
pub(crate) struct Verdict {
    pub outcome: Outcome,
    pub source: String,
    pub target: String,
    pub message: String,
    pub mismatches: Vec<(String, String)>,
}

impl Verdict {
    pub fn new(
        outcome: Outcome,
        source: impl Into<String>,
        target: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Verdict {
            outcome,
            source: source.into(),
            target: target.into(),
            message: message.into(),
            mismatches: Vec::new(),
        }
    }
}

fn run(check: CheckName, ctx: &Ctx<'_>) -> Verdict {
    if check.reads_pod() && ctx.target.pod.is_none() {
        return Verdict::new(
            Outcome::NotApplicable,
            "-",
            "no pod",
            "the target has no pod (a node inventory); pod checks do not apply",
        );
    }
    match check {
        CheckName::CpuArch => host::cpu_arch(ctx),
        CheckName::KernelVersion => host::kernel_version(ctx),
        CheckName::KernelMinimum => host::kernel_minimum(ctx),
        CheckName::ImageDigest => pod::image_digest(ctx),
        CheckName::MemoryLimit => pod::memory_limit(ctx),
        CheckName::CpuLimit => pod::cpu_limit(ctx),
        CheckName::Mount => pod::mount(ctx),
        CheckName::GpuModel => gpu::gpu_model(ctx),
        CheckName::GpuCount => gpu::gpu_count(ctx),
        CheckName::MigPartitioning => gpu::mig_partitioning(ctx),
        CheckName::MigProfile => gpu::mig_profile(ctx),
        CheckName::DriverVersion => driver::driver_version(ctx),
        CheckName::DriverMinimum => driver::driver_minimum(ctx),
        CheckName::GpuRequest => request::gpu_request(ctx),
    }
}

/// Compares a source manifest with a target under `options`: one row per check in report
/// order, a verdict, the reason and, when compatible, the device map.
pub fn evaluate(source: &GpuManifest, target: &GpuManifest, options: &Options) -> Report {
    let ctx = Ctx {
        source,
        target,
        options,
    };
    let results: Vec<CheckResult> = CheckName::ALL
        .into_iter()
        .map(|check| {
            let mut v = run(check, &ctx);
            if options.skip.contains(&check) {
                v.message = format!("waived by request ({})", v.outcome.as_str());
                v.outcome = Outcome::Skipped;
                v.mismatches.clear();
            } else if options.strict && v.outcome == Outcome::Unknown {
                v.outcome = Outcome::Refuse;
                v.message = format!("{} (strict mode refuses unknowns)", v.message);
            }
            CheckResult {
                check,
                outcome: v.outcome,
                source: v.source,
                target: v.target,
                message: v.message,
                mismatches: v.mismatches,
            }
        })
        .collect();
    let compatible = results.iter().all(|r| r.outcome != Outcome::Refuse);
    let mut warnings = side_warnings("source", source);
    warnings.extend(side_warnings("target", target));
    let device_map = if compatible {
        match device_map::build(source, target, &options.skip) {
            Ok(map) => map,
            Err(why) => {
                warnings.push(format!("no device map: {why}"));
                None
            }
        }
    } else {
        None
    };
    Report {
        schema_version: 1,
        compatible,
        mode: options.mode,
        reason: reason(&results),
        results,
        device_map,
        warnings,
    }
}

fn side_warnings(side: &str, m: &GpuManifest) -> Vec<String> {
    m.warnings
        .iter()
        .cloned()
        .chain(m.read_warnings())
        .map(|w| format!("{side}: {w}"))
        .collect()
}

/// Compares two optional texts for equality; absent or blank on either side is unknown.
pub(crate) fn must_match(
    source: Option<&str>,
    target: Option<&str>,
    what: &str,
    eq: impl Fn(&str, &str) -> bool,
) -> Verdict {
    let s = source.map(str::trim).filter(|s| !s.is_empty());
    let t = target.map(str::trim).filter(|s| !s.is_empty());
    match (s, t) {
        (Some(s), Some(t)) if eq(s, t) => Verdict::new(Outcome::Pass, s, t, format!("same {what}")),
        (Some(s), Some(t)) => Verdict::new(Outcome::Refuse, s, t, format!("different {what}")),
        (s, t) => Verdict::new(
            Outcome::Unknown,
            crate::report::or_unknown(s),
            crate::report::or_unknown(t),
            format!(
                "{what} not recorded on {}",
                unknown_sides(s.is_none(), t.is_none())
            ),
        ),
    }
}

/// `source`, `target` or `either side`, for messages about what is missing.
pub(crate) fn unknown_sides(source: bool, target: bool) -> &'static str {
    match (source, target) {
        (true, true) => "either side",
        (true, false) => "the source",
        _ => "the target",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        let names: BTreeSet<&str> = CheckName::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(names.len(), CheckName::ALL.len());
        for c in CheckName::ALL {
            assert_eq!(c.as_str().parse::<CheckName>().unwrap(), c);
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
        }
    }

    #[test]
    fn skip_lists_are_strict() {
        assert_eq!(parse_skip("all").unwrap().len(), 14);
        assert_eq!(
            parse_skip("mount, gpu-count").unwrap(),
            [CheckName::Mount, CheckName::GpuCount].into_iter().collect()
        );
        let err = parse_skip("mount,gpu-cuont").unwrap_err().to_string();
        assert!(err.contains("unknown check `gpu-cuont`"), "{err}");
        assert!(parse_skip("").unwrap().is_empty());
    }

    #[test]
    fn min_kernel_reads_major_minor() {
        assert_eq!(parse_min_kernel("5.13").unwrap(), (5, 13));
        assert!(parse_min_kernel("5").is_err());
        assert!(parse_min_kernel("five.13").is_err());
    }
}
