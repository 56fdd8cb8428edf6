//! What the long-running commands (`webhook`, `publish`) share: logging, the stop signal, and
//! the kubectl flags that name a cluster.

use std::path::PathBuf;

/// `--kubeconfig` and `--context`, as kubectl takes them; the loading is kube's own
/// ([`miggate_webhook::cluster`]).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClusterFlags {
    /// The kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else the pod's service
    /// account).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current-context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

impl ClusterFlags {
    /// The flags as the cluster module takes them.
    pub fn args(&self) -> miggate_webhook::cluster::ClusterArgs<'_> {
        miggate_webhook::cluster::ClusterArgs {
            kubeconfig: self.kubeconfig.as_deref(),
            context: self.context.as_deref(),
        }
    }
}

/// Resolves on SIGTERM (Kubernetes stopping the pod) or SIGINT, with the signal's name; the
/// command logs it under its own name.
pub(crate) async fn stop_signal() -> &'static str {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot watch SIGTERM; stop with Ctrl-C");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = term => "SIGTERM",
        _ = tokio::signal::ctrl_c() => "SIGINT",
    }
}

/// Logs to stderr; `MIGGATE_LOG` sets the filter (default `info`), `MIGGATE_LOG_FORMAT=json`
/// writes one JSON object per line for log collectors.
///
/// Lines are formatted where they happen and written by a worker thread through a buffer,
/// flushed whenever it has nothing more to write: a request never waits on a `write(2)`, and
/// under load many lines share one. The writer is not lossy: when the queue is full, logging
/// waits rather than dropping a line. Keep the guard until exit: dropping it flushes the rest.
#[must_use = "dropping the guard stops the log writer"]
pub(crate) fn init_logging() -> tracing_appender::non_blocking::WorkerGuard {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MIGGATE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(false)
        .thread_name("miggate-log")
        .finish(std::io::BufWriter::new(std::io::stderr()));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(writer);
    let _ = if std::env::var("MIGGATE_LOG_FORMAT").is_ok_and(|f| f == "json") {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
    guard
}
