//! One call that returns the manifest of what this process sees.

use std::path::PathBuf;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, SystemTime};

use miggate_compat::{CapturedBy, GpuManifest};

use crate::error::{Error, RunError};
use crate::facts::NvidiaFacts;
use crate::warning::Warning;
use crate::{host, nvml, smi};
use miggate_smi::{self as run, Deadline};

/// Which reader to use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Backend {
    /// NVML when the library loads, else nvidia-smi. Naming an nvidia-smi binary picks
    /// nvidia-smi: a stand-in named on purpose is what is wanted.
    #[default]
    Auto,
    /// NVML only.
    Nvml,
    /// nvidia-smi only.
    NvidiaSmi,
}

/// How to capture. Nothing here is read from the environment: the caller decides.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Which reader captures: NVML, nvidia-smi, or NVML falling back to nvidia-smi (the default).
    pub backend: Backend,
    /// The nvidia-smi binary to run (else `nvidia-smi` on PATH).
    pub nvidia_smi: Option<PathBuf>,
    /// The NVML library to load (else `libnvidia-ml.so.1`).
    pub nvml_library: Option<PathBuf>,
    /// The Kubernetes node name to record.
    pub node_name: Option<String>,
    /// The limit for the whole capture (default 30 s): every nvidia-smi command, retries of the
    /// GPU query included, and the NVML read must finish within it. A wedged GPU can hang both,
    /// and a checkpoint agent must not hang with it.
    pub timeout: Option<Duration>,
}

/// The most warnings a manifest carries; past it, one more says how many were left out. A
/// listing of junk lines would otherwise carry one warning per line.
const MAX_WARNINGS: usize = 200;

/// Captures the manifest of what this process sees: host facts, the driver, the GPUs and the
/// devices, with what could not be read cleanly in `warnings`.
///
/// One deadline, `options.timeout` from now, bounds the whole capture.
pub fn capture(options: &Options) -> Result<GpuManifest, Error> {
    let deadline = Deadline::after(options.timeout.unwrap_or(run::DEFAULT_TIMEOUT));
    let (facts, backend) = match options.backend {
        Backend::Nvml => (from_nvml(options, &deadline)?, "nvml"),
        Backend::NvidiaSmi => (from_smi(options, &deadline)?, "nvidia-smi"),
        Backend::Auto if options.nvidia_smi.is_some() => (from_smi(options, &deadline)?, "nvidia-smi"),
        Backend::Auto => match from_nvml(options, &deadline) {
            Err(Error::NvmlUnavailable { message }) => match from_smi(options, &deadline) {
                Ok(mut facts) => {
                    facts.warnings.insert(0, Warning::NvmlUnavailable { message });
                    (facts, "nvidia-smi")
                }
                Err(Error::Run(RunError::NotFound { program })) => {
                    return Err(Error::NoDriver {
                        nvml: message,
                        nvidia_smi: program,
                    });
                }
                Err(e) => return Err(e),
            },
            other => (other?, "nvml"),
        },
    };
    let (nvidia, mut warnings) = facts.into_nvidia();
    if warnings.len() > MAX_WARNINGS {
        let left_out = warnings.len() - MAX_WARNINGS;
        warnings.truncate(MAX_WARNINGS);
        warnings.push(Warning::MoreLeftOut(left_out));
    }
    let mut manifest = GpuManifest::new();
    manifest.captured_at = Some(humantime::format_rfc3339_seconds(SystemTime::now()).to_string());
    manifest.captured_by = Some(CapturedBy {
        unknown: Default::default(),
        tool: Some("miggate".into()),
        version: Some(env!("CARGO_PKG_VERSION").into()),
        backend: Some(backend.into()),
    });
    // The manifest carries words: `miggate-compat` cannot name this crate's warnings.
    manifest.warnings = warnings
        .into_iter()
        .map(|w| miggate_compat::Warning::Added(w.to_string()))
        .collect();
    manifest.host = Some(host::host(options.node_name.as_deref()));
    manifest.nvidia = Some(nvidia);
    Ok(manifest)
}

/// Reads NVML on a worker thread under the capture's deadline: a wedged GPU can hang NVML
/// calls too. A read that does not return in time is abandoned (its thread stays blocked in the
/// driver until the process exits) and reported as a timeout.
fn from_nvml(options: &Options, deadline: &Deadline) -> Result<NvidiaFacts, Error> {
    let lib = options.nvml_library.clone();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        // The receiver is gone only after a timeout, when nobody waits for the answer.
        let _ = tx.send(nvml::read(lib.as_deref()));
    });
    let answer = match deadline.remaining() {
        Some(left) => rx.recv_timeout(left).ok(),
        None => rx.recv().ok(),
    };
    answer.unwrap_or(Err(Error::NvmlTimeout {
        limit: deadline.limit(),
    }))
}

fn from_smi(options: &Options, deadline: &Deadline) -> Result<NvidiaFacts, Error> {
    let program = run::nvidia_smi_path(options.nvidia_smi.as_deref());
    smi::read(&program, deadline)
}
