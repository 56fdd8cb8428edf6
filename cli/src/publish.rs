//! `miggate publish`: keeps this node's `GpuNode` current until SIGTERM.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use miggate_publish::{Capture, Config, Publisher};

use crate::cli::CaptureSourceArgs;

/// Flags of `miggate publish`.
#[derive(Debug, clap::Args)]
pub struct PublishArgs {
    /// The node: the `GpuNode` is named after it (the DaemonSet passes `spec.nodeName`).
    #[arg(long, value_name = "NAME", env = "NODE_NAME")]
    pub node: String,
    /// Seconds between captures; the `GpuNode` is written only when the inventory changed.
    #[arg(long, value_name = "SECONDS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(5..=86400))]
    pub interval: u64,
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
}

/// Publishes until SIGTERM or Ctrl-C, then exits 0.
pub fn run(args: &PublishArgs) -> anyhow::Result<ExitCode> {
    crate::webhook::init_logging();
    let capture = Capture(args.source.options(Some(args.node.clone())));
    let config = Config {
        node: args.node.clone(),
        interval: Duration::from_secs(args.interval),
        root: args.root.clone(),
        mig_strategy: args.mig_strategy,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(async {
        let client = miggate_publish::infer_client().await?;
        Publisher::new(client, config, capture)
            .run(crate::webhook::stop_signal())
            .await;
        Ok::<_, miggate_publish::Error>(())
    });
    // A capture abandoned by the stop still runs on a blocking thread (a hung nvidia-smi,
    // up to --timeout): dropping the runtime would wait for it, past the pod's grace period.
    // Nothing it returns is needed, so the runtime is not waited for.
    runtime.shutdown_background();
    result?;
    Ok(ExitCode::SUCCESS)
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
