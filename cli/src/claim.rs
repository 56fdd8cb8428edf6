//! `miggate claim`: a checkpoint's GPU shape as a DRA `ResourceClaimTemplate`, for the
//! scheduler to place a restore where the checkpoint's devices exist.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;

use crate::flags::claim::{ClaimArgs, ClaimOutput};

/// Prints the template. Exit status: 0 written, 2 a checkpoint that cannot be claimed.
pub fn run(args: &ClaimArgs) -> anyhow::Result<ExitCode> {
    // As `kubectl create -f FILE -n NS`: a file (or `-`) is read as a file and `-n` is where
    // the template goes; only what is not a file names a checkpoint in the cluster.
    let is_file = args.checkpoint.as_os_str() == "-" || args.checkpoint.is_file();
    let manifest = match &args.namespace {
        Some(ns) if !is_file => {
            crate::cluster_read::named_checkpoint(&args.cluster, ns, &args.checkpoint.to_string_lossy())?.0
        }
        _ => crate::place::read_checkpoint(&args.checkpoint, args.read.options())?,
    };
    let mut template = miggate_crds::claim::claim_template(&args.name, &manifest)?;
    template.metadata.namespace.clone_from(&args.namespace);
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
