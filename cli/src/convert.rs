//! `miggate convert`: a manifest, or a Go peer artifact translated, printed as miggate's.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;

use crate::flags::convert::{ConvertArgs, ConvertOutput};
use crate::input::{closed_pipe_is_fine, read_manifest, stdout_is_closed};

/// Reads the file (the reader recognises the peer's artifacts by shape) and prints it.
pub fn run(args: &ConvertArgs) -> anyhow::Result<ExitCode> {
    if stdout_is_closed() {
        anyhow::bail!("standard output is closed: the manifest would be lost");
    }
    let manifest = read_manifest(&args.file, "input", args.read.options())?.manifest;
    let text = match args.output {
        ConvertOutput::Table => {
            let mut out = anstream::stdout().lock();
            closed_pipe_is_fine(crate::tree::write_tree(&mut out, &manifest).and_then(|()| out.flush()))
                .context("cannot write the manifest")?;
            return Ok(ExitCode::SUCCESS);
        }
        ConvertOutput::Yaml => manifest.to_yaml()?,
        ConvertOutput::Json => {
            // The JSON writer that escapes what a terminal would act on, as `check -o json`.
            let mut out = Vec::new();
            let mut json =
                serde_json::Serializer::with_formatter(&mut out, crate::check::TerminalSafe::default());
            serde::Serialize::serialize(&manifest.to_value()?, &mut json)?;
            out.push(b'\n');
            String::from_utf8(out).context("JSON output is not UTF-8")?
        }
    };
    let mut out = anstream::stdout().lock();
    closed_pipe_is_fine(out.write_all(text.as_bytes()).and_then(|()| out.flush()))
        .context("cannot write the manifest")?;
    Ok(ExitCode::SUCCESS)
}
