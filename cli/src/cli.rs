//! The command line: flags and dispatch. Exit codes are a contract: 0 compatible (or done),
//! 1 refused, 2 bad input or usage.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// Decide whether a GPU checkpoint can be restored on a target, before CRIU finds out.
#[derive(Debug, Parser)]
#[command(name = "miggate", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Record what GPUs this process sees as a manifest (NVML or nvidia-smi).
    ///
    /// Exit status: 0 captured, 2 no driver or unreadable output.
    Capture(CaptureArgs),
    /// Compare a checkpoint's manifest (SOURCE) with a target manifest (TARGET).
    ///
    /// Exit status: 0 compatible, 1 refused, 2 bad input or usage.
    Check(CheckArgs),
    /// Print the manifest's JSON Schema.
    Schema,
}

/// Flags of `miggate check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The checkpoint's manifest (JSON or YAML); `-` reads standard input.
    pub source: PathBuf,
    /// The target's manifest: a restore container's devices (exact) or a node inventory (offer).
    pub target: PathBuf,
    /// exact: the target is what a restore container got; offer: a node's whole inventory.
    #[arg(long, value_enum, default_value_t = ModeArg::Exact)]
    pub mode: ModeArg,
    /// Refuse when a fact is unknown on either side (not-applicable checks stay quiet).
    #[arg(long)]
    pub strict: bool,
    /// Waive named checks, comma-separated (or `all`); an unknown name is an error.
    #[arg(long, value_name = "CHECKS", default_value = "")]
    pub skip: String,
    /// Lowest kernel major.minor a target may run.
    #[arg(long, value_name = "V", default_value = "5.13")]
    pub min_kernel: String,
    /// Lowest NVIDIA driver major version a target may run.
    #[arg(long, value_name = "N", default_value_t = miggate_compat::DEFAULT_MIN_DRIVER)]
    pub min_driver: u64,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = CheckOutput::Text)]
    pub output: CheckOutput,
}

/// Flags of `miggate capture`.
#[derive(Debug, clap::Args)]
pub struct CaptureArgs {
    /// auto: NVML when the library loads, else nvidia-smi (naming an nvidia-smi binary picks it).
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    pub backend: BackendArg,
    /// The nvidia-smi binary to run; a recorded-output stand-in works too.
    #[arg(long, value_name = "PATH", env = "MIGGATE_NVIDIA_SMI")]
    pub nvidia_smi: Option<PathBuf>,
    /// The NVML library to load instead of libnvidia-ml.so.1.
    #[arg(long, value_name = "PATH")]
    pub nvml_library: Option<PathBuf>,
    /// The Kubernetes node name to record.
    #[arg(long, value_name = "NAME", env = "NODE_NAME")]
    pub node: Option<String>,
    /// Seconds the whole capture may take: every nvidia-smi command (retries included) or the
    /// NVML read; a command still running then is killed.
    #[arg(long, value_name = "SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: u64,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = CaptureOutput::Json)]
    pub output: CaptureOutput,
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

/// `--mode`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ModeArg {
    /// Equal device sets.
    Exact,
    /// The target must be able to offer a matching set.
    Offer,
}

/// `miggate check -o`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CheckOutput {
    /// A table for people.
    Text,
    /// The JSON report for scripts.
    Json,
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Capture(args) => crate::capture::run(&args),
        Command::Check(args) => crate::check::run(&args),
        Command::Schema => {
            print!("{}", miggate_compat::manifest_schema());
            Ok(ExitCode::SUCCESS)
        }
    }
}
