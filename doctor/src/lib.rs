//! `miggate doctor`: walks an install of miggate and says, one line per check, what passes (✔),
//! what is only at risk (⚠) and what is failing (✖), with a hint naming the command or value
//! that fixes it.
//!
//! Two halves, as kube-rs splits I/O from logic: [`gather`] reads the cluster once into a
//! [`Cluster`] (every read's error kept as the finding it becomes), and [`checks`] judges that
//! value without I/O, so every verdict is tested from objects built in memory. The one write
//! is the probe: a server-side dry run of a restore pod of a checkpoint that does not exist,
//! which the API server must send to the webhook and the webhook must refuse. Nothing is
//! stored.

use std::fmt::Write as _;

use miggate_compat::escape::escape_within;
use serde::Serialize;

pub mod checks;
mod gather;
pub mod install;
pub mod selector;

pub use gather::{Cluster, Options, Probe, Replica, Serving, gather};

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// As it should be.
    Pass,
    /// Working now, but at risk (a certificate near renewal, a partial inventory).
    Warn,
    /// Broken: restores are refused, or pass unchecked, or will.
    Fail,
}

impl Status {
    /// The mark a line starts with.
    pub fn mark(self) -> &'static str {
        match self {
            Status::Pass => "✔",
            Status::Warn => "⚠",
            Status::Fail => "✖",
        }
    }
}

/// What a check is about, as the lines group them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Area {
    /// The API server is reachable with these credentials.
    Cluster,
    /// The CRDs of GpuCheckpoint and GpuNode.
    Crds,
    /// The webhook's Deployment and each replica's readiness.
    Webhook,
    /// The webhook configurations.
    Configurations,
    /// The serving certificate.
    Certificate,
    /// The replicas' watch caches.
    Caches,
    /// The API server calls the webhook: the dry-run probe.
    Probe,
    /// GPU nodes and their inventory sources.
    Nodes,
    /// The ValidatingAdmissionPolicies.
    Policies,
    /// Which namespaces the gate and the policies cover.
    Tenants,
}

impl Area {
    /// The area's name, as lines and JSON say it.
    pub fn as_str(self) -> &'static str {
        match self {
            Area::Cluster => "cluster",
            Area::Crds => "crds",
            Area::Webhook => "webhook",
            Area::Configurations => "configurations",
            Area::Certificate => "certificate",
            Area::Caches => "caches",
            Area::Probe => "probe",
            Area::Nodes => "nodes",
            Area::Policies => "policies",
            Area::Tenants => "tenants",
        }
    }
}

/// One check's outcome: one line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What it is about.
    pub area: Area,
    /// How it came out.
    pub status: Status,
    /// What was found, in a sentence; names from the cluster are escaped.
    pub message: String,
    /// For a warning or a failure: the command or value that fixes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// Names from the cluster (namespaces, nodes, messages of other components) are cut to this
/// many bytes in a line, escaped: a tenant's namespace name reaches an admin's terminal.
pub const MAX_NAME_BYTES: usize = 256;

/// `text` escaped and cut for a line of the report.
pub fn quoted(text: &str) -> String {
    escape_within(text, MAX_NAME_BYTES).into_owned()
}

impl Finding {
    /// A passing check.
    pub fn pass(area: Area, message: impl Into<String>) -> Self {
        Finding {
            area,
            status: Status::Pass,
            message: message.into(),
            hint: None,
        }
    }

    /// A check at risk, with its fix.
    pub fn warn(area: Area, message: impl Into<String>, hint: impl Into<String>) -> Self {
        Finding {
            area,
            status: Status::Warn,
            message: message.into(),
            hint: Some(hint.into()),
        }
    }

    /// A failing check, with its fix.
    pub fn fail(area: Area, message: impl Into<String>, hint: impl Into<String>) -> Self {
        Finding {
            area,
            status: Status::Fail,
            message: message.into(),
            hint: Some(hint.into()),
        }
    }
}

/// Every finding of one run, in the order the checks ran.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The findings.
    pub findings: Vec<Finding>,
}

impl Report {
    /// The worst status found; `Pass` for an empty report.
    pub fn worst(&self) -> Status {
        self.findings
            .iter()
            .map(|f| f.status)
            .max()
            .unwrap_or(Status::Pass)
    }

    /// How many findings have `status`.
    pub fn count(&self, status: Status) -> usize {
        self.findings.iter().filter(|f| f.status == status).count()
    }

    /// One line per finding (`✔ area  message`), each hint on the line below, and a summary.
    pub fn text(&self) -> String {
        let width = self
            .findings
            .iter()
            .map(|f| f.area.as_str().len())
            .max()
            .unwrap_or(0);
        let mut out = String::new();
        for f in &self.findings {
            let _ = writeln!(
                out,
                "{} {:width$}  {}",
                f.status.mark(),
                f.area.as_str(),
                f.message
            );
            if let Some(hint) = &f.hint {
                let _ = writeln!(out, "  {:width$}  hint: {hint}", "");
            }
        }
        let _ = writeln!(
            out,
            "{} passed, {} at risk, {} failed",
            self.count(Status::Pass),
            self.count(Status::Warn),
            self.count(Status::Fail)
        );
        out
    }

    /// The findings as JSON, for scripts: `{"findings": [...], "passed": N, "warned": N,
    /// "failed": N}`.
    pub fn json(&self) -> String {
        let value = serde_json::json!({
            "findings": self.findings,
            "passed": self.count(Status::Pass),
            "warned": self.count(Status::Warn),
            "failed": self.count(Status::Fail),
        });
        let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
        text.push('\n');
        text
    }
}

/// Walks the install: every check on what [`gather`] read.
pub fn diagnose(cluster: &Cluster) -> Report {
    let mut findings = Vec::new();
    checks::all(cluster, &mut findings);
    Report { findings }
}
