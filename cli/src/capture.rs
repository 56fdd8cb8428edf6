//! `miggate capture`.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use miggate_capture::{Error, capture};

use crate::flags::capture::{CaptureArgs, CaptureOutput};
use crate::input::closed_pipe_is_fine;

/// Captures this process's GPU facts and prints the manifest.
pub fn run(args: &CaptureArgs) -> anyhow::Result<ExitCode> {
    let options = args.source.options(args.node.clone());
    let manifest = capture(&options).map_err(|err| with_flags(err, args))?;
    // Serialise first, so a write failure is only ever an I/O failure.
    let text = match args.output {
        CaptureOutput::Json => Some(manifest.to_json()? + "\n"),
        CaptureOutput::Yaml => Some(manifest.to_yaml()?),
        CaptureOutput::Table => None,
    };
    let mut out = anstream::stdout().lock();
    let written = match &text {
        Some(text) => out.write_all(text.as_bytes()),
        None => crate::tree::write_tree(&mut out, &manifest),
    };
    closed_pipe_is_fine(written.and_then(|()| out.flush())).context("cannot write the manifest")?;
    Ok(ExitCode::SUCCESS)
}

/// The library's error, with the flag that would change the outcome where there is one: the
/// library says what happened, only the CLI knows its flags.
fn with_flags(err: Error, args: &CaptureArgs) -> anyhow::Error {
    let hint = if err.is_timeout() {
        Some(format!(
            "--timeout {} bounds the whole capture, retries included; raise it if the GPUs are slow to answer",
            crate::duration::shown(args.source.timeout)
        ))
    } else if err.is_not_found() {
        Some("name the binary with --nvidia-smi or MIGGATE_NVIDIA_SMI".to_string())
    } else if matches!(err, Error::NvmlUnavailable { .. }) {
        Some("name the library with --nvml-library, or use --backend nvidia-smi".to_string())
    } else {
        None
    };
    match hint {
        Some(hint) => anyhow::anyhow!("capture failed: {err} ({hint})"),
        None => anyhow::anyhow!("capture failed: {err}"),
    }
}
