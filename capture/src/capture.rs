//! One call that returns the manifest of what this process sees.

use std::path::PathBuf;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, SystemTime};

use miggate_compat::{CapturedBy, GpuManifest, Nvidia};

use crate::{Error, host, nvml, run, smi};

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
    /// The reader.
    pub backend: Backend,
    /// The nvidia-smi binary to run (else `nvidia-smi` on PATH).
    pub nvidia_smi: Option<PathBuf>,
    /// The NVML library to load (else `libnvidia-ml.so.1`).
    pub nvml_library: Option<PathBuf>,
    /// The Kubernetes node name to record.
    pub node_name: Option<String>,
    /// The limit for each nvidia-smi command, and for the whole NVML read (default 30 s).
    pub timeout: Option<Duration>,
}

/// Captures the manifest of what this process sees: host facts, the driver, the GPUs and the
/// devices, with what could not be read cleanly in `warnings`.
pub fn capture(options: &Options) -> Result<GpuManifest, Error> {
    let (nvidia, warnings, backend) = match options.backend {
        Backend::Nvml => from_nvml(options)?,
        Backend::NvidiaSmi => from_smi(options)?,
        Backend::Auto if options.nvidia_smi.is_some() => from_smi(options)?,
        Backend::Auto => match from_nvml(options) {
            Err(Error::NvmlUnavailable { message }) => match from_smi(options) {
                Ok((nvidia, mut warnings, backend)) => {
                    warnings.insert(
                        0,
                        format!("NVML is not available ({message}); read through nvidia-smi"),
                    );
                    (nvidia, warnings, backend)
                }
                Err(Error::NotFound { program }) => {
                    return Err(Error::NoDriver {
                        nvml: message,
                        nvidia_smi: program,
                    });
                }
                Err(e) => return Err(e),
            },
            other => other?,
        },
    };
    let mut manifest = GpuManifest::new();
    manifest.captured_at = Some(humantime::format_rfc3339_seconds(SystemTime::now()).to_string());
    manifest.captured_by = Some(CapturedBy {
        unknown: Default::default(),
        tool: Some("miggate".into()),
        version: Some(env!("CARGO_PKG_VERSION").into()),
        backend: Some(backend.into()),
    });
    manifest.warnings = warnings;
    manifest.host = Some(host::host(options.node_name.as_deref()));
    manifest.nvidia = Some(nvidia);
    Ok(manifest)
}

fn timeout(options: &Options) -> Duration {
    options.timeout.unwrap_or(run::DEFAULT_TIMEOUT)
}

/// Reads NVML on a worker thread under the same deadline as an nvidia-smi command: a wedged
/// GPU can hang NVML calls too. A read that does not return in time is abandoned (its thread
/// stays blocked in the driver until the process exits) and reported as a timeout.
fn from_nvml(options: &Options) -> Result<(Nvidia, Vec<String>, &'static str), Error> {
    let lib = options.nvml_library.clone();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        // The receiver is gone only after a timeout, when nobody waits for the answer.
        let _ = tx.send(nvml::read(lib.as_deref()));
    });
    let after = timeout(options);
    let facts = match rx.recv_timeout(after) {
        Ok(result) => result?,
        Err(_) => {
            return Err(Error::Timeout {
                command: "NVML read".into(),
                after,
            });
        }
    };
    Ok((facts.to_nvidia(), facts.warnings, "nvml"))
}

fn from_smi(options: &Options) -> Result<(Nvidia, Vec<String>, &'static str), Error> {
    let program = run::nvidia_smi_path(options.nvidia_smi.as_deref());
    let facts = smi::read(&program, timeout(options))?;
    Ok((facts.nvidia, facts.warnings, "nvidia-smi"))
}
