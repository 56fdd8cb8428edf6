//! A captured manifest drawn as a tree: each GPU with the slices cut from it, so a person sees
//! at a glance which devices are whole GPUs and which are slices of which card.

use std::io::{self, Write};

use anstyle::{AnsiColor, Style};
use miggate_compat::{Device, DeviceKind, Gpu, GpuManifest, MigMode, Warning};

use crate::printable::printable;

fn mode_text(mode: Option<MigMode>) -> &'static str {
    match mode {
        Some(MigMode::Enabled) => "MIG enabled",
        Some(MigMode::Disabled) => "MIG disabled",
        Some(MigMode::PendingEnable) => "MIG pending enable (reset needed)",
        Some(MigMode::PendingDisable) => "MIG pending disable (reset needed)",
        None => "MIG n/a",
    }
}

fn or_dash(v: Option<&str>) -> std::borrow::Cow<'_, str> {
    printable(v.unwrap_or("-"))
}

fn device_line(d: &Device) -> String {
    let mut parts = Vec::new();
    match d.kind() {
        DeviceKind::Slice => parts.push(
            d.mig_profile
                .as_ref()
                .map_or("slice (profile unknown)".to_string(), |p| {
                    printable(p.as_str()).into_owned()
                }),
        ),
        DeviceKind::Whole => parts.push("whole GPU".to_string()),
        DeviceKind::Unknown => parts.push("device (kind unknown)".to_string()),
    }
    parts.push(or_dash(d.uuid.as_deref()).into_owned());
    if let (Some(gi), Some(ci)) = (d.gpu_instance_id, d.compute_instance_id) {
        parts.push(format!("gi {gi} ci {ci}"));
    }
    if let Some(m) = d.memory_mib {
        parts.push(format!("{m} MiB"));
    }
    parts.join("  ")
}

/// The tree branch for item `n` of `len`.
fn branch(n: usize, len: usize) -> &'static str {
    if n + 1 == len { "└──" } else { "├──" }
}

/// Writes the tree.
pub fn write_tree(out: &mut impl Write, m: &GpuManifest) -> io::Result<()> {
    let bold = Style::new().bold();
    write_host(out, m)?;
    let gpus = m
        .nvidia
        .as_ref()
        .and_then(|n| n.gpus.as_deref())
        .unwrap_or_default();
    let devices = m.devices();
    let listed = devices.unwrap_or_default();
    let mut shown = vec![false; listed.len()];
    for gpu in gpus {
        write_gpu(out, gpu, devices, &mut shown)?;
    }
    let rest: Vec<&Device> = listed
        .iter()
        .zip(&shown)
        .filter(|(_, s)| !**s)
        .map(|(d, _)| d)
        .collect();
    if !rest.is_empty() {
        writeln!(out, "{bold}devices without a listed GPU{bold:#}")?;
        for (n, d) in rest.iter().enumerate() {
            writeln!(out, "{} {}", branch(n, rest.len()), device_line(d))?;
        }
    }
    write_summary(out, devices, &m.warnings)
}

/// The first line: node, kernel, architecture, driver, CUDA and how it was captured.
fn write_host(out: &mut impl Write, m: &GpuManifest) -> io::Result<()> {
    let bold = Style::new().bold();
    let dim = Style::new().dimmed();
    let host = m.host.as_ref();
    let nvidia = m.nvidia.as_ref();
    writeln!(
        out,
        "{bold}{}{bold:#}  kernel {}  {}  driver {}  CUDA {}  {dim}(via {}){dim:#}",
        or_dash(host.and_then(|h| h.node_name.as_deref())),
        or_dash(host.and_then(|h| h.kernel_version.as_ref()).map(|v| v.as_str())),
        or_dash(host.and_then(|h| h.cpu_arch.as_deref())),
        or_dash(nvidia.and_then(|n| n.driver_version.as_ref()).map(|v| v.as_str())),
        or_dash(
            nvidia
                .and_then(|n| n.cuda_driver_version.as_ref())
                .map(|v| v.as_str())
        ),
        or_dash(m.captured_by.as_ref().and_then(|c| c.backend.as_deref())),
    )
}

/// A GPU's line and its devices (its slices, or itself whole) beneath it, each marked in
/// `shown`; a line saying why when it has none.
fn write_gpu(
    out: &mut impl Write,
    gpu: &Gpu,
    devices: Option<&[Device]>,
    shown: &mut [bool],
) -> io::Result<()> {
    let bold = Style::new().bold();
    let dim = Style::new().dimmed();
    writeln!(
        out,
        "{bold}GPU {}{bold:#}  {}  {}  {}{}",
        gpu.index.map_or("?".to_string(), |i| i.to_string()),
        or_dash(gpu.product_name.as_deref()),
        or_dash(gpu.uuid.as_deref()),
        mode_text(gpu.mig_mode),
        gpu.memory_mib.map_or(String::new(), |m| format!("  {m} MiB")),
    )?;
    let uuid = gpu.uuid.as_deref();
    let mine: Vec<(usize, &Device)> = devices
        .unwrap_or_default()
        .iter()
        .enumerate()
        .filter(|(_, d)| {
            uuid.is_some()
                && (d.parent_uuid.as_deref() == uuid
                    || (d.kind() != DeviceKind::Slice && d.uuid.as_deref() == uuid))
        })
        .collect();
    if mine.is_empty() {
        let why = match (devices, gpu.mig_mode.is_some_and(MigMode::is_active)) {
            (None, _) => "devices unknown",
            (Some(_), true) => "no MIG devices: offers nothing",
            (Some(_), false) => "not visible as a device",
        };
        writeln!(out, "└── {dim}{why}{dim:#}")?;
    }
    for (n, (i, d)) in mine.iter().enumerate() {
        if let Some(s) = shown.get_mut(*i) {
            *s = true;
        }
        writeln!(out, "{} {}", branch(n, mine.len()), device_line(d))?;
    }
    Ok(())
}

/// The device count by kind (or that the devices are unknown), then the manifest's warnings.
fn write_summary(out: &mut impl Write, devices: Option<&[Device]>, warnings: &[Warning]) -> io::Result<()> {
    match devices {
        None => writeln!(
            out,
            "\n{}devices: unknown{:#}",
            AnsiColor::Yellow.on_default(),
            AnsiColor::Yellow.on_default()
        )?,
        Some(ds) => {
            let slices = ds.iter().filter(|d| d.kind() == DeviceKind::Slice).count();
            let whole = ds.iter().filter(|d| d.kind() == DeviceKind::Whole).count();
            writeln!(out, "\ndevices: {} ({slices} slices, {whole} whole)", ds.len())?;
        }
    }
    if !warnings.is_empty() {
        let y = AnsiColor::Yellow.on_default();
        writeln!(out, "\n{y}warnings{y:#}")?;
        for w in warnings {
            writeln!(out, "  - {}", printable(&w.to_string()))?;
        }
    }
    Ok(())
}
