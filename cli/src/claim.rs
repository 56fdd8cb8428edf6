//! `miggate claim`: a checkpoint's GPU shape as a DRA `ResourceClaimTemplate`, for the
//! scheduler to place a restore where the checkpoint's devices exist.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;

use crate::flags::claim::{ClaimArgs, ClaimOutput};

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
