//! `miggate crds`: the CustomResourceDefinitions of miggate's resources, ready for
//! `miggate crds | kubectl apply -f -`.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;

/// Prints every CRD as one YAML stream, documents separated by `---`.
pub fn run() -> anyhow::Result<ExitCode> {
    let yaml = miggate_crds::crds_yaml()?;
    let mut out = std::io::stdout().lock();
    out.write_all(yaml.as_bytes())
        .and_then(|()| out.flush())
        .context("cannot write the CRDs to standard output")?;
    Ok(ExitCode::SUCCESS)
}
