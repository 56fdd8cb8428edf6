//! One call that returns the manifest of what this process sees.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use miggate_compat::{CapturedBy, GpuManifest, Nvidia};

use crate::{Error, host, nvml, run, smi};

/// Which reader to use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Backend {
    /// NVML when the library loads, else nvidia-smi. Naming an nvidia-smi binary (flag or
    /// `MIGGATE_NVIDIA_SMI`) picks nvidia-smi: a stand-in named on purpose is what is wanted.
    #[default]
    Auto,
    /// NVML only.
    Nvml,
    /// nvidia-smi only.
    NvidiaSmi,
}

/// How to capture.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The reader.
    pub backend: Backend,
    /// The nvidia-smi binary to run (else `MIGGATE_NVIDIA_SMI`, else `nvidia-smi` on PATH).
    pub nvidia_smi: Option<PathBuf>,
    /// The NVML library to load (else `libnvidia-ml.so.1`).
    pub nvml_library: Option<PathBuf>,
    /// The Kubernetes node name to record.
    pub node_name: Option<String>,
    /// The limit for each nvidia-smi command (default 30 s).
    pub timeout: Option<Duration>,
}

/// Captures the manifest of what this process sees: host facts, the driver, the GPUs and the
/// devices, with what could not be read cleanly in `warnings`.
pub fn capture(options: &Options) -> Result<GpuManifest, Error> {
    let named_smi =
        options.nvidia_smi.is_some() || std::env::var_os("MIGGATE_NVIDIA_SMI").is_some_and(|v| !v.is_empty());
    let (nvidia, warnings, backend) = match options.backend {
        Backend::Nvml => from_nvml(options)?,
        Backend::NvidiaSmi => from_smi(options)?,
        Backend::Auto if named_smi => from_smi(options)?,
        Backend::Auto => match from_nvml(options) {
            Err(Error::NvmlUnavailable { .. }) => from_smi(options)?,
            other => other?,
        },
    };
    let mut manifest = GpuManifest::new();
    manifest.captured_at = Some(humantime::format_rfc3339_seconds(SystemTime::now()).to_string());
    manifest.captured_by = Some(CapturedBy {
        tool: Some("miggate".into()),
        version: Some(env!("CARGO_PKG_VERSION").into()),
        backend: Some(backend.into()),
    });
    manifest.warnings = warnings;
    manifest.host = Some(host::host(options.node_name.as_deref()));
    manifest.nvidia = Some(nvidia);
    Ok(manifest)
}

fn from_nvml(options: &Options) -> Result<(Nvidia, Vec<String>, &'static str), Error> {
    let facts = nvml::read(options.nvml_library.as_deref())?;
    Ok((facts.to_nvidia(), facts.warnings, "nvml"))
}

fn from_smi(options: &Options) -> Result<(Nvidia, Vec<String>, &'static str), Error> {
    let program = run::nvidia_smi_path(options.nvidia_smi.as_deref());
    let facts = smi::read(&program, options.timeout.unwrap_or(run::DEFAULT_TIMEOUT))?;
    Ok((facts.nvidia, facts.warnings, "nvidia-smi"))
}
