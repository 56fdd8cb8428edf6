//! The diff between the recorded layout and the node, as steps in the forced order, and a
//! picture of each GPU's placement slots before and after.
//!
//! The order is the hardware's: SR-IOV off (only when the MIG mode must change or the VF count
//! is wrong) → MIG mode (reset only if still pending) → `sriov-manage -e` (which wipes GPU
//! instances) → GPU and compute instances with placement → vGPU types per VF. A step that would
//! destroy a tenant's vGPU is never planned: it is a blocker instead.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use crate::bdf::Bdf;
use crate::layout::{GpuInstanceLayout, GpuLayout, Layout, MigSetting, Placement};
use crate::observe::{ObservedGpu, ObservedNode};

/// One change to make, in the order of the list it sits in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `sriov-manage -d`: VFs must go before a MIG mode change or a VF count change.
    SriovDisable {
        /// The PF whose VFs `sriov-manage -d` removes: the layout GPU's bus id.
        pf: Bdf,
        /// Why.
        why: &'static str,
    },
    /// Set MIG mode (a reset follows only if it stays pending).
    SetMigMode {
        /// The GPU whose MIG mode is set; it is reset if the mode stays pending.
        gpu: Bdf,
        /// The layout's mode; the GPU's current or pending mode differs from it.
        mode: MigSetting,
    },
    /// `sriov-manage -e`, verified in sysfs.
    SriovEnable {
        /// The PF whose VFs `sriov-manage -e` enables; the rebind wipes its GPU instances.
        pf: Bdf,
        /// The `sriov_numvfs` expected afterwards.
        num_vfs: u32,
    },
    /// Destroy every compute and GPU instance (they differ from the layout).
    DestroyInstances {
        /// The GPU whose instances differ from the layout; never planned while it has active vGPUs.
        gpu: Bdf,
    },
    /// Create GPU instances at their placements, and their compute instances.
    CreateInstances {
        /// The GPU to create them on; it holds no instances by then (destroyed or wiped).
        gpu: Bdf,
        /// What to create.
        instances: Vec<GpuInstanceLayout>,
    },
    /// Write a vGPU type id to a VF.
    WriteVgpuType {
        /// The PF whose VF `virtfn<vf_index>` is written.
        pf: Bdf,
        /// The VF index.
        vf_index: u32,
        /// The layout's vGPU type id, for the VF's `current_vgpu_type`; the VF carries none now.
        type_id: u32,
    },
}

impl Step {
    /// The step's name in progress lines and the state file.
    pub fn name(&self) -> &'static str {
        match self {
            Step::SriovDisable { .. } => "sriov-disable",
            Step::SetMigMode { .. } => "mig-mode",
            Step::SriovEnable { .. } => "sriov-enable",
            Step::DestroyInstances { .. } => "destroy-instances",
            Step::CreateInstances { .. } => "create-instances",
            Step::WriteVgpuType { .. } => "vgpu-type",
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::SriovDisable { pf, why } => write!(f, "{pf}: sriov-manage -d ({why})"),
            Step::SetMigMode { gpu, mode } => {
                write!(f, "{gpu}: set MIG mode {mode} (reset only if it stays pending)")
            }
            Step::SriovEnable { pf, num_vfs } => {
                write!(
                    f,
                    "{pf}: sriov-manage -e, expect sriov_numvfs {num_vfs} and each VF's nvidia/ directory"
                )
            }
            Step::DestroyInstances { gpu } => write!(f, "{gpu}: destroy all compute and GPU instances"),
            Step::CreateInstances { gpu, instances } => {
                let list: Vec<String> = instances
                    .iter()
                    .map(|gi| {
                        // The name is the layout's text: escaped, for the state file too.
                        format!(
                            "{}@{}",
                            gi.profile.as_deref().map_or_else(
                                || format!("profile {}", gi.profile_id),
                                |p| miggate_compat::escape::escape(p).into_owned()
                            ),
                            gi.placement
                        )
                    })
                    .collect();
                write!(f, "{gpu}: create GPU instances {}", list.join(", "))
            }
            Step::WriteVgpuType {
                pf,
                vf_index,
                type_id,
            } => {
                write!(f, "{pf}: VF {vf_index}: write vGPU type {type_id}")
            }
        }
    }
}

/// Why the layout cannot be applied as things stand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocker {
    /// A GPU of the layout is not on the node.
    MissingGpu(Bdf),
    /// A different board sits at the bus id.
    UuidMismatch {
        /// The layout GPU's bus id, where the node has a board with another UUID.
        bus: Bdf,
        /// The layout's UUID.
        want: String,
        /// The node's.
        have: String,
    },
    /// The layout wants MIG on a GPU that has none.
    NotMigCapable(Bdf),
    /// The layout wants VFs on a GPU without SR-IOV, or more than it has.
    NoSriov {
        /// The layout GPU's bus id (its PF).
        bus: Bdf,
        /// VFs wanted.
        want: u32,
        /// `sriov_totalvfs` (0: none).
        total: u32,
    },
    /// A change would destroy active vGPUs (VMs may be running on them).
    Busy {
        /// The GPU (its PF's bus id) whose active vGPUs the change would destroy.
        bus: Bdf,
        /// What needed doing.
        change: &'static str,
        /// VF indices carrying a vGPU.
        vfs: Vec<u32>,
    },
    /// A VF carries a vGPU type other than the layout's; never overwritten.
    ForeignVgpu {
        /// The PF's bus id, whose VF carries the other type.
        bus: Bdf,
        /// VF index.
        vf_index: u32,
        /// Its type now.
        have: u32,
        /// The layout's.
        want: u32,
    },
}

impl fmt::Display for Blocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Blocker::MissingGpu(bus) => write!(f, "GPU {bus} of the layout is not on this node"),
            Blocker::UuidMismatch { bus, want, have } => write!(
                f,
                "GPU {bus} is {} but the layout recorded {}: a different board; record the layout again",
                miggate_compat::escape::escape(have),
                miggate_compat::escape::escape(want)
            ),
            Blocker::NotMigCapable(bus) => {
                write!(f, "GPU {bus} is not MIG-capable but the layout enables MIG")
            }
            Blocker::NoSriov { bus, want, total } => {
                write!(
                    f,
                    "GPU {bus}: the layout wants {want} VFs, sriov_totalvfs is {total} (sriov-manage -e enables all of them)"
                )
            }
            Blocker::Busy { bus, change, vfs } => write!(
                f,
                "GPU {bus}: {change} would destroy the active vGPUs on VFs {vfs:?}; refusing (VMs may be running): stop them first"
            ),
            Blocker::ForeignVgpu {
                bus,
                vf_index,
                have,
                want,
            } => write!(
                f,
                "GPU {bus}: VF {vf_index} carries vGPU type {have}, the layout wants {want}; refusing to overwrite it"
            ),
        }
    }
}

/// The plan for a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// What stops the plan from being applied.
    pub blockers: Vec<Blocker>,
    /// Per GPU of the layout: the slots before and after.
    pub pictures: Vec<String>,
}

impl Plan {
    /// Nothing to do and nothing in the way.
    pub fn is_noop(&self) -> bool {
        self.steps.is_empty() && self.blockers.is_empty()
    }

    /// The steps and blockers of one GPU.
    pub fn for_gpu(&self, bus: &Bdf) -> impl Iterator<Item = &Step> {
        self.steps.iter().filter(move |s| match s {
            Step::SriovDisable { pf, .. } | Step::SriovEnable { pf, .. } | Step::WriteVgpuType { pf, .. } => {
                pf == bus
            }
            Step::SetMigMode { gpu, .. }
            | Step::DestroyInstances { gpu }
            | Step::CreateInstances { gpu, .. } => gpu == bus,
        })
    }
}

/// Comparable form of a GPU instance: placement, profile, compute instance profiles (names
/// are for people and not compared).
fn key(gi: &GpuInstanceLayout) -> (Placement, u32, Vec<u32>) {
    let mut cis: Vec<u32> = gi.compute_instances.iter().map(|c| c.profile_id).collect();
    cis.sort_unstable();
    (gi.placement, gi.profile_id, cis)
}

fn same_instances(a: &[GpuInstanceLayout], b: &[GpuInstanceLayout]) -> bool {
    let mut ka: Vec<_> = a.iter().map(key).collect();
    let mut kb: Vec<_> = b.iter().map(key).collect();
    ka.sort();
    kb.sort();
    ka == kb
}

/// What one GPU needs.
#[derive(Default)]
struct GpuDiff {
    disable: Option<&'static str>,
    set_mode: Option<MigSetting>,
    enable: Option<u32>,
    destroy: bool,
    create: Option<Vec<GpuInstanceLayout>>,
    writes: Vec<(u32, u32)>,
}

/// One GPU's diff: the mode, SR-IOV and instance steps, then the vGPU types. A blocker in the
/// first part stops the diff where it is found (what was found before it stays in the plan); the
/// vGPU types are only compared once nothing stands in their way.
fn diff_gpu(
    want: &GpuLayout,
    have: &ObservedGpu,
    instances_ours: bool,
    blockers: &mut Vec<Blocker>,
) -> GpuDiff {
    let mut d = GpuDiff::default();
    match diff_mode_and_instances(&mut d, want, have, instances_ours) {
        Ok(()) => diff_vgpu_types(&mut d, want, have, blockers),
        Err(blocker) => blockers.push(blocker),
    }
    d
}

/// The steps up to the GPU instances, in the hardware's order: each may wipe what the next one
/// compares, so each reads what `d` already holds. The first blocker ends them: the steps after it
/// would rest on one that cannot be taken.
fn diff_mode_and_instances(
    d: &mut GpuDiff,
    want: &GpuLayout,
    have: &ObservedGpu,
    instances_ours: bool,
) -> Result<(), Blocker> {
    let mode_wrong = mig_mode_wrong(want, have)?;
    check_vf_count(want, have)?;
    let active: Vec<u32> = have.active_vgpus().map(|v| v.index).collect();
    diff_sriov_disable(d, want, have, mode_wrong, &active)?;
    if mode_wrong {
        d.set_mode = Some(want.mig_mode);
    }
    diff_sriov_enable(d, want, have);
    diff_instances(d, want, have, instances_ours, mode_wrong, &active)
}

/// Whether the MIG mode must change, current or pending. A GPU without MIG meets a layout
/// only while that layout leaves MIG off, so one that enables it is a blocker.
fn mig_mode_wrong(want: &GpuLayout, have: &ObservedGpu) -> Result<bool, Blocker> {
    match have.mig {
        Some(m) => Ok(m.current != want.mig_mode || m.pending != want.mig_mode),
        None if want.mig_mode == MigSetting::Enabled => Err(Blocker::NotMigCapable(want.bus.clone())),
        None => Ok(false),
    }
}

/// `sriov-manage -e` enables every VF the PF has: no other count can be rebuilt.
fn check_vf_count(want: &GpuLayout, have: &ObservedGpu) -> Result<(), Blocker> {
    let total = have.sriov.map_or(0, |s| s.total);
    match want.sriov_num_vfs {
        Some(w) if w != 0 && w != total => Err(Blocker::NoSriov {
            bus: want.bus.clone(),
            want: w,
            total,
        }),
        _ => Ok(()),
    }
}

/// The VFs must go before the MIG mode or the VF count can change; removing them destroys
/// their vGPUs, so active ones (VMs may be running) block it instead.
fn diff_sriov_disable(
    d: &mut GpuDiff,
    want: &GpuLayout,
    have: &ObservedGpu,
    mode_wrong: bool,
    active: &[u32],
) -> Result<(), Blocker> {
    let have_vfs = have.num_vfs();
    let vf_count_wrong = want.sriov_num_vfs.is_some_and(|w| w != have_vfs);
    if have_vfs > 0 && (mode_wrong || vf_count_wrong) {
        let why = if mode_wrong {
            "the MIG mode must change"
        } else {
            "the VF count must change"
        };
        if !active.is_empty() {
            return Err(Blocker::Busy {
                bus: want.bus.clone(),
                change: why,
                vfs: active.to_vec(),
            });
        }
        d.disable = Some(why);
    }
    Ok(())
}

/// The layout's VFs are enabled when the PF will not have them: it has another count, or the
/// disable before this step removes the ones it has.
fn diff_sriov_enable(d: &mut GpuDiff, want: &GpuLayout, have: &ObservedGpu) {
    let vfs_after_disable = if d.disable.is_some() { 0 } else { have.num_vfs() };
    if let Some(w) = want.sriov_num_vfs
        && w > 0
        && vfs_after_disable != w
    {
        d.enable = Some(w);
    }
}

/// GPU instances are rebuilt whole when they differ from the layout, against what the earlier
/// steps leave of them. Destroying instances under active vGPUs is a blocker instead.
fn diff_instances(
    d: &mut GpuDiff,
    want: &GpuLayout,
    have: &ObservedGpu,
    instances_ours: bool,
    mode_wrong: bool,
    active: &[u32],
) -> Result<(), Blocker> {
    // A mode change, a reset and the PF rebind of `sriov-manage -e` all wipe GPU instances.
    let wiped = mode_wrong || d.enable.is_some();
    let current: &[GpuInstanceLayout] = if wiped { &[] } else { &have.instances };
    // Instances another manager creates (DynamicMIG) are never recreated nor destroyed here.
    if !instances_ours || same_instances(current, &want.gpu_instances) {
        return Ok(());
    }
    if !current.is_empty() {
        if !active.is_empty() {
            return Err(Blocker::Busy {
                bus: want.bus.clone(),
                change: "rebuilding the GPU instances",
                vfs: active.to_vec(),
            });
        }
        d.destroy = true;
    }
    if !want.gpu_instances.is_empty() {
        d.create = Some(want.gpu_instances.clone());
    }
    Ok(())
}

/// The vGPU type each layout VF needs written. A VF that carries another type is a tenant's:
/// it is a blocker of its own and never overwritten, and the other VFs are still compared.
fn diff_vgpu_types(d: &mut GpuDiff, want: &GpuLayout, have: &ObservedGpu, blockers: &mut Vec<Blocker>) {
    // `sriov-manage -e` recreates the VFs, which then carry no type.
    let vfs_recreated = d.enable.is_some();
    // VF index -> its vGPU type now, built once: a lookup per layout VF, not a scan.
    let types_now: BTreeMap<u32, u32> = have
        .vfs
        .iter()
        .map(|v| (v.index, v.vgpu.as_ref().map_or(0, |g| g.current)))
        .collect();
    for vf in &want.vfs {
        let now = if vfs_recreated {
            0
        } else {
            types_now.get(&vf.index).copied().unwrap_or(0)
        };
        if now == vf.vgpu_type_id {
            continue;
        }
        if now != 0 {
            blockers.push(Blocker::ForeignVgpu {
                bus: want.bus.clone(),
                vf_index: vf.index,
                have: now,
                want: vf.vgpu_type_id,
            });
            continue;
        }
        d.writes.push((vf.index, vf.vgpu_type_id));
    }
}

/// Compares the node with the layout. GPUs the layout does not name are left alone.
pub fn plan(layout: &Layout, node: &ObservedNode) -> Plan {
    let mut blockers = Vec::new();
    let mut diffs = Vec::new();
    let mut pictures = Vec::new();
    for want in &layout.gpus {
        let Some(have) = node.gpu(&want.bus) else {
            blockers.push(Blocker::MissingGpu(want.bus.clone()));
            continue;
        };
        if let Some(uuid) = &want.uuid
            && uuid != &have.uuid
        {
            blockers.push(Blocker::UuidMismatch {
                bus: want.bus.clone(),
                want: uuid.clone(),
                have: have.uuid.clone(),
            });
            continue;
        }
        let d = diff_gpu(want, have, layout.mig_managed_by.is_none(), &mut blockers);
        pictures.push(picture(want, have));
        diffs.push((want.bus.clone(), d));
    }
    let mut steps = Vec::new();
    for (bus, d) in &diffs {
        if let Some(why) = d.disable {
            steps.push(Step::SriovDisable { pf: bus.clone(), why });
        }
    }
    for (bus, d) in &diffs {
        if let Some(mode) = d.set_mode {
            steps.push(Step::SetMigMode {
                gpu: bus.clone(),
                mode,
            });
        }
    }
    for (bus, d) in &diffs {
        if let Some(num_vfs) = d.enable {
            steps.push(Step::SriovEnable {
                pf: bus.clone(),
                num_vfs,
            });
        }
    }
    for (bus, d) in &diffs {
        if d.destroy {
            steps.push(Step::DestroyInstances { gpu: bus.clone() });
        }
        if let Some(instances) = &d.create {
            steps.push(Step::CreateInstances {
                gpu: bus.clone(),
                instances: instances.clone(),
            });
        }
    }
    for (bus, d) in &diffs {
        for (vf_index, type_id) in &d.writes {
            steps.push(Step::WriteVgpuType {
                pf: bus.clone(),
                vf_index: *vf_index,
                type_id: *type_id,
            });
        }
    }
    if layout.mig_managed_by == Some(crate::layout::MigManager::DraDynamicMig) {
        pictures.push(
            "MIG instances are the DRA driver's (DynamicMIG: it creates a partition per allocated claim and destroys those it did not create): recovery leaves them alone"
                .to_string(),
        );
    }
    Plan {
        steps,
        blockers,
        pictures,
    }
}

/// A GPU's slots before (the node) and after (the layout): one column per memory slice, one
/// letter per GPU instance, the same letter where the same instance (profile and placement)
/// is on both sides.
///
/// ```text
/// 0000:18:00.0  MIG disabled -> enabled, VFs 0 -> 16, vGPUs 0 -> 3
///   slot    0  1  2  3  4  5  6  7
///   before  .  .  .  .  .  .  .  .
///   after   A  B  C  C  D  D  D  D
///   A = 1g.18gb (profile 19) at 0:1, 1 CI
/// ```
pub fn picture(want: &GpuLayout, have: &ObservedGpu) -> String {
    let after = &want.gpu_instances;
    let before: &[GpuInstanceLayout] = &have.instances;
    let slots = before
        .iter()
        .chain(after.iter())
        .map(|gi| gi.placement.start.saturating_add(gi.placement.size))
        .max()
        .unwrap_or(0)
        .clamp(8, 64);
    let mut letters: BTreeMap<(Placement, u32, Vec<u32>), (char, &GpuInstanceLayout)> = BTreeMap::new();
    let mut next = 0_u8;
    for gi in before.iter().chain(after.iter()) {
        letters.entry(key(gi)).or_insert_with(|| {
            let c = char::from(b'A' + next % 26);
            next = next.saturating_add(1);
            (c, gi)
        });
    }
    let row = |gis: &[GpuInstanceLayout]| {
        let mut cells = vec!['.'; slots as usize];
        for gi in gis {
            let c = letters.get(&key(gi)).map_or('?', |(c, _)| *c);
            for s in gi.placement.start..gi.placement.start.saturating_add(gi.placement.size).min(slots) {
                if let Some(cell) = cells.get_mut(s as usize) {
                    *cell = if *cell == '.' { c } else { '!' };
                }
            }
        }
        cells.iter().map(|c| format!("{c:>3}")).collect::<String>()
    };
    let mode = |m: Option<MigSetting>| m.map_or("n/a".to_string(), |m| m.to_string());
    let have_mode = match have.mig {
        Some(m) if m.pending != m.current => format!("{} (pending {})", m.current, m.pending),
        m => mode(m.map(|m| m.current)),
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}  MIG {} -> {}, VFs {} -> {}, vGPUs {} -> {}",
        want.bus,
        have_mode,
        want.mig_mode,
        have.num_vfs(),
        want.sriov_num_vfs
            .map_or("(unchanged)".to_string(), |n| n.to_string()),
        have.active_vgpus().count(),
        want.vfs.len()
    );
    let _ = writeln!(
        out,
        "  slot  {}",
        (0..slots).map(|s| format!("{s:>3}")).collect::<String>()
    );
    let _ = writeln!(out, "  before{}", row(before));
    let _ = writeln!(out, "  after {}", row(after));
    let mut legend: Vec<_> = letters.values().collect();
    legend.sort_by_key(|(c, _)| *c);
    for (c, gi) in legend {
        let name = gi.profile.as_deref().map_or(String::new(), |p| {
            format!("{} ", miggate_compat::escape::escape(p))
        });
        let _ = writeln!(
            out,
            "  {c} = {name}(profile {}) at {}, {} CI",
            gi.profile_id,
            gi.placement,
            gi.compute_instances.len()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Step text goes into progress lines and the state file `miggate publish` reports: a
    /// profile name from the layout carries no raw control characters into either.
    #[test]
    fn step_text_escapes_the_layouts_profile_names() {
        let step = Step::CreateInstances {
            gpu: Bdf::parse("0000:18:00.0").unwrap(),
            instances: vec![GpuInstanceLayout {
                placement: Placement { start: 0, size: 1 },
                profile_id: 19,
                profile: Some("1g\u{1b}[2J\nfake".to_string()),
                compute_instances: Vec::new(),
            }],
        };
        let text = step.to_string();
        assert!(!text.chars().any(char::is_control), "{text:?}");
        assert!(text.contains("1g") && text.contains("@0:1"), "{text}");
    }
}
