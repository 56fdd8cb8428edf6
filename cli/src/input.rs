//! Reading manifest files, with errors that name the file, and finishing output.

use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{anyhow, bail};
use miggate_compat::escape::escape;
use miggate_compat::{MAX_MANIFEST_BYTES, ReadOptions};
use miggate_crds::{Stored, StoredKind, read_stored_with};

/// Reads a manifest from a path (`-` is standard input): a manifest document, a
/// `GpuCheckpoint` or `GpuNode` object as `kubectl get … -o yaml` prints it, or a Go peer
/// artifact. Oversized input is refused before it is all read. Errors quote the path escaped
/// (a file name can hold escape sequences), and say once what failed.
pub fn read_manifest(path: &Path, role: &str, options: ReadOptions) -> anyhow::Result<Stored> {
    let shown = if path == Path::new("-") {
        "from standard input".into()
    } else {
        escape(&path.display().to_string()).into_owned()
    };
    let mut bytes = Vec::new();
    let limit = u64::try_from(MAX_MANIFEST_BYTES).unwrap_or(u64::MAX) + 1;
    if path == Path::new("-") {
        std::io::stdin()
            .take(limit)
            .read_to_end(&mut bytes)
            .map_err(|e| anyhow!("cannot read {role} manifest {shown}: {}", io_why(&e)))?;
    } else {
        let file = std::fs::File::open(path)
            .map_err(|e| anyhow!("cannot open {role} manifest {shown}: {}", io_why(&e)))?;
        file.take(limit)
            .read_to_end(&mut bytes)
            .map_err(|e| anyhow!("cannot read {role} manifest {shown}: {}", io_why(&e)))?;
    }
    if bytes.len() > MAX_MANIFEST_BYTES {
        bail!("{role} manifest {shown} is over the {MAX_MANIFEST_BYTES}-byte limit");
    }
    let Ok(text) = std::str::from_utf8(&bytes) else {
        // Not text: compat's reader says where the first invalid byte is.
        let manifest = miggate_compat::from_slice_with(&bytes, options)
            .map_err(|e| anyhow!("{role} manifest {shown}: {e}"))?;
        return Ok(Stored {
            manifest,
            container_name: None,
            name: None,
            namespace: None,
            kind: StoredKind::Manifest,
        });
    };
    read_stored_with(text, options).map_err(|e| match e {
        miggate_crds::Error::Manifest(miggate_compat::Error::UnknownField { .. }) => {
            anyhow!("{role} manifest {shown}: {e} (--validate=warn reads it with a warning)")
        }
        other => anyhow!("{role} manifest {shown}: {other}"),
    })
}

/// An I/O error in words, once: `No such file or directory`, without the `(os error 2)` a
/// person has no use for.
pub fn io_why(error: &std::io::Error) -> String {
    let text = error.to_string();
    match text.rsplit_once(" (os error ") {
        Some((words, _)) => words.to_string(),
        None => text,
    }
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
