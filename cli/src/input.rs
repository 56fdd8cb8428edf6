//! Reading manifest files, with errors that name the file, and finishing output.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, bail};
use miggate_compat::escape::escape;
use miggate_compat::{GpuManifest, MAX_MANIFEST_BYTES};

/// Reads a manifest from a path (`-` is standard input), refusing oversized input before
/// reading it all. Errors quote the path escaped: a file name can hold escape sequences.
pub fn read_manifest(path: &Path, role: &str) -> anyhow::Result<GpuManifest> {
    let shown = path.display().to_string();
    let shown = escape(&shown);
    let mut bytes = Vec::new();
    let limit = u64::try_from(MAX_MANIFEST_BYTES).unwrap_or(u64::MAX) + 1;
    if path == Path::new("-") {
        std::io::stdin()
            .take(limit)
            .read_to_end(&mut bytes)
            .with_context(|| format!("cannot read {role} manifest from standard input"))?;
    } else {
        let file =
            std::fs::File::open(path).with_context(|| format!("cannot open {role} manifest {shown}"))?;
        file.take(limit)
            .read_to_end(&mut bytes)
            .with_context(|| format!("cannot read {role} manifest {shown}"))?;
    }
    if bytes.len() > MAX_MANIFEST_BYTES {
        bail!("{role} manifest {shown} is over the {MAX_MANIFEST_BYTES}-byte limit");
    }
    miggate_compat::from_slice(&bytes).with_context(|| format!("{role} manifest {shown}"))
}

/// The result of writing to standard output, with a reader that stopped early (`| head`) not
/// counted as a failure: what was asked for is done, and the exit status still carries it.
pub fn closed_pipe_is_fine(written: std::io::Result<()>) -> std::io::Result<()> {
    match written {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}
