//! Flags of `miggate publish`.

use std::path::PathBuf;
use std::time::Duration;

use super::capture::CaptureSourceArgs;

/// Flags of `miggate publish`.
#[derive(Debug, clap::Args)]
pub struct PublishArgs {
    /// The node: the `GpuNode` is named after it (the DaemonSet passes `spec.nodeName`).
    #[arg(long, value_name = "NAME", env = "NODE_NAME")]
    pub node: String,
    /// Time between captures (`60s`, `5m`; a bare number is seconds); the `GpuNode` is
    /// written only when the inventory changed. A failed round is retried sooner, after a
    /// backoff from 1 s to at most 30 s (or this interval).
    #[arg(long, value_name = "DURATION", default_value = "60s",
          value_parser = crate::duration::DurationParser::seconds(5, 86400))]
    pub interval: Duration,
    /// The host's root as mounted here: boot recovery's state is read from
    /// `<root>/run/miggate/recovery.json` when present.
    #[arg(long, value_name = "PATH", default_value = "/")]
    pub root: PathBuf,
    /// The device plugin's MIG strategy on this node (`none`, `single`, `mixed`: its
    /// `migStrategy` setting), published in the inventory so `gpu-request` can judge
    /// `nvidia.com/gpu`. Unset: unknown, unless the node's GFD label `nvidia.com/mig.strategy`
    /// says it to the webhook.
    #[arg(long, value_name = "STRATEGY", env = "MIG_STRATEGY", value_parser = parse_strategy)]
    pub mig_strategy: Option<miggate_compat::MigStrategy>,
    /// How each capture reads the GPUs, as `miggate capture`.
    #[command(flatten)]
    pub source: CaptureSourceArgs,
    /// Which cluster the `GpuNode` is written to, as kubectl's flags say it.
    #[command(flatten)]
    pub cluster: super::cluster::ClusterFlags,
    /// Capture once and print the `GpuNode` a round would apply, then exit; no cluster is
    /// needed and nothing is written (as `kubectl apply --dry-run=client -o yaml`).
    #[arg(long)]
    pub once: bool,
    /// With `--once`: how the `GpuNode` is printed.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OnceOutput::Yaml, requires = "once")]
    pub output: OnceOutput,
}

/// `miggate publish --once -o`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum OnceOutput {
    /// The object as YAML, as `kubectl get -o yaml` prints it.
    Yaml,
    /// The object as JSON.
    Json,
}

/// `none`, `single` or `mixed`, as the device plugin spells them.
fn parse_strategy(text: &str) -> Result<miggate_compat::MigStrategy, String> {
    match text.trim() {
        "none" => Ok(miggate_compat::MigStrategy::None),
        "single" => Ok(miggate_compat::MigStrategy::Single),
        "mixed" => Ok(miggate_compat::MigStrategy::Mixed),
        other => Err(format!(
            "`{}` is not a MIG strategy; expected none, single or mixed",
            miggate_compat::escape::escape(other)
        )),
    }
}
