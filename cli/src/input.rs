//! Reading manifest files, with errors that name the file, and finishing output.

use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

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

/// Set when standard output was closed as the program started (`miggate check a b >&-`).
///
/// Looking at fd 1 in `main` cannot tell: before `main`, Rust's runtime opens `/dev/null` in
/// place of a closed standard stream, read-write, which is just what a caller that throws the
/// output away on purpose hands over (Python's `subprocess.DEVNULL`, Node's `'ignore'`), and
/// writes to a closed fd would be ignored anyway. So the fd is looked at earlier, by a
/// constructor the C runtime runs before Rust's start-up code.
static STDOUT_CLOSED_AT_START: AtomicBool = AtomicBool::new(false);

/// The constructor's entry: the one exception to the crate's no-unsafe rule, for the attribute
/// that places it (no unsafe block). It only asks the kernel about fd 1.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
#[used]
#[unsafe(link_section = ".init_array")]
static PROBE_STDOUT_AT_START: extern "C" fn() = probe_stdout_at_start;

#[cfg(target_os = "linux")]
extern "C" fn probe_stdout_at_start() {
    if fd_is_closed(rustix::stdio::stdout()) {
        STDOUT_CLOSED_AT_START.store(true, Ordering::Relaxed);
    }
}

fn fd_is_closed(fd: impl rustix::fd::AsFd) -> bool {
    matches!(rustix::io::fcntl_getfd(fd), Err(e) if e == rustix::io::Errno::BADF)
}

/// Whether standard output is closed, so a report would vanish while the exit status says it
/// was given. A closed pipe (`| head`) is not this: the reader had what it wanted.
pub fn stdout_is_closed() -> bool {
    STDOUT_CLOSED_AT_START.load(Ordering::Relaxed) || fd_is_closed(std::io::stdout())
}
