//! Flags of `miggate capture`, and how a capture reads the GPUs (`publish` takes the same).

use std::path::PathBuf;

use clap::ValueEnum;

/// Flags of `miggate capture`.
#[derive(Debug, clap::Args)]
pub struct CaptureArgs {
    /// How to read the GPUs.
    #[command(flatten)]
    pub source: CaptureSourceArgs,
    /// The Kubernetes node name to record.
    #[arg(long, value_name = "NAME", env = "NODE_NAME")]
    pub node: Option<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = CaptureOutput::Json)]
    pub output: CaptureOutput,
}

/// How a capture reads the GPUs: shared by `miggate capture` and `miggate publish`, so the
/// two take the same flags with the same defaults and bounds.
#[derive(Debug, clap::Args)]
pub struct CaptureSourceArgs {
    /// auto: NVML when the library loads, else nvidia-smi (naming an nvidia-smi binary picks it).
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    pub backend: BackendArg,
    /// The nvidia-smi binary to run; a recorded-output stand-in works too.
    #[arg(long, value_name = "PATH", env = "MIGGATE_NVIDIA_SMI")]
    pub nvidia_smi: Option<PathBuf>,
    /// The NVML library to load instead of libnvidia-ml.so.1.
    #[arg(long, value_name = "PATH")]
    pub nvml_library: Option<PathBuf>,
    /// How long the whole capture may take (`30s`, `2m`; a bare number is seconds): every
    /// nvidia-smi command (retries included) or the NVML read; a command still running then is
    /// killed.
    #[arg(long, value_name = "DURATION", default_value = "30s",
          value_parser = crate::duration::DurationParser::seconds(1, 3600))]
    pub timeout: std::time::Duration,
}

impl CaptureSourceArgs {
    /// The capture library's options for a capture that records `node_name`.
    pub fn options(&self, node_name: Option<String>) -> miggate_capture::Options {
        miggate_capture::Options {
            backend: match self.backend {
                BackendArg::Auto => miggate_capture::Backend::Auto,
                BackendArg::Nvml => miggate_capture::Backend::Nvml,
                BackendArg::NvidiaSmi => miggate_capture::Backend::NvidiaSmi,
            },
            nvidia_smi: self.nvidia_smi.clone(),
            nvml_library: self.nvml_library.clone(),
            node_name,
            timeout: Some(self.timeout),
        }
    }
}

/// `--backend`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum BackendArg {
    /// NVML if it loads, else nvidia-smi.
    Auto,
    /// NVML only.
    Nvml,
    /// nvidia-smi only.
    NvidiaSmi,
}

/// `miggate capture -o`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CaptureOutput {
    /// The manifest as JSON.
    Json,
    /// The manifest as YAML.
    Yaml,
    /// Each GPU with its slices, as a tree for people.
    Table,
}
