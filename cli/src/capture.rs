//! `miggate capture`.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use miggate_capture::{Backend, Options, capture};

use crate::cli::{BackendArg, CaptureArgs, CaptureOutput};

/// Captures this process's GPU facts and prints the manifest.
pub fn run(args: &CaptureArgs) -> anyhow::Result<ExitCode> {
    let options = Options {
        backend: match args.backend {
            BackendArg::Auto => Backend::Auto,
            BackendArg::Nvml => Backend::Nvml,
            BackendArg::NvidiaSmi => Backend::NvidiaSmi,
        },
        nvidia_smi: args.nvidia_smi.clone(),
        nvml_library: args.nvml_library.clone(),
        node_name: args.node.clone(),
        timeout: Some(Duration::from_secs(args.timeout)),
    };
    let manifest = capture(&options).context("capture failed")?;
    let mut out = anstream::stdout().lock();
    let written = match args.output {
        CaptureOutput::Json => manifest
            .to_json()
            .map_err(anyhow::Error::from)
            .and_then(|t| Ok(writeln!(out, "{t}")?)),
        CaptureOutput::Yaml => manifest
            .to_yaml()
            .map_err(anyhow::Error::from)
            .and_then(|t| Ok(write!(out, "{t}")?)),
        CaptureOutput::Table => crate::tree::write_tree(&mut out, &manifest).map_err(anyhow::Error::from),
    };
    match written {
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) => {}
        other => other.context("cannot write the manifest")?,
    }
    out.flush().ok();
    Ok(ExitCode::SUCCESS)
}
