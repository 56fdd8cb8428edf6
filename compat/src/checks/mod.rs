//! The named checks and the policy that turns their outcomes into a verdict.
//!
//! Every check is a row of the registry (`registry.rs`); its function reads only a [`Ctx`]:
//! the two sides' facts, borrowed, and the options. Report order is [`CheckName::ALL`].

pub(crate) mod devices;
mod driver;
mod gpu;
mod host;
mod pod;
mod registry;
mod request;

pub use pod::reduce_digest;

use std::cell::OnceCell;
use std::collections::BTreeSet;

use crate::Error;
use crate::device_map;
use crate::manifest::{GpuManifest, Host, Nvidia, Pod};
use crate::report::{CheckResult, Report, Text, reason};
use crate::vocab::{CheckName, Mode, Outcome, Scope, TargetScope};
use crate::warning::{Side as WarningSide, Warning};
pub(crate) use devices::Devices;

/// The kernel release a restore target needs at least (CRIU's rseq support).
pub const DEFAULT_MIN_KERNEL: (u64, u64) = (5, 13);
/// The driver a restore target needs at least (cuda-checkpoint's restore API): 580.
pub const DEFAULT_MIN_DRIVER: DriverFloor = DriverFloor::major(580);

/// `driver-minimum`'s floor: the oldest NVIDIA driver a target may run, as people write a
/// driver version (`580`, `580.82`, `580.82.07`). A target's version is compared with it per
/// numeric component, as many as the floor has: `580.82` admits 580.82.07 and 590.48.01 and
/// refuses 580.65.06; `580` looks at the major only. A component the target lacks counts as 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverFloor {
    /// Each component's value, and the width it was written with when that had a leading zero
    /// (`07` prints as `07`), else 0.
    parts: [(u64, u8); DriverFloor::MAX_PARTS],
    /// How many of `parts` are used: 1 to [`DriverFloor::MAX_PARTS`].
    len: usize,
}

impl DriverFloor {
    /// The most components a driver version has (`580.82.07`), and one to spare.
    const MAX_PARTS: usize = 4;

    /// A floor on the major version alone.
    pub const fn major(major: u64) -> Self {
        DriverFloor {
            parts: [(major, 0), (0, 0), (0, 0), (0, 0)],
            len: 1,
        }
    }

    /// Whether the target's driver `version` is at least this floor; `None` when the version
    /// has no number where the floor has one (`r580`, `580.beta`).
    pub fn admits(&self, version: &str) -> Option<bool> {
        let mut target = version.trim().split('.');
        for &(floor, _) in &self.parts[..self.len] {
            let got = match target.next() {
                None => 0,
                Some(part) => crate::text::leading_number(part)?,
            };
            if got != floor {
                return Some(got > floor);
            }
        }
        Some(true)
    }
}

impl std::fmt::Display for DriverFloor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, &(value, width)) in self.parts[..self.len].iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            write!(f, "{value:0width$}", width = usize::from(width))?;
        }
        Ok(())
    }
}

/// Reads `--min-driver`: a driver version as people type it, `580`, `580.82` or `580.82.07`
/// (one to four dot-separated decimal numbers; spaces around it are dropped).
pub fn parse_min_driver(text: &str) -> Result<DriverFloor, Error> {
    let bad = || Error::InvalidOption {
        what: "minimum driver",
        value: crate::escape::escape(text).into_owned(),
        why: "expected a driver version such as 580 or 580.82.07",
    };
    let mut floor = DriverFloor::major(0);
    floor.len = 0;
    for part in text.trim().split('.') {
        let slot = floor.parts.get_mut(floor.len).ok_or_else(bad)?;
        if part.is_empty() || part.len() > 19 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let value = part.parse::<u64>().map_err(|_| bad())?;
        // Only a leading zero needs its width kept (`07`); otherwise 0, the number's own width,
        // so `580` typed equals `DriverFloor::major(580)`. At most 19 digits, checked above.
        let width = if part.len() > 1 && part.starts_with('0') {
            u8::try_from(part.len()).map_err(|_| bad())?
        } else {
            0
        };
        *slot = (value, width);
        floor.len += 1;
    }
    Ok(floor)
}

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
    pub min_driver: DriverFloor,
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

impl Options {
    /// The defaults in `mode`.
    pub fn mode(mode: Mode) -> Self {
        Options {
            mode,
            ..Options::default()
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

/// Reads `--min-kernel` (`5.13`): two plain decimal numbers, nothing else (no sign, no space).
pub fn parse_min_kernel(text: &str) -> Result<(u64, u64), Error> {
    let bad = || Error::InvalidOption {
        what: "minimum kernel",
        value: crate::escape::escape(text).into_owned(),
        why: "expected `<major>.<minor>`, such as 5.13",
    };
    let number = |s: &str| {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse::<u64>().ok()
    };
    let (major, minor) = text.split_once('.').ok_or_else(bad)?;
    Ok((number(major).ok_or_else(bad)?, number(minor).ok_or_else(bad)?))
}

/// The restore target, assembled from borrowed parts: the pod's facts from one place (an
/// admission request), the host and GPU facts from another (a node's inventory), with no copy
/// of either. Its scope says which facts it has; checks outside it are not applicable.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    scope: TargetScope,
    host: Option<&'a Host>,
    pod: Option<&'a Pod>,
    nvidia: Option<&'a Nvidia>,
    /// Where the node facts came from, for its warnings.
    node: Option<&'a GpuManifest>,
    /// Whether the node facts list every MIG slice the node has (see
    /// [`Target::with_slices_listed`]).
    slices_listed: bool,
}

impl<'a> Target<'a> {
    /// A whole manifest. Its scope is inferred: without a `pod` it is a node inventory, with one
    /// every fact is compared.
    pub fn manifest(m: &'a GpuManifest) -> Self {
        let scope = if m.pod.is_some() {
            TargetScope::All
        } else {
            TargetScope::Node
        };
        Target {
            scope,
            host: m.host.as_ref(),
            pod: m.pod.as_ref(),
            nvidia: m.nvidia.as_ref(),
            node: Some(m),
            slices_listed: false,
        }
    }

    /// A pod not yet bound to a node: only its own facts.
    pub fn pod(pod: &'a Pod) -> Self {
        Target {
            scope: TargetScope::Pod,
            host: None,
            pod: Some(pod),
            nvidia: None,
            node: None,
            slices_listed: false,
        }
    }

    /// A node's inventory: host and GPU facts; a `pod` in it is ignored.
    pub fn node(node: &'a GpuManifest) -> Self {
        Target {
            scope: TargetScope::Node,
            host: node.host.as_ref(),
            pod: None,
            nvidia: node.nvidia.as_ref(),
            node: Some(node),
            slices_listed: false,
        }
    }

    /// A pod on a node: the pod's facts with the node's host and GPU facts.
    pub fn pod_on_node(pod: &'a Pod, node: &'a GpuManifest) -> Self {
        Target {
            scope: TargetScope::All,
            pod: Some(pod),
            ..Target::node(node)
        }
    }

    /// The same facts read under another scope (`miggate check --target-scope`).
    pub fn with_scope(self, scope: TargetScope) -> Self {
        Target { scope, ..self }
    }

    /// Says that the target's devices list every MIG slice it has, counted per profile, even
    /// where a device's kind is unknown: its devices of unknown kind are GPUs (whole, or the
    /// parents of slices already listed), never further slices. GPU Feature Discovery's labels
    /// are such a source: `nvidia.com/mig-<profile>.count` is exact while the GPUs it counts carry
    /// no UUID. What such a source cannot tell then never masks a slice shortfall it states
    /// for certain. A target that says so and lists no slice at all has none: its devices of
    /// unknown kind are whole GPUs (a node whose MIG is certainly off).
    pub fn with_slices_listed(self, listed: bool) -> Self {
        Target {
            slices_listed: listed,
            ..self
        }
    }

    /// Which facts the target has.
    pub fn scope(&self) -> TargetScope {
        self.scope
    }

    /// The facts the checks see: those outside the scope are hidden, so no check can read them.
    fn side(&self) -> Side<'a> {
        let node = self.scope != TargetScope::Pod;
        let pod = self.scope != TargetScope::Node;
        Side {
            host: self.host.filter(|_| node),
            pod: self.pod.filter(|_| pod),
            nvidia: self.nvidia.filter(|_| node),
            slices_listed: self.slices_listed && node,
        }
    }

    fn warnings(&self, out: &mut Vec<Warning>) {
        if let Some(m) = self.node {
            side_warnings(WarningSide::Target, m, out);
        }
        if let (Some(p), None | Some(GpuManifest { pod: None, .. })) = (self.pod, self.node) {
            // A pod given on its own: its unknown fields are still worth a word.
            for (k, _) in p.unknown.iter() {
                out.push(Warning::Read {
                    side: WarningSide::Target,
                    warning: Box::new(Warning::UnknownPodField { key: k.to_string() }),
                });
            }
        }
    }
}

/// One side's facts as the checks read them.
#[derive(Clone, Copy)]
pub(crate) struct Side<'a> {
    pub host: Option<&'a Host>,
    pub pod: Option<&'a Pod>,
    pub nvidia: Option<&'a Nvidia>,
    /// Every slice is listed: a device of unknown kind is not one.
    pub slices_listed: bool,
}

impl<'a> Side<'a> {
    fn of(m: &'a GpuManifest) -> Self {
        Side {
            host: m.host.as_ref(),
            pod: m.pod.as_ref(),
            nvidia: m.nvidia.as_ref(),
            slices_listed: false,
        }
    }

    /// The devices, or `None` when not recorded.
    pub fn devices(&self) -> Option<&'a [crate::Device]> {
        self.nvidia?.devices.as_deref()
    }
}

/// What a check reads: both sides, the options, and which check it is (for its row).
pub(crate) struct Ctx<'a> {
    pub check: CheckName,
    pub source: Side<'a>,
    pub target: Side<'a>,
    pub options: &'a Options,
    /// Each side's devices with their classes, read once on first use (a pod-scope target
    /// never reads them).
    devices: [OnceCell<Option<Devices<'a>>>; 2],
}

impl<'a> Ctx<'a> {
    /// Both sides' devices with their classes; `None` where not recorded.
    pub fn devices(&self) -> (Option<&Devices<'a>>, Option<&Devices<'a>>) {
        let [s, t] = &self.devices;
        (
            s.get_or_init(|| self.source.devices().map(Devices::read))
                .as_ref(),
            t.get_or_init(|| {
                let uncounted = self.target.nvidia.map_or(&[][..], |n| n.uncounted.as_slice());
                self.target
                    .devices()
                    .map(|d| Devices::read_target(d, self.target.slices_listed, uncounted))
            })
            .as_ref(),
        )
    }

    /// This check's row.
    pub fn row(
        &self,
        outcome: Outcome,
        source: impl Into<Text>,
        target: impl Into<Text>,
        message: impl Into<Text>,
    ) -> CheckResult {
        CheckResult::new(self.check, outcome, source, target, message)
    }
}

/// Why a check outside the target's scope does not apply.
fn out_of_scope(check: CheckName, scope: TargetScope) -> CheckResult {
    let (target, message) = match (scope, check.scope()) {
        (TargetScope::Node, _) => (
            "no pod",
            "the target has no pod (a node inventory); pod checks do not apply",
        ),
        (_, Scope::Host) => (
            "no node",
            "the target is a pod not yet bound to a node; host checks do not apply",
        ),
        _ => (
            "no node",
            "the target is a pod not yet bound to a node; GPU and driver checks do not apply",
        ),
    };
    CheckResult::new(check, Outcome::NotApplicable, "-", target, message)
}

/// Compares a source manifest with a target manifest under `options`: one row per check in
/// report order, a verdict, the reason and, when compatible, the device map.
pub fn evaluate(source: &GpuManifest, target: &GpuManifest, options: &Options) -> Report {
    evaluate_target(source, Target::manifest(target), options)
}

/// Compares a source manifest with a target assembled from parts (see [`Target`]).
pub fn evaluate_target(source: &GpuManifest, target: Target<'_>, options: &Options) -> Report {
    let mut ctx = Ctx {
        check: CheckName::CPU_ARCH,
        source: Side::of(source),
        target: target.side(),
        options,
        devices: Default::default(),
    };
    let results: Vec<CheckResult> = CheckName::ALL
        .into_iter()
        .map(|check| {
            let mut r = if target.scope.covers(check.scope()) {
                ctx.check = check;
                check.run(&ctx)
            } else {
                out_of_scope(check, target.scope)
            };
            if options.skip.contains(&check) {
                r.message = Text::from(format!("waived by request ({})", r.outcome.as_str()));
                r.outcome = Outcome::Skipped;
                r.mismatches.clear();
            } else if options.strict && r.outcome == Outcome::Unknown {
                r.outcome = Outcome::Refuse;
                r.message = Text::from(format!("{} (strict mode refuses unknowns)", r.message));
            }
            r
        })
        .collect();
    let compatible = results.iter().all(|r| r.outcome != Outcome::Refuse);
    let mut warnings = Vec::new();
    side_warnings(WarningSide::Source, source, &mut warnings);
    target.warnings(&mut warnings);
    let device_map = if compatible && target.scope != TargetScope::Pod {
        let (s, t) = ctx.devices();
        match device_map::build(s, t, &options.skip) {
            Ok(map) => Some(map),
            Err(why) => {
                warnings.push(Warning::NoDeviceMap(why));
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

/// The warnings one side's manifest carries, then what reading it found, each after its side.
fn side_warnings(side: WarningSide, m: &GpuManifest, out: &mut Vec<Warning>) {
    if m.warnings.is_empty() && !m.has_read_warnings() {
        return;
    }
    out.extend(m.warnings.iter().map(|w| Warning::Carried {
        side,
        warning: Box::new(w.clone()),
    }));
    out.extend(m.read_warnings().into_iter().map(|w| Warning::Read {
        side,
        warning: Box::new(w),
    }));
}

/// What a comparison is about, with its fixed messages written out at compile time, so a passing
/// row builds no message text.
pub(crate) struct Words {
    pub what: &'static str,
    pub same: &'static str,
    pub different: &'static str,
}

/// [`Words`] for `$what`: `same $what`, `different $what`.
macro_rules! words {
    ($what:literal) => {
        &$crate::checks::Words {
            what: $what,
            same: concat!("same ", $what),
            different: concat!("different ", $what),
        }
    };
}
pub(crate) use words;

/// Compares two optional texts for equality; absent or blank on either side is unknown.
pub(crate) fn must_match(
    ctx: &Ctx<'_>,
    source: Option<&str>,
    target: Option<&str>,
    words: &Words,
    eq: impl Fn(&str, &str) -> bool,
) -> CheckResult {
    let what = words.what;
    let s = source.map(str::trim).filter(|s| !s.is_empty());
    let t = target.map(str::trim).filter(|s| !s.is_empty());
    match (s, t) {
        (Some(s), Some(t)) if eq(s, t) => {
            ctx.row(Outcome::Pass, Text::copied(s), Text::copied(t), words.same)
        }
        (Some(s), Some(t)) => ctx.row(Outcome::Refuse, Text::copied(s), Text::copied(t), words.different),
        (s, t) => ctx.row(
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
    fn skip_lists_are_strict() {
        assert_eq!(parse_skip("all").unwrap().len(), CheckName::ALL.len());
        assert_eq!(
            parse_skip("mount, gpu-count").unwrap(),
            [CheckName::MOUNT, CheckName::GPU_COUNT].into_iter().collect()
        );
        let err = parse_skip("mount,gpu-cuont").unwrap_err().to_string();
        assert!(err.contains("unknown check `gpu-cuont`"), "{err}");
        assert!(parse_skip("").unwrap().is_empty());
    }

    #[test]
    fn min_kernel_reads_major_minor() {
        assert_eq!(parse_min_kernel("5.13").unwrap(), (5, 13));
        for bad in ["5", "five.13", "+5.+13", " 5.13", "5.13 ", "5.-1", "5.13.1", ""] {
            assert!(parse_min_kernel(bad).is_err(), "{bad:?}");
        }
    }
}
