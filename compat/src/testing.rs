//! A test kit: realistic nodes, and assertions that fail with the report's table.
//!
//! A team that checkpoints GPU pods wants a plain `#[test]` that says "a checkpoint taken on two
//! `3g.40gb` slices restores on this node" or "is refused by `mig-profile`", and, when it does
//! not hold, a failure that shows which check decided and both values, as `miggate check` does.
//! Enabled by the `testing` feature, for dev-dependencies:
//!
//! ```toml
//! [dev-dependencies]
//! miggate-compat = { version = "0.1", features = ["testing"] }
//! ```
//!
//! ```
//! use miggate_compat::testing::{assert_refused_by, assert_restorable, nodes};
//! use miggate_compat::{CheckName, Gpu, GpuManifest};
//!
//! // A checkpoint taken on two 3g.40gb slices of an H100…
//! let checkpoint = GpuManifest::builder()
//!     .kernel(nodes::KERNEL)
//!     .cpu_arch("amd64")
//!     .driver(nodes::DRIVER)
//!     .gpu(Gpu::h100().cut(["3g.40gb", "3g.40gb"]))
//!     .build()?;
//! // …restores onto two such slices elsewhere, with the device map to pass to cuda-checkpoint…
//! let restore = GpuManifest::builder()
//!     .node("gpu-node-7")
//!     .kernel(nodes::KERNEL)
//!     .cpu_arch("amd64")
//!     .driver(nodes::DRIVER)
//!     .gpu(Gpu::h100().cut(["3g.40gb", "3g.40gb"]))
//!     .build()?;
//! let report = assert_restorable(&checkpoint, &restore);
//! assert!(report.device_map.is_some_and(|map| map.contains("=MIG-")));
//! // …and not onto two whole H200s.
//! assert_refused_by(&checkpoint, &nodes::h200_x8(), CheckName::MIG_PARTITIONING);
//! # Ok::<(), miggate_compat::Error>(())
//! ```
//!
//! Helpers panic, as `assert_eq!` does: that is how a `#[test]` fails.
#![allow(
    clippy::panic,
    reason = "assertion helpers fail a test by panicking, as assert! does"
)]

use std::fmt::Write as _;

use crate::checks::{Options, evaluate};
use crate::escape::escape;
use crate::manifest::GpuManifest;
use crate::report::Report;
use crate::vocab::{CheckName, Outcome};

/// Realistic node inventories (no pod), built with the builders, as a node agent would publish
/// them. Each is the same on every call: generated UUIDs are seeded by the node name.
pub mod nodes {
    use crate::Error;
    use crate::manifest::{Gpu, GpuManifest, MigStrategy};

    /// The kernel every fixture node runs, so host checks pass unless a test changes it.
    pub const KERNEL: &str = "5.15.0-1071-aws";
    /// The driver every fixture node runs (above the default minimum of 580).
    pub const DRIVER: &str = "580.82.07";

    fn node(name: &str) -> crate::ManifestBuilder {
        GpuManifest::builder()
            .node(name)
            .kernel(KERNEL)
            .cpu_arch("amd64")
            .driver(DRIVER)
            .cuda("13.0")
    }

    /// Panics with the fixture's name: a fixture that does not build is a bug in this module,
    /// which its own tests catch first.
    #[track_caller]
    fn built(name: &str, m: Result<GpuManifest, Error>) -> GpuManifest {
        match m {
            Ok(m) => m,
            Err(e) => panic!("fixture {name} does not build: {e}"),
        }
    }

    /// `gpu-node-7`: eight H100 80GB, GPU 0 cut `3g.40gb` twice, GPU 1 cut into seven
    /// `1g.10gb`, GPUs 2–7 whole; device plugin in `mixed` strategy.
    pub fn h100_mixed() -> GpuManifest {
        built(
            "h100_mixed",
            node("gpu-node-7")
                .mig_strategy(MigStrategy::Mixed)
                .gpu(Gpu::h100().cut(["3g.40gb", "3g.40gb"]))
                .gpu(Gpu::h100().cut(["1g.10gb"; 7]))
                .gpus(6, Gpu::h100())
                .build(),
        )
    }

    /// `gpu-node-9`: eight whole H200s, MIG off.
    pub fn h200_x8() -> GpuManifest {
        built(
            "h200_x8",
            node("gpu-node-9")
                .mig_strategy(MigStrategy::None)
                .gpus(8, Gpu::h200())
                .build(),
        )
    }

    /// `gpu-node-2`: one A100-SXM4-40GB cut into seven `1g.5gb`, with the legacy
    /// `MIG-GPU-<id>/<gi>/<ci>` UUIDs of drivers before R470, which no device map can name.
    pub fn a100_legacy() -> GpuManifest {
        built(
            "a100_legacy",
            node("gpu-node-2")
                .mig_strategy(MigStrategy::Mixed)
                .gpu(Gpu::a100_40gb().cut(["1g.5gb"; 7]).legacy_uuids())
                .build(),
        )
    }

    /// `gpu-node-4`: one L4, which has no MIG.
    pub fn l4() -> GpuManifest {
        built("l4", node("gpu-node-4").gpu(Gpu::l4()).build())
    }
}

/// Asserts that `source` restores onto `target` in exact mode with default options, and
/// returns the report (for its device map). On failure the message is the report's table.
#[track_caller]
pub fn assert_restorable(source: &GpuManifest, target: &GpuManifest) -> Report {
    assert_restorable_with(source, target, &Options::default())
}

/// [`assert_restorable`] under `options` (offer mode, strict, skips).
#[track_caller]
pub fn assert_restorable_with(source: &GpuManifest, target: &GpuManifest, options: &Options) -> Report {
    let report = evaluate(source, target, options);
    if !report.compatible {
        let by: Vec<&str> = report.refusals().map(|r| r.check.as_str()).collect();
        panic!(
            "expected the restore to be accepted, but it was refused by {}\n\n{}",
            by.join(", "),
            table(&report)
        );
    }
    report
}

/// Asserts that `source` is refused on `target` in exact mode with default options, and that
/// `check` is among the checks that refused. On failure the message is the report's table.
///
/// ```
/// use miggate_compat::testing::{assert_refused_by, nodes};
/// use miggate_compat::CheckName;
///
/// // Seven legacy-named 1g.5gb slices of an A100 are not an L4.
/// let report = assert_refused_by(&nodes::a100_legacy(), &nodes::l4(), CheckName::MIG_PARTITIONING);
/// assert!(report.reason.contains("mig-partitioning: source slice x7, target whole x1"));
/// ```
#[track_caller]
pub fn assert_refused_by(source: &GpuManifest, target: &GpuManifest, check: CheckName) -> Report {
    assert_refused_by_with(source, target, check, &Options::default())
}

/// [`assert_refused_by`] under `options`.
#[track_caller]
pub fn assert_refused_by_with(
    source: &GpuManifest,
    target: &GpuManifest,
    check: CheckName,
    options: &Options,
) -> Report {
    let report = evaluate(source, target, options);
    let row = report.result(check);
    if row.is_some_and(|r| r.outcome == Outcome::Refuse) {
        return report;
    }
    let outcome = row.map_or("absent", |r| r.outcome.as_str());
    let verdict = if report.compatible {
        "it was accepted".to_string()
    } else {
        let by: Vec<&str> = report.refusals().map(|r| r.check.as_str()).collect();
        format!("it was refused by {} instead", by.join(", "))
    };
    panic!(
        "expected the restore to be refused by {check}, but {check} is {outcome} and {verdict}\n\n{}",
        table(&report)
    );
}

/// The report as `miggate check` prints it: one row per check with its outcome and both values
/// side by side, then the verdict, the reason, the device map and the warnings. Outside text is
/// escaped, so a hostile value cannot drive the terminal a test runs in.
///
/// ```
/// use miggate_compat::testing::{nodes, table};
/// use miggate_compat::{Options, evaluate};
///
/// let report = evaluate(&nodes::l4(), &nodes::h200_x8(), &Options::default());
/// let text = table(&report);
/// assert!(text.contains("gpu-model"));
/// assert!(text.contains("verdict:    refused"));
/// ```
pub fn table(report: &Report) -> String {
    let rows: Vec<[String; 4]> = report
        .results
        .iter()
        .map(|r| {
            [
                r.check.as_str().to_string(),
                r.outcome.as_str().to_string(),
                escape(&r.source).into_owned(),
                escape(&r.target).into_owned(),
            ]
        })
        .collect();
    let header = ["check", "outcome", "source", "target"].map(String::from);
    let mut widths = [0usize; 4];
    for row in std::iter::once(&header).chain(&rows) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let line = format!(
            "{:w0$}  {:w1$}  {:w2$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "mode:       {}", report.mode.as_str());
    let verdict = if report.compatible {
        "compatible"
    } else {
        "refused"
    };
    let _ = writeln!(out, "verdict:    {verdict}");
    if !report.reason.is_empty() {
        let _ = writeln!(out, "reason:     {}", escape(&report.reason));
    }
    let map = match report.device_map.as_deref() {
        None => "none".to_string(),
        Some("") => "identity (no --device-map needed)".to_string(),
        Some(map) => escape(map).into_owned(),
    };
    let _ = writeln!(out, "device map: {map}");
    for w in &report.warnings {
        let _ = writeln!(out, "warning:    {}", escape(&w.to_string()));
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn fixtures_build_read_back_and_restore_onto_themselves() {
        for node in [
            nodes::h100_mixed(),
            nodes::h200_x8(),
            nodes::a100_legacy(),
            nodes::l4(),
        ] {
            let back = crate::from_str(&node.to_yaml().unwrap()).unwrap();
            assert_eq!(back, node);
            assert_restorable(&node, &node);
        }
    }
}
