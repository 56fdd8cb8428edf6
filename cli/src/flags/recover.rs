//! Flags of `miggate recover record|plan|apply`.

use std::path::PathBuf;
use std::time::Duration;

use miggate_compat::escape::escape;
use miggate_recovery::MigManager;

/// Flags of `miggate recover`.
#[derive(Debug, clap::Args)]
pub struct RecoverArgs {
    #[command(subcommand)]
    pub command: RecoverCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum RecoverCommand {
    /// Record the node's layout (MIG mode, GPU instances with placement, compute instances,
    /// sriov_numvfs, each VF's vGPU type) as YAML.
    ///
    /// Exit status: 0 recorded, 2 unreadable node or unwritable file.
    Record(RecordArgs),
    /// Compare the node with a layout and print the steps apply would take, with a picture of
    /// each GPU's placement slots before and after. Changes nothing.
    ///
    /// Exit status: 0 nothing to do, 3 steps pending, 2 error (including a blocker such as a
    /// missing GPU or an active vGPU in the way).
    Plan(LayoutArgs),
    /// Bring the node to the layout, verify, and open the readiness gate
    /// (`ROOT/run/miggate/ready`; state in `ROOT/run/miggate/recovery.json`).
    ///
    /// Exit status: 0 ready (or a guarded reboot was requested), 1 recovery failed (the state
    /// file says at which step and why; the gate stays closed), 2 bad input or usage.
    Apply(ApplyArgs),
}

/// Which implementation controls the GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GpuControlArg {
    /// Everything through nvidia-smi.
    NvidiaSmi,
    /// NVML lists the GPUs and sets MIG mode and persistence; instances, placements and resets
    /// still go through nvidia-smi (NVML has no reset, and its instance calls are not wrapped
    /// safely).
    Nvml,
}

/// Where the host's tools and files are.
#[derive(Debug, clap::Args)]
pub struct HostArgs {
    /// How the GPUs are controlled.
    #[arg(long, value_enum, value_name = "IMPL", default_value_t = GpuControlArg::NvidiaSmi)]
    pub gpu_control: GpuControlArg,
    /// The NVML library to load with --gpu-control nvml, instead of libnvidia-ml.so.1.
    #[arg(long, visible_alias = "nvml-lib", value_name = "PATH")]
    pub nvml_library: Option<PathBuf>,
    /// nvidia-smi to run.
    #[arg(
        long,
        value_name = "PATH",
        env = "MIGGATE_NVIDIA_SMI",
        default_value = "nvidia-smi"
    )]
    pub nvidia_smi: PathBuf,
    /// sriov-manage to run (under the GPU Operator: /run/nvidia/driver/usr/lib/nvidia/sriov-manage).
    #[arg(long, value_name = "PATH", default_value = "/usr/lib/nvidia/sriov-manage")]
    pub sriov_manage: PathBuf,
    /// systemctl to run.
    #[arg(long, value_name = "PATH", default_value = "systemctl")]
    pub systemctl: PathBuf,
    /// Prefix of every host path read or written (/sys, /proc, /run, /var/lib, /usr/share); the
    /// layout file and -o are taken as given.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    #[command(flatten)]
    pub host: HostArgs,
    /// Write the layout here (atomically) instead of standard output. `-o` still takes a path,
    /// but refuses a format's name (`-o yaml`): everywhere else `-o` picks a format.
    #[arg(long = "out", short = 'o', alias = "output", value_name = "FILE",
          value_parser = super::FlagParser(super::out_path))]
    pub output: Option<PathBuf>,
    /// Who creates this node's MIG instances instead of recovery: `dra-dynamic-mig` (the NVIDIA
    /// DRA driver's DynamicMIG gate). Recorded as `migManagedBy`: recovery then never creates
    /// or destroys instances here.
    #[arg(long, value_name = "MANAGER", value_parser = parse_mig_manager)]
    pub mig_managed_by: Option<MigManager>,
}

/// `dra-dynamic-mig`, the one manager a layout names.
pub(crate) fn parse_mig_manager(text: &str) -> Result<MigManager, String> {
    match text.trim() {
        "dra-dynamic-mig" => Ok(MigManager::DraDynamicMig),
        other => Err(format!(
            "`{}` is not a MIG manager miggate knows; expected dra-dynamic-mig",
            escape(other)
        )),
    }
}

#[derive(Debug, clap::Args)]
pub struct LayoutArgs {
    #[command(flatten)]
    pub host: HostArgs,
    /// The layout recorded by `miggate recover record`.
    #[arg(long, value_name = "FILE")]
    pub layout: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub args: LayoutArgs,
    /// Never reboot, even once, when a reset is not supported: fail instead.
    #[arg(long)]
    pub no_reboot: bool,
    /// How long to wait for the driver to list every GPU of the layout (`120s`, `5m`; a bare
    /// number is seconds).
    #[arg(long, value_name = "DURATION", default_value = "120s",
          value_parser = crate::duration::DurationParser::seconds(0, 86400))]
    pub driver_timeout: Duration,
    /// A unit that must be active before anything is changed (repeatable), e.g. the vGPU host
    /// daemons nvidia-vgpud.service and nvidia-vgpu-mgr.service.
    #[arg(long, value_name = "UNIT")]
    pub wait_unit: Vec<String>,
}
