//! `miggate doctor`: walks the install on the cluster (`miggate_doctor`) and prints one line per
//! check. Exit status: 0 nothing fails (warnings allowed), 1 something fails, 2 bad input (no
//! usable kubeconfig).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::flags::doctor::{DoctorArgs, DoctorOutput};

/// The whole walk's bound: every read and the probe, one after another.
const TIMEOUT: Duration = Duration::from_secs(90);

pub fn run(args: &DoctorArgs) -> anyhow::Result<ExitCode> {
    let options = miggate_doctor::Options {
        namespace: args.namespace.clone(),
        probe_namespace: args.probe_namespace.clone(),
        probe: !args.no_probe,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the client's runtime")?;
    let report = runtime.block_on(async {
        let client = miggate_store::cluster::client(args.cluster.args()).await?;
        let cluster = tokio::time::timeout(TIMEOUT, miggate_doctor::gather(&client, &options))
            .await
            .map_err(|_| anyhow::anyhow!("the cluster did not answer within {} s", TIMEOUT.as_secs()))?;
        anyhow::Ok(miggate_doctor::diagnose(&cluster))
    })?;
    let text = match args.output {
        DoctorOutput::Text => report.text(),
        DoctorOutput::Json => report.json(),
    };
    let mut out = anstream::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("cannot write the report to standard output")?;
    Ok(if report.worst() == miggate_doctor::Status::Fail {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
