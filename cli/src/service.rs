//! What the long-running commands (`webhook`, `publish`) share: logging and the stop signal
//! (the kubectl flags that name a cluster are `flags::cluster`'s).

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
/// Lines are formatted where they happen and written in batches by a flusher thread
/// ([`crate::log_writer`]): a request never waits on a `write(2)`, and a line reaches stderr
/// within 20 ms. Keep the guard until exit: dropping it writes the rest. Without a thread
/// (the system refuses one), lines go straight to stderr.
#[must_use = "dropping the guard stops the log writer"]
pub(crate) fn init_logging() -> Option<crate::log_writer::Guard> {
    match crate::log_writer::batched(std::io::stderr()) {
        Ok((writer, guard)) => {
            install_subscriber(writer);
            Some(guard)
        }
        Err(_) => {
            install_subscriber(std::io::stderr);
            None
        }
    }
}

/// The subscriber over `writer`: JSON lines when `MIGGATE_LOG_FORMAT=json`; otherwise text,
/// coloured on a terminal, and else written by [`crate::log_format`]'s cheaper, identical
/// fields.
fn install_subscriber<W>(writer: W)
where
    W: for<'a> tracing_subscriber::fmt::MakeWriter<'a> + Send + Sync + 'static,
{
    let filter = tracing_subscriber::EnvFilter::try_from_env("MIGGATE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let json = std::env::var("MIGGATE_LOG_FORMAT").is_ok_and(|f| f == "json");
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_timer(crate::log_format::Rfc3339Micros)
        .with_writer(writer);
    // An error here means a subscriber is set already (a test's): that one keeps logging.
    let _ = if json {
        builder.json().try_init()
    } else if ansi {
        builder.try_init()
    } else {
        builder.fmt_fields(crate::log_format::PlainFields).try_init()
    };
}
