//! The one error type of this crate.

use std::path::PathBuf;
use std::time::Duration;

/// What went wrong capturing GPU facts. Every variant says what failed and keeps the text a
/// person needs to act on it (nvidia-smi's own words, the line that did not parse).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// nvidia-smi could not reach the kernel driver (not loaded, or mismatched).
    #[error("nvidia-smi cannot communicate with the NVIDIA driver: {output}")]
    DriverUnreachable {
        /// nvidia-smi's output, unchanged.
        output: String,
    },
    /// The driver is loaded but sees no GPU.
    #[error("nvidia-smi found no devices: {output}")]
    NoDevices {
        /// nvidia-smi's output, unchanged.
        output: String,
    },
    /// nvidia-smi could not open a GPU (fallen off the bus, or being reset).
    #[error("nvidia-smi cannot get a handle to a GPU: {output}")]
    DeviceHandle {
        /// nvidia-smi's output, unchanged.
        output: String,
    },
    /// The caller lacks the privileges the query needs (MIG listings in a container).
    #[error("nvidia-smi: insufficient permissions: {output}")]
    InsufficientPermissions {
        /// nvidia-smi's output, unchanged.
        output: String,
    },
    /// Another client holds the GPU or instance.
    #[error("nvidia-smi: in use by another client: {output}")]
    InUseByAnotherClient {
        /// nvidia-smi's output, unchanged.
        output: String,
    },
    /// An older driver refused a `--query-gpu` field it does not know (`compute_cap` on R470);
    /// the runner asks again without that field.
    #[error("nvidia-smi does not know the query field `{field}`: {output}")]
    QueryFieldRejected {
        /// The refused field, as nvidia-smi named it.
        field: String,
        /// nvidia-smi's output, unchanged.
        output: String,
    },
    /// Output that does not have the shape of the command that produced it.
    #[error("cannot read `{command}` output at line {line}: {message}: {text:?}")]
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
    /// The nvidia-smi binary does not exist: no driver is installed on this machine.
    #[error(
        "nvidia-smi not found at {program}: no NVIDIA driver here? (set --nvidia-smi or MIGGATE_NVIDIA_SMI)"
    )]
    NotFound {
        /// The program that was looked for.
        program: PathBuf,
    },
    /// The binary exists but could not be started.
    #[error("cannot run {program}: {error}")]
    Spawn {
        /// The program.
        program: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// Waiting for a started command failed.
    #[error("cannot wait for `{command}`: {error}")]
    Wait {
        /// The command line.
        command: String,
        /// Why.
        error: std::io::Error,
    },
    /// A command that did not finish in time was killed (a wedged GPU can hang nvidia-smi).
    #[error("`{command}` did not finish within {after:?} and was killed")]
    Timeout {
        /// The command line.
        command: String,
        /// The limit.
        after: Duration,
    },
    /// A command that exited non-zero with output none of the known failures match.
    #[error("`{command}` failed ({status}): {output}")]
    Failed {
        /// The command line.
        command: String,
        /// The exit status, as text.
        status: String,
        /// Its stdout and stderr.
        output: String,
    },
    /// Neither backend is there: NVML does not load and no nvidia-smi can be found.
    #[error(
        "no NVIDIA driver here: NVML is not available ({nvml}) and nvidia-smi was not found at {nvidia_smi}"
    )]
    NoDriver {
        /// Why NVML did not load.
        nvml: String,
        /// Where nvidia-smi was looked for.
        nvidia_smi: PathBuf,
    },
    /// The NVML library could not be loaded or initialised.
    #[error("NVML is not available: {message}")]
    NvmlUnavailable {
        /// The loader's or NVML's message.
        message: String,
    },
    /// An NVML call failed.
    #[error("NVML call {call} failed: {message}")]
    Nvml {
        /// The NVML function.
        call: &'static str,
        /// NVML's message.
        message: String,
    },
}
