//! Flags of `miggate claim`.

use std::path::PathBuf;

/// Flags of `miggate claim`.
#[derive(Debug, clap::Args)]
pub struct ClaimArgs {
    /// The checkpoint: a file (a manifest, a GpuCheckpoint object or a Go peer artifact; `-`
    /// reads standard input), or, with `-n` and no such file, a checkpoint in the cluster: a
    /// GpuCheckpoint's name (`NAME`, `gpucheckpoint/NAME`) or `podsnapshot/NAME` for the Go
    /// peer's.
    pub checkpoint: PathBuf,
    /// The namespace the template is written into (its `metadata.namespace`, as `kubectl
    /// create -n`), and where a checkpoint named instead of a file is read from.
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Which cluster, as kubectl takes it (with `-n`).
    #[command(flatten)]
    pub cluster: super::cluster::ClusterFlags,
    /// How strictly the checkpoint is read (`--validate`).
    #[command(flatten)]
    pub read: super::read::ReadArgs,
    /// The template's name, what a restore pod's `resourceClaims[].resourceClaimTemplateName`
    /// names.
    #[arg(long, default_value = "miggate-restore")]
    pub name: String,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = ClaimOutput::Yaml)]
    pub output: ClaimOutput,
}

/// `miggate claim -o`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ClaimOutput {
    /// The template as YAML (`kubectl apply -f -`).
    Yaml,
    /// The template as JSON.
    Json,
}
