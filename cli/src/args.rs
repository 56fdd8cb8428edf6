//! The flags the commands share, and their parsers: the arguments of `check`, `capture`,
//! `convert` and `where`, how to read a manifest, the policy, the capture source. A leaf for the
//! commands: each command's module imports it, and it imports none of them.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fmt;
use std::path::PathBuf;

use clap::builder::TypedValueParser;
use clap::error::ErrorKind;
use clap::{Arg, Command as ClapCommand, ValueEnum};
use miggate_compat::escape::{MAX_QUOTED_BYTES, escape, escape_within};
use miggate_compat::{
    CheckName, DEFAULT_MIN_DRIVER, DEFAULT_MIN_KERNEL, DriverFloor, Mode, Options, parse_min_driver,
    parse_min_kernel, parse_skip,
};
use miggate_webhook::StoreConfig;
use miggate_webhook::kube_store::KubeOptions;

/// Flags of `miggate check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The checkpoint's manifest (JSON or YAML); `-` reads standard input. With `-n`, a
    /// checkpoint in the cluster: a GpuCheckpoint's name, or `podsnapshot/NAME` for the Go
    /// peer's.
    pub source: PathBuf,
    /// The target's manifest: a restore container's devices (exact) or a node inventory
    /// (offer). Not with `--node`.
    #[arg(required_unless_present = "node", conflicts_with = "node")]
    pub target: Option<PathBuf>,
    /// Read the checkpoint from the cluster: SOURCE in NAMESPACE.
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// The target is this node of the cluster, its inventory read as the webhook reads it
    /// (GpuNode, ResourceSlices, GFD labels), compared in offer mode.
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// Which cluster, as kubectl takes it (with `-n` or `--node`).
    #[command(flatten)]
    pub cluster: crate::service::ClusterFlags,
    /// exact: the target is what a restore container got; offer: a node's whole inventory.
    #[arg(long, value_enum, default_value_t = ModeArg::Exact)]
    pub mode: ModeArg,
    /// Which facts the target has: pod (a pod not yet bound), node (a node inventory), all
    /// (a restore container on its node). Checks outside it are not applicable. Default:
    /// inferred, node when the target has no `pod`, else all.
    #[arg(long, value_enum, value_name = "SCOPE")]
    pub target_scope: Option<ScopeArg>,
    /// The policy: strict, skips, floors.
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// How unknown fields in the manifests are read.
    #[command(flatten)]
    pub read: ReadArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = CheckOutput::Table)]
    pub output: CheckOutput,
}

/// `--validate`, on every command that reads manifests: kubectl's flag, with its values and
/// its default. A typo (`devcies:`) read leniently would make the devices unknown, and unknown
/// admits: so an unknown field is an error unless asked otherwise.
#[derive(Debug, clap::Args)]
pub struct ReadArgs {
    /// What an unknown field in a manifest does: strict (an error naming the field, its line and
    /// the nearest known name), warn (kept and reported as a warning), ignore (dropped).
    #[arg(long, value_enum, value_name = "MODE", default_value_t = ValidateArg::Strict)]
    pub validate: ValidateArg,
}

impl ReadArgs {
    /// compat's reading options.
    pub fn options(&self) -> miggate_compat::ReadOptions {
        miggate_compat::ReadOptions {
            fields: match self.validate {
                ValidateArg::Strict => miggate_compat::FieldValidation::Strict,
                ValidateArg::Warn => miggate_compat::FieldValidation::Warn,
                ValidateArg::Ignore => miggate_compat::FieldValidation::Ignore,
            },
        }
    }
}

/// `--validate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ValidateArg {
    /// An unknown field is an error (exit 2).
    #[value(alias = "true")]
    Strict,
    /// An unknown field is kept and reported as a warning.
    Warn,
    /// An unknown field is dropped without a word.
    #[value(alias = "false")]
    Ignore,
}

/// Flags of `miggate convert`.
#[derive(Debug, clap::Args)]
pub struct ConvertArgs {
    /// The manifest, GpuCheckpoint or GpuNode object, or peer artifact (JSON or YAML); `-`
    /// reads standard input.
    pub file: PathBuf,
    /// How unknown fields in the manifest are read.
    #[command(flatten)]
    pub read: ReadArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = ConvertOutput::Yaml)]
    pub output: ConvertOutput,
}

/// `miggate convert -o`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ConvertOutput {
    /// The manifest as YAML.
    Yaml,
    /// The manifest as JSON.
    Json,
    /// Each GPU with its slices, as a tree for people (as `miggate capture -o table`).
    Table,
}

/// Flags of `miggate where`.
#[derive(Debug, clap::Args)]
pub struct WhereArgs {
    /// The checkpoint: a manifest, a GpuCheckpoint object or a Go peer artifact; `-` reads
    /// standard input. With `-n`, a checkpoint in the cluster: a GpuCheckpoint's name, or
    /// `podsnapshot/NAME` for the Go peer's.
    pub checkpoint: PathBuf,
    /// Read the checkpoint from the cluster: CHECKPOINT in NAMESPACE.
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Where the node inventories are: `dir:PATH`, a file store whose `nodes/<node>.yaml`
    /// files are read (the webhook's layout). Without it, the cluster's: every node's
    /// GpuNode, ResourceSlices and GFD labels, read as the webhook reads them.
    #[arg(long, value_name = "dir:PATH", value_parser = store_dir)]
    pub store: Option<PathBuf>,
    /// Which cluster, as kubectl takes it (with `-n` or without `--store`).
    #[command(flatten)]
    pub cluster: crate::service::ClusterFlags,
    /// The policy: strict, skips, floors.
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// How unknown fields in the checkpoint and the node files are read.
    #[command(flatten)]
    pub read: ReadArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = CheckOutput::Table)]
    pub output: CheckOutput,
}

/// The policy flags `check` and `where` share, read into compat's [`Options`] in one place.
#[derive(Debug, clap::Args)]
pub struct PolicyArgs {
    /// Refuse when a fact is unknown on either side (not-applicable checks stay quiet).
    #[arg(long)]
    pub strict: bool,
    /// Waive named checks, comma-separated (or `all`); an unknown name is an error.
    #[arg(long, value_name = "CHECKS", value_parser = FlagParser(skip_list))]
    pub skip: Option<BTreeSet<CheckName>>,
    /// Lowest kernel major.minor a target may run.
    #[arg(long, value_name = "V", value_parser = FlagParser(kernel_floor),
          default_value_t = KernelFloor(DEFAULT_MIN_KERNEL))]
    pub min_kernel: KernelFloor,
    /// Lowest NVIDIA driver a target may run: a major (580) or a whole version (580.82.07),
    /// compared per numeric component.
    #[arg(long, value_name = "VERSION", value_parser = FlagParser(driver_floor),
          default_value_t = DEFAULT_MIN_DRIVER)]
    pub min_driver: DriverFloor,
}

impl PolicyArgs {
    /// The comparison options in `mode`.
    pub fn options(&self, mode: Mode) -> Options {
        Options {
            mode,
            strict: self.strict,
            skip: self.skip.clone().unwrap_or_default(),
            min_kernel: self.min_kernel.0,
            min_driver: self.min_driver,
        }
    }
}

/// `--min-kernel`: the lowest kernel (major, minor) a target may run, shown as `5.13`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelFloor(pub (u64, u64));

impl fmt::Display for KernelFloor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.0.0, self.0.1)
    }
}

/// How much of a flag's value an error quotes, and of a name inside it: both fit in one
/// message well under [`MAX_QUOTED_BYTES`] with room for the rest.
const FLAG_QUOTE_BYTES: usize = MAX_QUOTED_BYTES / 4;

/// A flag value read by a function of compat's, whose error quotes the value escaped and cut:
/// clap's own value errors quote it as typed. The function gives the reason, already escaped.
#[derive(Clone)]
pub(crate) struct FlagParser<T>(pub(crate) fn(&str) -> Result<T, String>);

impl<T: Clone + Send + Sync + 'static> TypedValueParser for FlagParser<T> {
    type Value = T;

    fn parse_ref(&self, cmd: &ClapCommand, arg: Option<&Arg>, value: &OsStr) -> Result<T, clap::Error> {
        let why = match value.to_str() {
            Some(text) => match (self.0)(text) {
                Ok(parsed) => return Ok(parsed),
                Err(why) => why,
            },
            None => "not UTF-8 text".to_string(),
        };
        let flag = arg.map_or_else(|| "the value".to_string(), ToString::to_string);
        let message = format!(
            "invalid value '{}' for '{flag}': {why}",
            escape_within(&value.to_string_lossy(), FLAG_QUOTE_BYTES)
        );
        Err(clap::Error::raw(ErrorKind::ValueValidation, message).format(&mut cmd.clone()))
    }
}

/// `--skip`: compat's reading, with the unknown name quoted escaped.
fn skip_list(text: &str) -> Result<BTreeSet<CheckName>, String> {
    parse_skip(text).map_err(|e| match e {
        miggate_compat::Error::UnknownCheck { name, known } => format!(
            "unknown check `{}`; known checks: {known}",
            escape_within(&name, FLAG_QUOTE_BYTES)
        ),
        other => escape(&other.to_string()).into_owned(),
    })
}

/// `--min-kernel`: compat's reading; its reason quotes nothing from outside.
fn kernel_floor(text: &str) -> Result<KernelFloor, String> {
    parse_min_kernel(text).map(KernelFloor).map_err(|e| match e {
        miggate_compat::Error::InvalidOption { why, .. } => why.to_string(),
        other => escape(&other.to_string()).into_owned(),
    })
}

/// `--min-driver`: compat's reading; its reason quotes nothing from outside.
fn driver_floor(text: &str) -> Result<DriverFloor, String> {
    parse_min_driver(text).map_err(|e| match e {
        miggate_compat::Error::InvalidOption { why, .. } => why.to_string(),
        other => escape(&other.to_string()).into_owned(),
    })
}

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

/// `--target-scope`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ScopeArg {
    /// A pod not yet bound to a node: pod facts only.
    Pod,
    /// A node's inventory: host and GPU facts.
    Node,
    /// A restore container on its node: every fact.
    All,
}

/// `--mode`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ModeArg {
    /// Equal device sets.
    Exact,
    /// The target must be able to offer a matching set.
    Offer,
}

/// `miggate check -o` and `miggate where -o`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CheckOutput {
    /// A table for people (`text`, its name before, still reads).
    #[value(alias = "text")]
    Table,
    /// The JSON report for scripts.
    Json,
    /// The same report as YAML.
    Yaml,
    /// The table with more to show: every value whole on one line (`check`); every refusal and
    /// the device map of each node (`where`).
    Wide,
}

/// The format names `-o` takes anywhere: a file named one of them is almost surely a format
/// asked of a flag that writes a file.
const FORMAT_NAMES: &[&str] = &["table", "wide", "json", "yaml", "yml", "text", "name"];

/// `--out PATH` (also `-o PATH`): a path, but never a format's name, so `-o yaml` is an error
/// instead of a file named `yaml`.
pub(crate) fn out_path(text: &str) -> Result<PathBuf, String> {
    if FORMAT_NAMES.contains(&text.to_ascii_lowercase().as_str()) {
        return Err(format!(
            "that is an output format's name, not a file: this flag names the file to write \
             (./{} for a file of that name)",
            escape_within(text, FLAG_QUOTE_BYTES)
        ));
    }
    if text.is_empty() {
        return Err("expected a file path".to_string());
    }
    Ok(PathBuf::from(text))
}

/// `1 GPU`, `2 GPUs`: a count with the word that fits it.
pub(crate) fn counted(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// `miggate where --store`: `dir:PATH` only (`where` reads no cluster yet).
pub(crate) fn store_dir(text: &str) -> Result<PathBuf, String> {
    match store_arg(text)? {
        StoreConfig::Dir(path) => Ok(path),
        StoreConfig::Kube(_) => Err("`where` reads only a file store; use dir:PATH".into()),
    }
}

/// `--store`: `kube` or `dir:PATH`.
pub(crate) fn store_arg(text: &str) -> Result<StoreConfig, String> {
    if text == "kube" {
        return Ok(StoreConfig::Kube(KubeOptions::default()));
    }
    match text.strip_prefix("dir:") {
        Some(path) if !path.is_empty() => Ok(StoreConfig::Dir(PathBuf::from(path))),
        _ => Err("expected kube or dir:PATH".into()),
    }
}
