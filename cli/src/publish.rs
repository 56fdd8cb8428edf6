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
    /// Time between captures (`60s`, `5m`; a bare number is seconds); the `GpuNode` is
    /// written only when the inventory changed.
    #[arg(long, value_name = "DURATION", default_value = "60s",
          value_parser = crate::duration::DurationParser::seconds(5, 86400))]
    pub interval: Duration,
    /// The host's root as mounted here: boot recovery's state is read from
    /// `<root>/run/miggate/recovery.json` when present.
    #[arg(long, value_name = "PATH", default_value = "/")]
    pub root: PathBuf,
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
        interval: args.interval,
        root: args.root.clone(),
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
