//! Flags of `miggate check`, and the output formats `where` shares.

use std::path::PathBuf;

use clap::ValueEnum;

use super::policy::PolicyArgs;
use super::read::ReadArgs;

/// Flags of `miggate check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The checkpoint's manifest (JSON or YAML); `-` reads standard input. With `-n`, a
    /// checkpoint in the cluster: a GpuCheckpoint's name, or `podsnapshot/NAME` for the Go
    /// peer's.
    pub source: PathBuf,
    /// The target's manifest: a restore container's devices (exact) or a node inventory
    /// (offer). Not with `--node`.
    #[arg(required_unless_present = "node", conflicts_with = "node")]
    pub target: Option<PathBuf>,
    /// Read the checkpoint from the cluster: SOURCE in NAMESPACE.
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// The target is this node of the cluster, its inventory read as the webhook reads it
    /// (GpuNode, ResourceSlices, GFD labels), compared in offer mode.
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// Which cluster, as kubectl takes it (with `-n` or `--node`).
    #[command(flatten)]
    pub cluster: crate::flags::cluster::ClusterFlags,
    /// exact: the target is what a restore container got; offer: a node's whole inventory.
    #[arg(long, value_enum, default_value_t = ModeArg::Exact)]
    pub mode: ModeArg,
    /// Which facts the target has: pod (a pod not yet bound), node (a node inventory), all
    /// (a restore container on its node). Checks outside it are not applicable. Default:
    /// inferred, node when the target has no `pod`, else all.
    #[arg(long, value_enum, value_name = "SCOPE")]
    pub target_scope: Option<ScopeArg>,
    /// The policy: strict, skips, floors.
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// How unknown fields in the manifests are read.
    #[command(flatten)]
    pub read: ReadArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = CheckOutput::Table)]
    pub output: CheckOutput,
}

/// `--target-scope`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ScopeArg {
    /// A pod not yet bound to a node: pod facts only.
    Pod,
    /// A node's inventory: host and GPU facts.
    Node,
    /// A restore container on its node: every fact.
    All,
}

/// `--mode`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ModeArg {
    /// Equal device sets.
    Exact,
    /// The target must be able to offer a matching set.
    Offer,
}

/// `miggate check -o` and `miggate where -o`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CheckOutput {
    /// A table for people (`text`, its name before, still reads).
    #[value(alias = "text")]
    Table,
    /// The JSON report for scripts.
    Json,
    /// The same report as YAML.
    Yaml,
    /// The table with more to show: every value whole on one line (`check`); every refusal and
    /// the device map of each node (`where`).
    Wide,
}
