//! `miggate recover record|plan|apply`: boot recovery of a node's MIG, SR-IOV and vGPU layout.
//!
//! Every host path is under `--root`, and the commands run are the ones named by flag, so a
//! test (or a chroot) can stand files and scripts in for the host.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use miggate_compat::escape::escape;
use miggate_recovery::real::{
    CaptureInventory, FileGate, FileStore, NvidiaSmi, NvmlControl, RootedSysfs, SriovManageScript,
    SystemClock, Systemctl,
};
use miggate_recovery::seams::{GpuControl, Host};
use miggate_recovery::{Layout, Options, Outcome, Progress, apply, observe, plan};

use crate::flags::recover::{
    ApplyArgs, GpuControlArg, HostArgs, LayoutArgs, RecordArgs, RecoverArgs, RecoverCommand,
};
use crate::input::closed_pipe_is_fine;

/// `plan`'s exit status when steps are pending.
const STEPS_PENDING: u8 = 3;

/// The GPU control chosen by `--gpu-control`.
enum Gpu {
    Smi(NvidiaSmi),
    Nvml(Box<NvmlControl>),
}

/// The real seams under one root.
struct Real {
    gpu: Gpu,
    sysfs: RootedSysfs,
    sriov: SriovManageScript,
    services: Systemctl,
    gate: FileGate,
    clock: SystemClock,
    store: FileStore,
    inventory: CaptureInventory,
}

impl Real {
    /// The seams; with `--gpu-control nvml` the library is loaded here, once for the command.
    fn new(args: &HostArgs) -> anyhow::Result<Real> {
        let smi = NvidiaSmi::new(
            args.nvidia_smi.clone(),
            Duration::from_secs(60),
            Duration::from_secs(300),
        );
        let gpu = match args.gpu_control {
            GpuControlArg::NvidiaSmi => Gpu::Smi(smi),
            GpuControlArg::Nvml => Gpu::Nvml(Box::new(
                NvmlControl::open(args.nvml_library.as_deref(), smi).context(
                    "cannot control the GPUs through NVML (name the library with --nvml-library, or use --gpu-control nvidia-smi)",
                )?,
            )),
        };
        Ok(Real {
            gpu,
            sysfs: RootedSysfs::new(&args.root),
            sriov: SriovManageScript::new(args.sriov_manage.clone(), Duration::from_secs(180)),
            services: Systemctl::new(args.systemctl.clone(), Duration::from_secs(120)),
            gate: FileGate::new(&args.root),
            clock: SystemClock::new(),
            store: FileStore::new(&args.root),
            inventory: CaptureInventory::new(args.nvidia_smi.clone(), &args.root, Duration::from_secs(60)),
        })
    }

    fn host(&self) -> Host<'_> {
        let gpu: &dyn GpuControl = match &self.gpu {
            Gpu::Smi(smi) => smi,
            Gpu::Nvml(nvml) => nvml.as_ref(),
        };
        Host {
            gpu,
            sysfs: &self.sysfs,
            sriov: &self.sriov,
            services: &self.services,
            gate: &self.gate,
            clock: &self.clock,
            store: &self.store,
            inventory: &self.inventory,
        }
    }
}

/// Runs `miggate recover …`.
pub fn run(args: &RecoverArgs) -> anyhow::Result<ExitCode> {
    match &args.command {
        RecoverCommand::Record(a) => record(a),
        RecoverCommand::Plan(a) => plan_cmd(a),
        RecoverCommand::Apply(a) => apply_cmd(a),
    }
}

/// Prints lines, each escaped: layout and node text (profile names, command output) is outside
/// text.
fn print_lines(text: &str) -> anyhow::Result<()> {
    let mut out = anstream::stdout().lock();
    let mut written = Ok(());
    for line in text.lines() {
        written = written.and_then(|()| writeln!(out, "{}", escape(line)));
    }
    closed_pipe_is_fine(written.and_then(|()| out.flush())).context("cannot write to standard output")
}

fn record(args: &RecordArgs) -> anyhow::Result<ExitCode> {
    let real = Real::new(&args.host)?;
    let (mut layout, warnings) =
        miggate_recovery::record(&real.host()).context("cannot read the node's layout")?;
    layout.mig_managed_by = args.mig_managed_by;
    for w in &warnings {
        eprintln!("miggate: warning: {}", escape(w));
    }
    match &args.output {
        Some(path) => {
            layout.write(path)?;
            eprintln!(
                "recorded {} into {}",
                counted(layout.gpus.len(), "GPU", "GPUs"),
                escape(&path.display().to_string())
            );
        }
        None => print_lines(&layout.to_yaml()?)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn read_layout(path: &Path) -> anyhow::Result<Layout> {
    Ok(Layout::read(path)?)
}

fn plan_cmd(args: &LayoutArgs) -> anyhow::Result<ExitCode> {
    let layout = read_layout(&args.layout)?;
    let real = Real::new(&args.host)?;
    let node = observe(&real.host()).context("cannot read the node")?;
    let p = plan(&layout, &node);
    let mut text = p.pictures.join("\n");
    if p.is_noop() {
        text.push_str("\nnothing to do: the node matches the layout\n");
    } else if p.steps.is_empty() {
        text.push_str("\nno steps can be planned until the blockers below are cleared\n");
    } else {
        text.push_str(&format!("\n{} steps:\n", p.steps.len()));
        for (n, step) in p.steps.iter().enumerate() {
            text.push_str(&format!("{:>3}. {step}\n", n + 1));
        }
    }
    print_lines(&text)?;
    if !p.blockers.is_empty() {
        let list: Vec<String> = p.blockers.iter().map(ToString::to_string).collect();
        anyhow::bail!(
            "the layout cannot be applied as the node stands:\n  {}",
            list.join("\n  ")
        );
    }
    Ok(if p.steps.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(STEPS_PENDING)
    })
}

fn apply_cmd(args: &ApplyArgs) -> anyhow::Result<ExitCode> {
    let layout = read_layout(&args.args.layout)?;
    let real = Real::new(&args.args.host)?;
    let options = Options {
        allow_reboot: !args.no_reboot,
        driver_timeout: args.driver_timeout,
        wait_units: args.wait_unit.clone(),
        ..Options::default()
    };
    let mut out = anstream::stdout().lock();
    let mut progress = |p: &Progress<'_>| {
        let took = p
            .took
            .map_or(String::new(), |t| format!(" ({:.2}s)", t.as_secs_f64()));
        // A closed stdout must not stop recovery; the state file still says where it is.
        let _ = writeln!(
            out,
            "[{:>8.2}s] {}: {}{took}",
            p.at.as_secs_f64(),
            escape(p.step.as_str()),
            escape(p.message)
        );
        let _ = out.flush();
    };
    match apply(&layout, real.host(), &options, &mut progress) {
        Ok(Outcome::Ready { changed }) => {
            let _ = writeln!(
                out,
                "ready: {}",
                if changed {
                    "recovered and verified"
                } else {
                    "already matched the layout"
                }
            );
            Ok(ExitCode::SUCCESS)
        }
        Ok(Outcome::Rebooting) => {
            let _ = writeln!(
                out,
                "rebooting once to make MIG mode effective; recovery continues at the next boot"
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(failure) => {
            let _ = writeln!(
                std::io::stderr(),
                "miggate: recovery failed at {}",
                escape(&failure.to_string())
            );
            Ok(ExitCode::from(1))
        }
    }
}

/// `1 GPU`, `2 GPUs`: a count with the word that fits it.
fn counted(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}
