//! `miggate claim`: a checkpoint's GPU shape as a DRA `ResourceClaimTemplate`, for the
//! scheduler to place a restore where the checkpoint's devices exist.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

/// Flags of `miggate claim`.
#[derive(Debug, clap::Args)]
pub struct ClaimArgs {
    /// The checkpoint: a manifest, a GpuCheckpoint object or a Go peer artifact; `-` reads
    /// standard input. With `-n`, a checkpoint in the cluster: a GpuCheckpoint's name, or
    /// `podsnapshot/NAME` for the Go peer's.
    pub checkpoint: PathBuf,
    /// Read the checkpoint from the cluster, in NAMESPACE.
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Which cluster, as kubectl takes it (with `-n`).
    #[command(flatten)]
    pub cluster: crate::service::ClusterFlags,
    /// How strictly the checkpoint is read (`--validate`).
    #[command(flatten)]
    pub read: crate::args::ReadArgs,
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

/// Prints the template. Exit status: 0 written, 2 a checkpoint that cannot be claimed.
pub fn run(args: &ClaimArgs) -> anyhow::Result<ExitCode> {
    let manifest = match &args.namespace {
        Some(ns) => {
            crate::cluster_read::named_checkpoint(&args.cluster, ns, &args.checkpoint.to_string_lossy())?.0
        }
        None => crate::place::read_checkpoint(&args.checkpoint, args.read.options())?,
    };
    let template = miggate_crds::claim::claim_template(&args.name, &manifest)?;
    let text = match args.output {
        ClaimOutput::Yaml => {
            serde_saphyr::to_string(&template).context("cannot write the template as YAML")?
        }
        ClaimOutput::Json => {
            let mut json =
                serde_json::to_string_pretty(&template).context("cannot write the template as JSON")?;
            json.push('\n');
            json
        }
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("cannot write the template to standard output")?;
    Ok(ExitCode::SUCCESS)
}
