//! `miggate publish`: keeps this node's `GpuNode` current until SIGTERM.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use miggate_capture::{Backend, Options};
use miggate_publish::{Capture, Config, Publisher};

use crate::cli::BackendArg;

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
    /// As `miggate capture --backend`.
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    pub backend: BackendArg,
    /// As `miggate capture --nvidia-smi`.
    #[arg(long, value_name = "PATH", env = "MIGGATE_NVIDIA_SMI")]
    pub nvidia_smi: Option<PathBuf>,
    /// As `miggate capture --nvml-library`.
    #[arg(long, value_name = "PATH")]
    pub nvml_library: Option<PathBuf>,
    /// As `miggate capture --timeout`: seconds one capture may take.
    #[arg(long, value_name = "SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: u64,
}

/// Publishes until SIGTERM or Ctrl-C, then exits 0.
pub fn run(args: &PublishArgs) -> anyhow::Result<ExitCode> {
    crate::webhook::init_logging();
    let capture = Capture(Options {
        backend: match args.backend {
            BackendArg::Auto => Backend::Auto,
            BackendArg::Nvml => Backend::Nvml,
            BackendArg::NvidiaSmi => Backend::NvidiaSmi,
        },
        nvidia_smi: args.nvidia_smi.clone(),
        nvml_library: args.nvml_library.clone(),
        node_name: Some(args.node.clone()),
        timeout: Some(Duration::from_secs(args.timeout)),
    });
    let config = Config {
        node: args.node.clone(),
        interval: Duration::from_secs(args.interval),
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
