//! The errors of this crate: what nvidia-smi's output says ([`Error`]) and why running it failed
//! ([`RunError`]), kept apart because a caller acts on them differently: a timeout may be worth a
//! longer limit, a driver that cannot be reached is not.
//!
//! Every message that quotes outside text (nvidia-smi's output, a path, a command line, a UUID)
//! quotes it through [`escape`], which neutralises terminal controls and cuts it to 4 KiB saying
//! how much was cut: an error is printed to an operator's terminal, and neither a hostile
//! nvidia-smi nor a flood of output may drive that terminal or its logs. The fields keep the text
//! unchanged for callers that want to look at it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use miggate_compat::escape::escape;

/// What nvidia-smi's output says went wrong, or why it could not be read. Every variant keeps
/// the text a person needs to act on it (nvidia-smi's own words, the line that did not parse).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// nvidia-smi could not reach the kernel driver (not loaded, or mismatched).
    #[error("nvidia-smi cannot communicate with the NVIDIA driver: {}", escape(.output))]
    DriverUnreachable {
        /// nvidia-smi's output, unchanged.
        output: String,
    },
    /// The driver is loaded but sees no GPU.
    #[error("nvidia-smi found no devices: {}", escape(.output))]
    NoDevices {
        /// nvidia-smi's output, unchanged.
        output: String,
    },
    /// nvidia-smi could not open a GPU (fallen off the bus, or being reset).
    #[error("nvidia-smi cannot get a handle to a GPU: {}", escape(.output))]
    DeviceHandle {
        /// nvidia-smi's output, unchanged.
        output: String,
    },
    /// The caller lacks the privileges the query needs (MIG listings in a container).
    #[error("nvidia-smi: insufficient permissions: {}", escape(.output))]
    InsufficientPermissions {
        /// nvidia-smi's output, unchanged.
        output: String,
    },
    /// Another client holds the GPU or instance.
    #[error("nvidia-smi: in use by another client: {}", escape(.output))]
    InUseByAnotherClient {
        /// nvidia-smi's output, unchanged.
        output: String,
    },
    /// An older driver refused a `--query-gpu` field it does not know (`compute_cap` on R470);
    /// a caller may ask again without that field.
    #[error("nvidia-smi does not know the query field `{}`: {}", escape(.field), escape(.output))]
    QueryFieldRejected {
        /// The refused field, as nvidia-smi named it.
        field: String,
        /// nvidia-smi's output, unchanged.
        output: String,
    },
    /// Output that does not have the shape of the command that produced it.
    #[error("cannot read `{command}` output at line {line}: {message}: `{}`", escape(.text))]
    Parse {
        /// Which nvidia-smi invocation produced the text (`nvidia-smi -L`).
        command: &'static str,
        /// 1-based line number in that output.
        line: usize,
        /// What was expected.
        message: String,
        /// The offending line, unchanged.
        text: String,
    },
    /// A UUID that is not in a form nvidia-smi prints (`GPU-<id>`, `MIG-<id>`,
    /// `MIG-GPU-<id>/<gi>/<ci>`), or not of the kind expected where it was read. Such a UUID
    /// could carry a separator into cuda-checkpoint's device map, so it is never recorded.
    #[error("{at}: {error}")]
    InvalidUuid {
        /// Where it was read: the command and line (`` `nvidia-smi -L` line 3 ``).
        at: String,
        /// Why it is refused; its message quotes the UUID escaped.
        error: miggate_compat::Error,
    },
}

/// Which output stream of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl fmt::Display for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        })
    }
}

/// Why running a command failed, as a type a caller can match on (a timeout is not a missing
/// binary). Command lines and paths are quoted escaped. The messages name the deadline "the
/// capture's", the job they were first written for; boot recovery's commands say the same.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The binary does not exist: no driver is installed on this machine.
    #[error("nvidia-smi not found at {}: no NVIDIA driver here?", shown(.program))]
    NotFound {
        /// The program that was looked for.
        program: PathBuf,
    },
    /// The binary exists but could not be started (not executable, say).
    #[error("cannot run {}: {error}", shown(.program))]
    Spawn {
        /// The program as the caller named it.
        program: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// Waiting for a started command failed.
    #[error("cannot wait for `{}`: {error}", escape(.command))]
    Wait {
        /// The command line that was started: program and arguments, joined by spaces.
        command: String,
        /// Why.
        error: std::io::Error,
    },
    /// The command was still running when the capture's deadline passed and was killed (a
    /// wedged GPU can hang nvidia-smi).
    #[error(
        "`{}` was still running at the capture's {} deadline and was killed",
        escape(.command),
        seconds(*.limit)
    )]
    TimedOut {
        /// The command line that was killed: program and arguments, joined by spaces.
        command: String,
        /// The capture's whole limit (retries and every other command included).
        limit: Duration,
    },
    /// The capture's deadline passed before the command could start (earlier commands, or
    /// retries of this one, used the time up).
    #[error(
        "the capture's {} deadline passed before `{}` could start",
        seconds(*.limit),
        escape(.command)
    )]
    DeadlinePassed {
        /// The command line that was not started: program and arguments, joined by spaces.
        command: String,
        /// The capture's whole limit.
        limit: Duration,
    },
    /// The command printed more than the bound on one stream. Its output is not read at all: a
    /// cut-off listing can end in half a line that reads as a GPU that does not exist.
    #[error(
        "`{}` printed more than {} MiB on {stream}; output over that bound is not read",
        escape(.command),
        .limit / (1024 * 1024)
    )]
    OutputTooLarge {
        /// The command line whose output was not read: program and arguments, joined by spaces.
        command: String,
        /// The stream that went over.
        stream: Stream,
        /// The bound, in bytes.
        limit: usize,
    },
    /// The command was killed by a signal (it crashed, or something killed it).
    #[error("`{}` was killed by signal {signal}", escape(.command))]
    Signalled {
        /// The command line of the process that died: program and arguments, joined by spaces.
        command: String,
        /// The signal that ended it, from its wait status (15 for SIGTERM).
        signal: i32,
    },
}

impl RunError {
    /// Whether the deadline ended it: the command was killed at the deadline, or could not
    /// start before it. A caller may offer a longer limit.
    pub fn is_timeout(&self) -> bool {
        matches!(self, RunError::TimedOut { .. } | RunError::DeadlinePassed { .. })
    }
}

/// A path as a message quotes it: escaped and bounded.
pub(crate) fn shown(path: &Path) -> String {
    escape(&path.display().to_string()).into_owned()
}

/// A limit as a message states it (`3s`, `1m 30s`), whole milliseconds.
pub(crate) fn seconds(limit: Duration) -> String {
    let whole = Duration::from_millis(u64::try_from(limit.as_millis()).unwrap_or(u64::MAX));
    humantime::format_duration(whole).to_string()
}
