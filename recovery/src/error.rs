//! The one error type of boot recovery. Every variant names what failed and where; outside text
//! (command output, file contents, paths) is quoted escaped.

use std::path::PathBuf;

use miggate_compat::escape::escape;

use crate::bdf::{Bdf, BdfError};

/// Why a recovery step, a read of the node or a layout file failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read or written.
    #[error("{}: {what}: {source}", escape(&.path.display().to_string()))]
    Io {
        /// The file, its temporary file, or a directory being created, listed or synced.
        path: PathBuf,
        /// What was being done (`reading`, `writing`, `renaming into place`).
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file was larger than anything it could legitimately hold.
    #[error("{}: larger than {limit} bytes; refusing to read it", escape(&.path.display().to_string()))]
    TooLarge {
        /// The file read with a bound (a layout, the journal or the state file).
        path: PathBuf,
        /// The bound it was read with, in bytes; the file holds more.
        limit: u64,
    },
    /// The layout file is not a layout.
    #[error("layout {}: {message}", escape(&.path.display().to_string()))]
    Layout {
        /// The file (or `-`).
        path: PathBuf,
        /// What is wrong, with the line or field where known.
        message: String,
    },
    /// A PCI address that is not of the form `dddd:bb:dd.f`.
    #[error(transparent)]
    Bdf(#[from] BdfError),
    /// A command (nvidia-smi, sriov-manage, systemctl) could not run or timed out.
    #[error(transparent)]
    Run(#[from] miggate_smi::RunError),
    /// A command ran and failed.
    #[error("`{}` failed ({status}): {}", escape(.command), escape(.output.trim()))]
    Command {
        /// The program and its arguments, joined by spaces.
        command: String,
        /// The exit status as text.
        status: String,
        /// What it printed.
        output: String,
    },
    /// nvidia-smi's MIG listing could not be read, or said nvidia-smi failed: `miggate-smi`'s
    /// error, so a caller can tell a driver that cannot be reached from a table it cannot read.
    #[error("`{}`: unreadable output: {}", escape(.command), escape(&.source.to_string()))]
    Listing {
        /// The MIG listing's command line, program and arguments joined by spaces.
        command: String,
        /// What the parser found.
        #[source]
        source: miggate_smi::Error,
    },
    /// A command's output could not be read.
    #[error("`{}`: unreadable output: {}", escape(.command), escape(.message))]
    Output {
        /// The command line whose output was read, program and arguments joined by spaces.
        command: String,
        /// What was wrong.
        message: String,
    },
    /// A sysfs value could not be read as what it should hold.
    #[error("{}: unexpected content {}", escape(&.path.display().to_string()), escape(.content))]
    Sysfs {
        /// The sysfs, journal or state file whose content could not be read or written.
        path: PathBuf,
        /// What it held.
        content: String,
    },
    /// Writing a vGPU type id into a VF's `current_vgpu_type` failed.
    #[error("VF {vf}: writing vGPU type {type_id} to current_vgpu_type failed: {reason}")]
    VgpuWrite {
        /// The VF's own PCI address, not its PF's.
        vf: Bdf,
        /// The type id written.
        type_id: u32,
        /// The OS error or the fake's reason (`EIO`: no GPU instance for the type).
        reason: String,
    },
    /// A GPU reset failed.
    #[error("resetting {}: {kind}: {}", list(.gpus), escape(.output.trim()))]
    Reset {
        /// The GPUs the reset was asked for.
        gpus: Vec<Bdf>,
        /// Why, as classified from the output.
        kind: ResetFailure,
        /// What nvidia-smi printed.
        output: String,
    },
    /// The NVML library could not be loaded or initialised (`--gpu-control nvml`): no driver,
    /// no library at that path, or no access to the GPUs.
    #[error("cannot load or initialise NVML from {}: {}", escape(.library), escape(.message))]
    NvmlUnavailable {
        /// The library path or name as given (`libnvidia-ml.so.1` by default).
        library: String,
        /// The loader's or NVML's message.
        message: String,
    },
    /// An NVML call failed.
    #[error("{}NVML {call}: {kind} ({})", .gpu.as_ref().map_or(String::new(), |g| format!("{g}: ")), escape(.message))]
    Nvml {
        /// The NVML function.
        call: &'static str,
        /// The GPU it was called for, when one was.
        gpu: Option<Bdf>,
        /// What kind of failure, for callers and for the reader.
        kind: NvmlFailure,
        /// NVML's own text for it.
        message: String,
    },
    /// Capturing the node's manifest failed: capture's error, so a caller can tell a missing
    /// driver from a timeout.
    #[error("capturing the node's manifest: {0}")]
    Capture(#[source] miggate_capture::Error),
    /// A seam implemented outside this crate failed in a way of its own (the test fake's
    /// injected crash, say); its error, unchanged.
    #[error(transparent)]
    Seam(Box<dyn std::error::Error + Send + Sync>),
}

/// How a GPU reset failed: each kind has its own escalation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetFailure {
    /// `In use by another client` / `currently in use by another process`: something holds the
    /// GPU (persistenced unreachable, DCGM, a compute process, `nvidia_drm`, VFs enabled).
    InUse,
    /// `Resetting GPU … is not supported.`: no reset capability here (VM passthrough).
    NotSupported,
    /// The GPUs of an NVLink group must be reset together.
    NvlinkGroup,
    /// Anything else.
    Other,
}

impl std::fmt::Display for ResetFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ResetFailure::InUse => "in use by another client",
            ResetFailure::NotSupported => "reset not supported",
            ResetFailure::NvlinkGroup => "NVLink-connected GPUs must be reset together",
            ResetFailure::Other => "reset failed",
        })
    }
}

/// How an NVML call failed, so that a reader knows what to do (run as root, stop a client, use a
/// GPU that has the feature) without knowing NVML's return codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NvmlFailure {
    /// `NVML_ERROR_NOT_SUPPORTED`: this GPU or driver lacks the feature (MIG on a non-MIG GPU).
    NotSupported,
    /// `NVML_ERROR_NO_PERMISSION`: the call needs root.
    NoPermission,
    /// `NVML_ERROR_IN_USE`: another client holds the GPU.
    InUse,
    /// `NVML_ERROR_GPU_IS_LOST`: the GPU fell off the bus.
    GpuLost,
    /// `NVML_ERROR_RESET_REQUIRED`: the GPU must be reset first.
    ResetRequired,
    /// The library does not export the function (a driver older than the call).
    MissingFunction,
    /// No GPU at that PCI bus id.
    NotFound,
    /// Anything else.
    Other,
}

impl std::fmt::Display for NvmlFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NvmlFailure::NotSupported => "not supported by this GPU or driver",
            NvmlFailure::NoPermission => "permission denied (this NVML call needs root)",
            NvmlFailure::InUse => "the GPU is in use by another client",
            NvmlFailure::GpuLost => "the GPU has fallen off the bus",
            NvmlFailure::ResetRequired => "the GPU must be reset first",
            NvmlFailure::MissingFunction => "this NVML library does not export it (driver too old?)",
            NvmlFailure::NotFound => "no such GPU",
            NvmlFailure::Other => "failed",
        })
    }
}

fn list(gpus: &[Bdf]) -> String {
    gpus.iter().map(Bdf::to_string).collect::<Vec<_>>().join(",")
}

/// Results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
