//! `miggate publish`: keeps this node's `GpuNode` current until SIGTERM.

use std::process::ExitCode;

use anyhow::Context;
use miggate_publish::{Capture, Config, Publisher};

use crate::flags::publish::{OnceOutput, PublishArgs};

/// Prints the `GpuNode` one round would apply.
fn once(args: &PublishArgs) -> anyhow::Result<ExitCode> {
    if crate::input::stdout_is_closed() {
        anyhow::bail!("standard output is closed: the GpuNode would be lost");
    }
    let manifest = miggate_capture::capture(&args.source.options(Some(args.node.clone())))
        .map_err(|e| anyhow::anyhow!("capture failed: {e}"))?;
    let object = miggate_publish::node_object(&args.node, manifest);
    let mut out = anstream::stdout().lock();
    let written = match args.output {
        OnceOutput::Yaml => crate::check::write_yaml(&mut out, &object),
        OnceOutput::Json => crate::check::write_json(&mut out, &object),
    };
    crate::input::closed_pipe_is_fine(written.and_then(|()| std::io::Write::flush(&mut out)))
        .context("cannot write the GpuNode")?;
    Ok(ExitCode::SUCCESS)
}

/// Publishes until SIGTERM or Ctrl-C, then exits 0.
pub fn run(args: &PublishArgs) -> anyhow::Result<ExitCode> {
    if args.once {
        return once(args);
    }
    let _log = crate::service::init_logging();
    let capture = Capture(args.source.options(Some(args.node.clone())));
    let config = Config {
        node: args.node.clone(),
        interval: args.interval,
        root: args.root.clone(),
        mig_strategy: args.mig_strategy,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(async {
        let client = miggate_store::cluster::client(args.cluster.args()).await?;
        let stop = async {
            let signal = crate::service::stop_signal().await;
            tracing::info!("{signal} received; stopping");
        };
        Publisher::new(client, config, capture).run(stop).await;
        Ok::<_, anyhow::Error>(())
    });
    // A capture abandoned by the stop still runs on a blocking thread (a hung nvidia-smi,
    // up to --timeout): dropping the runtime would wait for it, past the pod's grace period.
    // Nothing it returns is needed, so the runtime is not waited for.
    runtime.shutdown_background();
    result?;
    Ok(ExitCode::SUCCESS)
}
