//! The command line: the top-level parser and the dispatch to each command's module. Exit codes
//! are a contract: 0 compatible (or done), 1 refused, 2 bad input or usage. Every command's
//! flags are in `flags/`, which imports no command, so no command and this module import
//! each other.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::flags::capture::CaptureArgs;
use crate::flags::check::CheckArgs;
use crate::flags::convert::ConvertArgs;
use crate::flags::place::WhereArgs;

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
    /// Print a manifest, or one of the Go peer's artifacts translated, as a miggate manifest.
    ///
    /// Reads miggate manifests, the peer's checkpoint manifest.yaml and a PodSnapshotContent
    /// (or its status.source); the translation's warnings are in the output's `warnings`.
    /// Exit status: 0 printed, 2 unreadable.
    Convert(ConvertArgs),
    /// Which nodes of a store can take a checkpoint: offer mode against every node inventory.
    ///
    /// Fitting nodes come first, best fit (fewest spare devices of the checkpoint's classes)
    /// first; refused nodes follow with the first check that refused. Exit status: 0 some node
    /// fits, 1 none does, 2 bad input or usage.
    Where(WhereArgs),
    /// Print a DRA ResourceClaimTemplate for the checkpoint's GPU shape, so the scheduler
    /// places its restore where such devices exist (see docs/steering.md).
    ///
    /// One request per device class: MIG slices by product and profile (DeviceClass
    /// mig.nvidia.com), whole GPUs by product (gpu.nvidia.com), with the checkpoint's counts and
    /// driver versions. Exit status: 0 written, 2 a checkpoint that cannot be claimed.
    Claim(crate::flags::claim::ClaimArgs),
    /// Print the manifest's JSON Schema.
    Schema,
    /// Print the CRDs of GpuCheckpoint and GpuNode (`miggate crds | kubectl apply -f -`).
    Crds,
    /// Retired: says where the install went (the Helm chart, or `kubectl apply -k deploy/`).
    #[command(hide = true, disable_help_flag = true)]
    Deploy(crate::flags::deploy::RetiredArgs),
    /// Walk the install on the cluster and say what is wrong and how to fix it.
    ///
    /// One line per check (✔ passes, ⚠ at risk, ✖ fails, each with a hint): the CRDs, the
    /// webhook's replicas and their readiness, every webhook configuration's caBundle against the
    /// served certificate, the certificate's dates, the caches, a dry-run restore the API server
    /// must send to the webhook, every GPU node's inventory source, the policies and the
    /// namespaces the gate covers. Exit status: 0 nothing fails, 1 something fails, 2 bad input.
    Doctor(crate::flags::doctor::DoctorArgs),
    /// Serve the admission webhook (HTTPS) that refuses incompatible restore pods.
    ///
    /// Runs until SIGTERM, then drains in-flight requests. Exit status: 0 stopped, 2 cannot start.
    Webhook(Box<crate::flags::webhook::WebhookArgs>),
    /// Publish this node's GPU inventory as its GpuNode, and boot recovery's state (a DaemonSet).
    ///
    /// Runs until SIGTERM. Exit status: 0 stopped, 2 cannot start.
    Publish(crate::flags::publish::PublishArgs),
    /// Boot recovery: record a node's MIG, SR-IOV and vGPU layout, plan the difference, and
    /// apply it after a reboot (see docs/recovery.md).
    Recover(crate::flags::recover::RecoverArgs),
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Capture(args) => crate::capture::run(&args),
        Command::Check(args) => crate::check::run(&args),
        Command::Webhook(args) => crate::webhook::run(&args),
        Command::Publish(args) => crate::publish::run(&args),
        Command::Convert(args) => crate::convert::run(&args),
        Command::Where(args) => crate::place::run(&args),
        Command::Claim(args) => crate::claim::run(&args),
        Command::Schema => {
            print!("{}", miggate_compat::manifest_schema());
            Ok(ExitCode::SUCCESS)
        }
        Command::Crds => crate::crds::run(),
        Command::Deploy(_) => crate::deploy::run(),
        Command::Recover(args) => crate::recover::run(&args),
        Command::Doctor(args) => crate::doctor::run(&args),
    }
}
