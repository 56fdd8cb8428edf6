//! The errors of this crate.
//!
//! Every message that quotes outside text (nvidia-smi's output, a path, a command line, a UUID,
//! a library's message) quotes it through [`escape`], which neutralises terminal controls and cuts
//! it to 4 KiB saying how much was cut: an error is printed to an operator's terminal, and
//! neither a hostile nvidia-smi nor a flood of output may drive that terminal or its logs. The
//! fields keep the text unchanged for callers that want to look at it.
//!
//! These messages say what happened, never which flag to change: the library has no flags. The
//! `miggate` CLI adds that context.

use std::path::{Path, PathBuf};
use std::time::Duration;

use miggate_compat::escape::escape;
pub use miggate_smi::{RunError, Stream};

/// What went wrong capturing GPU facts. Every variant says what failed and keeps the text a
/// person needs to act on it (nvidia-smi's own words, the line that did not parse).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// What nvidia-smi printed says it failed (no devices, a driver it cannot reach, …), or its
    /// output could not be read; `miggate-smi`'s error, unchanged, so a caller can tell which.
    #[error(transparent)]
    Smi(miggate_smi::Error),
    /// A UUID that is not in a form nvidia-smi prints (`GPU-<id>`, `MIG-<id>`,
    /// `MIG-GPU-<id>/<gi>/<ci>`), or not of the kind expected where it was read. Such a UUID
    /// could carry a separator into cuda-checkpoint's device map, so it is never recorded.
    #[error("{at}: {error}")]
    InvalidUuid {
        /// Where it was read: the command and line (`` `nvidia-smi -L` line 3 ``), or the NVML
        /// call and device.
        at: String,
        /// Why it is refused; its message quotes the UUID escaped.
        error: miggate_compat::Error,
    },
    /// Running a command failed: not found, not started, killed at the deadline, too much
    /// output, killed by a signal.
    #[error(transparent)]
    Run(#[from] RunError),
    /// A command that exited non-zero with output none of the known failures match.
    #[error("`{}` failed ({status}): {}", escape(.command), escape(.output))]
    Failed {
        /// The nvidia-smi command that failed: program and arguments, joined by spaces.
        command: String,
        /// The exit status, as text.
        status: String,
        /// Its stdout and stderr.
        output: String,
    },
    /// Neither backend is there: NVML does not load and no nvidia-smi can be found.
    #[error(
        "no NVIDIA driver here: NVML is not available ({}) and nvidia-smi was not found at {}",
        escape(.nvml),
        shown(.nvidia_smi)
    )]
    NoDriver {
        /// Why NVML did not load.
        nvml: String,
        /// Where nvidia-smi was looked for.
        nvidia_smi: PathBuf,
    },
    /// The NVML library could not be loaded or initialised.
    #[error("NVML is not available: {}", escape(.message))]
    NvmlUnavailable {
        /// The loader's or NVML's message.
        message: String,
    },
    /// An NVML call failed.
    #[error("NVML call {call} failed: {}", escape(.message))]
    Nvml {
        /// The NVML function.
        call: &'static str,
        /// NVML's message.
        message: String,
    },
    /// The NVML read did not return before the capture's deadline (a wedged GPU can hang NVML
    /// calls); its thread stays blocked in the driver until the process exits.
    #[error("the NVML read did not return within the capture's {} deadline", seconds(*.limit))]
    NvmlTimeout {
        /// The capture's whole limit.
        limit: Duration,
    },
}

/// nvidia-smi's errors, with a refused UUID lifted to [`Error::InvalidUuid`]: the same fact from
/// either backend is one variant here.
impl From<miggate_smi::Error> for Error {
    fn from(e: miggate_smi::Error) -> Error {
        match e {
            miggate_smi::Error::InvalidUuid { at, error } => Error::InvalidUuid { at, error },
            e => Error::Smi(e),
        }
    }
}

impl Error {
    /// Whether the capture ran out of time: a command killed at the deadline, one that could not
    /// start before it, or an NVML read that did not return. A caller may offer a longer limit.
    pub fn is_timeout(&self) -> bool {
        match self {
            Error::NvmlTimeout { .. } => true,
            Error::Run(e) => e.is_timeout(),
            _ => false,
        }
    }

    /// Whether no nvidia-smi binary could be found (and, for [`Error::NoDriver`], no NVML
    /// either): a caller may let the user name one.
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            Error::NoDriver { .. } | Error::Run(RunError::NotFound { .. })
        )
    }
}

/// A path as a message quotes it: escaped and bounded.
fn shown(path: &Path) -> String {
    escape(&path.display().to_string()).into_owned()
}

/// A limit as a message states it (`3s`, `1m 30s`), whole milliseconds.
fn seconds(limit: Duration) -> String {
    let whole = Duration::from_millis(u64::try_from(limit.as_millis()).unwrap_or(u64::MAX));
    humantime::format_duration(whole).to_string()
}
