//! The behavioural fake node: one model of the hardware shared by every fake seam, so that the
//! cross-effects the reference lists live in one place.
//!
//! - A reset is refused with VFs enabled, or while a client holds the GPU (a holder service
//!   active, `nvidia_drm` loaded, compute processes, persistence on with persistenced
//!   unreachable); unsupported when `reset_supported` is off; refused for a strict subset of
//!   GPUs when `nvlink_group` is on, and with the generic `In use by another client` when
//!   `board_refuses_partial_reset` is (an NVSwitch board whose refusal does not say why). A reset makes the pending MIG mode current and wipes
//!   instances.
//! - `set_mig_mode` is refused with VFs enabled; it activates at once when `auto_activate`
//!   (Hopper) and nothing holds the GPU, else stays pending (Ampere, or busy).
//! - `sriov-manage -e` rebinds the PF: it wipes GPU instances; it fails transiently
//!   `sriov_transient_failures` times, is a silent no-op (exit 0, no VFs) `sriov_silent_noops`
//!   times, and is refused while compute processes hold the GPU. A VF's `nvidia/` directory
//!   appears `vf_dir_delay` after the VF.
//! - A `current_vgpu_type` write fails with EIO when MIG is on and no free GPU instance of the
//!   type's profile exists, EINVAL when the id is not creatable, EBUSY over another type.
//!   `creatable_vgpu_types` lists only types with a free GPU instance, so it shrinks as
//!   siblings fill.
//! - A reboot keeps `/var/lib` (the journal) and loses `/run` (the gate), VFs, instances and,
//!   unless `reboot_keeps_pending`, the MIG mode.
//!
//! Every mutating call is logged in order; `crash_after` makes the process "die" before the
//! next mutating call (every call fails from then on) until [`FakeNode::restart_process`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::bdf::Bdf;
use crate::error::{Error, ResetFailure, Result};
use crate::journal::Journal;
use crate::layout::{ComputeInstanceLayout, GpuInstanceLayout, MigSetting, Placement};
use crate::seams::{
    Clock, Gate, GpuControl, GpuInfo, Host, Inventory, MigModeState, Services, SriovManage, SriovState,
    StateStore, Sysfs, VfVgpu, VgpuType,
};
use miggate_wire::recovery::{Phase, RecoveryState};

/// A vGPU type the fake knows: which GPU instance profile backs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeVgpuType {
    /// The numeric id written to a VF's `current_vgpu_type` (1414 for `NVIDIA H200X-1-18C`).
    pub id: u32,
    /// The name listed beside the id among a VF's creatable types.
    pub name: String,
    /// The GPU instance profile that backs it.
    pub gi_profile: u32,
}

/// A GPU instance on the fake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeGi {
    /// Instance id.
    pub id: u32,
    /// Profile id.
    pub profile_id: u32,
    /// Placement.
    pub placement: Placement,
    /// Compute instance profile ids.
    pub cis: Vec<u32>,
}

/// A VF on the fake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeVf {
    /// Address.
    pub bdf: Bdf,
    /// `current_vgpu_type`.
    pub current: u32,
    /// The GPU instance its vGPU took.
    pub gi: Option<u32>,
    /// When (virtual time) its `nvidia/` directory appears.
    pub dir_at: Duration,
}

/// A physical GPU on the fake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeGpu {
    /// Bus id.
    pub bus: Bdf,
    /// UUID.
    pub uuid: String,
    /// MIG-capable.
    pub mig_capable: bool,
    /// Current mode.
    pub current: MigSetting,
    /// Pending mode.
    pub pending: MigSetting,
    /// Instances.
    pub gis: Vec<FakeGi>,
    /// Next instance id.
    pub next_gi: u32,
    /// `sriov_totalvfs` (None: no SR-IOV).
    pub total_vfs: Option<u32>,
    /// VFs (`sriov_numvfs` is their count).
    pub vfs: Vec<FakeVf>,
    /// Persistence mode.
    pub persistence: bool,
    /// Compute processes.
    pub pids: Vec<u32>,
}

impl FakeGpu {
    /// An H200-like GPU: MIG-capable, 16 VFs possible, MIG off, no instances.
    pub fn h200(bus: &str, uuid: &str) -> FakeGpu {
        FakeGpu {
            bus: Bdf::parse(bus)
                .unwrap_or_else(|_| Bdf::parse("0000:00:00.0").unwrap_or_else(|_| unreachable_bdf())),
            uuid: uuid.to_string(),
            mig_capable: true,
            current: MigSetting::Disabled,
            pending: MigSetting::Disabled,
            gis: Vec::new(),
            next_gi: 1,
            total_vfs: Some(16),
            vfs: Vec::new(),
            persistence: true,
            pids: Vec::new(),
        }
    }

    /// The GPU instances as the layout writes them.
    pub fn instances(&self) -> Vec<GpuInstanceLayout> {
        let mut out: Vec<GpuInstanceLayout> = self
            .gis
            .iter()
            .map(|gi| GpuInstanceLayout {
                placement: gi.placement,
                profile_id: gi.profile_id,
                profile: profile_name(gi.profile_id).map(String::from),
                compute_instances: gi
                    .cis
                    .iter()
                    .map(|c| ComputeInstanceLayout {
                        profile_id: *c,
                        profile: None,
                    })
                    .collect(),
            })
            .collect();
        out.sort();
        out
    }
}

#[allow(clippy::panic)]
fn unreachable_bdf() -> Bdf {
    panic!("a constant PCI address failed to parse")
}

/// VF `n` of a PF on bus `base` (`0000:18`): functions from `00.4` on, as on an H200.
fn vf(base: &str, n: u32, dir_at: Duration) -> Option<FakeVf> {
    Some(FakeVf {
        bdf: Bdf::parse(&format!("{base}:{:02x}.{}", (4 + n) / 8, (4 + n) % 8)).ok()?,
        current: 0,
        gi: None,
        dir_at,
    })
}

/// H200 GPU instance profiles: id, name, placements (start, size).
const PROFILES: &[(u32, &str, &[u32], u32)] = &[
    (19, "1g.18gb", &[0, 1, 2, 3, 4, 5, 6], 1),
    (20, "1g.18gb+me", &[0, 1, 2, 3, 4, 5, 6], 1),
    (15, "1g.35gb", &[0, 2, 4, 6], 2),
    (14, "2g.35gb", &[0, 2, 4], 2),
    (9, "3g.71gb", &[0, 4], 4),
    (5, "4g.71gb", &[0], 4),
    (0, "7g.141gb", &[0], 8),
];

fn profile_name(id: u32) -> Option<&'static str> {
    PROFILES.iter().find(|p| p.0 == id).map(|p| p.1)
}

/// The fake's whole state, public so that tests can set it up and assert on it.
#[derive(Debug, Clone)]
pub struct NodeState {
    /// GPUs.
    pub gpus: Vec<FakeGpu>,
    /// vGPU types.
    pub vgpu_types: Vec<FakeVgpuType>,
    /// MIG mode activates without a reset when nothing holds the GPU (Hopper).
    pub auto_activate: bool,
    /// A reset is possible at all.
    pub reset_supported: bool,
    /// NVLink-connected GPUs must be reset together.
    pub nvlink_group: bool,
    /// NVSwitches on the board (what the `nvswitches` seam read finds).
    pub nvswitches: u32,
    /// An NVSwitch board that refuses a reset of a strict subset of its GPUs with nvidia-smi's
    /// generic `In use by another client`, as a real HGX board may: the wording does not say
    /// the GPUs must be reset together.
    pub board_refuses_partial_reset: bool,
    /// nvidia-smi can reach persistenced's socket.
    pub persistenced_reachable: bool,
    /// Loaded kernel modules.
    pub modules: Vec<String>,
    /// The driver lists GPUs only after this many `gpus()` calls.
    pub driver_after: u32,
    /// `sriov-manage -e` fails this many more times (vGPU manager still starting).
    pub sriov_transient_failures: u32,
    /// `sriov-manage -e` exits 0 and creates nothing this many more times.
    pub sriov_silent_noops: u32,
    /// How long after a VF its `nvidia/` appears (`Duration::MAX`: never).
    pub vf_dir_delay: Duration,
    /// Units and whether they are active.
    pub units: BTreeMap<String, bool>,
    /// Units that hold the GPUs while active.
    pub holders: Vec<String>,
    /// The fabric manager's FABRIC_MODE.
    pub fabric_mode: Option<u32>,
    /// A reboot keeps a pending MIG mode and makes it current (Ampere); else MIG mode is lost.
    pub reboot_keeps_pending: bool,
    /// The mutating calls, in order.
    pub calls: Vec<String>,
    /// Die before mutating call number `n` (0-based).
    pub crash_after: Option<usize>,
    /// The process is dead.
    pub crashed: bool,
    /// The readiness file exists.
    pub ready: bool,
    /// The state file as last published; `None` until then, and after a boot (it lives in `/run`).
    pub state: Option<RecoveryState>,
    /// Every state published, in order.
    pub published: Vec<Phase>,
    /// The journal as last saved; a boot keeps it (it lives in `/var/lib`).
    pub journal: Option<Journal>,
    /// Virtual time.
    pub now: Duration,
    /// Reboots requested.
    pub reboots: u32,
    /// Boots so far (the boot id changes with each).
    pub boots: u32,
    /// The driver version capture reports.
    pub driver_version: String,
    /// The GPU listing names VFs too (as old tools did: mig-parted #14).
    pub lists_vfs: bool,
    /// The readiness file cannot be removed (a read-only or broken `/run`).
    pub gate_stuck_open: bool,
}

/// The fake node; clones share one state.
#[derive(Debug, Clone)]
pub struct FakeNode {
    state: Arc<Mutex<NodeState>>,
}

impl FakeNode {
    /// A node with these GPUs, H200 vGPU types (1g → 1414, 2g → 1415, 3g → 1416, 7g → 1417),
    /// Hopper auto-activation, reset supported, persistenced reachable, the driver loaded, and
    /// nvidia-persistenced and nvidia-fabricmanager active.
    pub fn new(gpus: Vec<FakeGpu>) -> FakeNode {
        let types = [
            (1414, "NVIDIA H200X-1-18C", 19),
            (1415, "NVIDIA H200X-2-35C", 14),
            (1416, "NVIDIA H200X-3-71C", 9),
            (1417, "NVIDIA H200X-7-141C", 0),
        ];
        let units = ["nvidia-persistenced.service", "nvidia-fabricmanager.service"];
        FakeNode {
            state: Arc::new(Mutex::new(NodeState {
                gpus,
                vgpu_types: types
                    .iter()
                    .map(|(id, name, gi)| FakeVgpuType {
                        id: *id,
                        name: name.to_string(),
                        gi_profile: *gi,
                    })
                    .collect(),
                auto_activate: true,
                reset_supported: true,
                nvlink_group: false,
                nvswitches: 0,
                board_refuses_partial_reset: false,
                persistenced_reachable: true,
                modules: vec!["nvidia".to_string()],
                driver_after: 0,
                sriov_transient_failures: 0,
                sriov_silent_noops: 0,
                vf_dir_delay: Duration::ZERO,
                units: units.iter().map(|u| (u.to_string(), true)).collect(),
                holders: Vec::new(),
                fabric_mode: None,
                reboot_keeps_pending: false,
                calls: Vec::new(),
                crash_after: None,
                crashed: false,
                ready: false,
                state: None,
                published: Vec::new(),
                journal: None,
                now: Duration::ZERO,
                reboots: 0,
                boots: 0,
                driver_version: "580.82.07".to_string(),
                lists_vfs: false,
                gate_stuck_open: false,
            })),
        }
    }

    /// The state, to set up or inspect.
    pub fn lock(&self) -> MutexGuard<'_, NodeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The seams, all backed by this node.
    pub fn host(&self) -> Host<'_> {
        Host {
            gpu: self,
            sysfs: self,
            sriov: self,
            services: self,
            gate: self,
            clock: self,
            store: self,
            inventory: self,
        }
    }

    /// Puts a PF's VFs up at once, unlogged (a node whose VFs someone enabled before recovery
    /// ran), each with its `nvidia/` directory and no vGPU.
    pub fn sriov_enable_now(&self, pf: &str) {
        let Ok(pf) = Bdf::parse(pf) else { return };
        let mut s = self.lock();
        let Ok(g) = s.gpu(&pf) else { return };
        let base = pf
            .as_str()
            .rsplit_once(':')
            .map_or("0000:00", |(b, _)| b)
            .to_string();
        g.vfs = (0..g.total_vfs.unwrap_or(0))
            .filter_map(|n| vf(&base, n, Duration::ZERO))
            .collect();
    }

    /// The mutating calls so far, and clears them.
    pub fn take_calls(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().calls)
    }

    /// A new process after a crash: calls work again; the node, the journal and `/run` stay.
    pub fn restart_process(&self) {
        let mut s = self.lock();
        s.crashed = false;
        s.crash_after = None;
    }

    /// Boots the node again (what `systemctl reboot` leads to): `/run` and the hardware state
    /// are lost, `/var/lib` stays.
    pub fn boot(&self) {
        let mut s = self.lock();
        s.boots += 1;
        let keep = s.reboot_keeps_pending;
        for g in &mut s.gpus {
            if keep {
                g.current = g.pending;
            } else {
                g.current = MigSetting::Disabled;
                g.pending = MigSetting::Disabled;
            }
            g.gis.clear();
            g.vfs.clear();
            g.persistence = true;
            g.pids.clear();
        }
        for active in s.units.values_mut() {
            *active = true;
        }
        s.ready = false;
        s.state = None;
        s.crashed = false;
        s.crash_after = None;
    }
}

impl NodeState {
    fn gpu(&mut self, bus: &Bdf) -> Result<&mut FakeGpu> {
        self.gpus
            .iter_mut()
            .find(|g| &g.bus == bus)
            .ok_or_else(|| Error::Command {
                command: format!("fake {bus}"),
                status: "exit 6".to_string(),
                output: format!("No devices were found matching {bus}"),
            })
    }

    /// Whether something other than VFs holds the GPU.
    fn held(&self, gpu: &FakeGpu) -> bool {
        self.holders
            .iter()
            .any(|u| self.units.get(u).copied().unwrap_or(false))
            || self.modules.iter().any(|m| m == "nvidia_drm")
            || !gpu.pids.is_empty()
            || (gpu.persistence
                && !self.persistenced_reachable
                && self
                    .units
                    .get("nvidia-persistenced.service")
                    .copied()
                    .unwrap_or(false))
    }

    /// Checks the crash switch before a read.
    fn alive(&self) -> Result<()> {
        if self.crashed {
            Err(FakeError::Crashed.into())
        } else {
            Ok(())
        }
    }

    /// Logs a mutating call, or dies before it.
    fn mutate(&mut self, call: String) -> Result<()> {
        self.alive()?;
        if self.crash_after == Some(self.calls.len()) {
            self.crashed = true;
            return Err(FakeError::Crashed.into());
        }
        self.calls.push(call);
        Ok(())
    }

    /// Marks the last logged call as failed.
    fn failed(&mut self, why: &str) {
        if let Some(last) = self.calls.last_mut() {
            last.push_str(" => ");
            last.push_str(why);
        }
    }

    fn free_gi(&self, gpu: &FakeGpu, profile: u32) -> Option<u32> {
        gpu.gis
            .iter()
            .find(|gi| gi.profile_id == profile && !gpu.vfs.iter().any(|v| v.gi == Some(gi.id)))
            .map(|gi| gi.id)
    }

    fn creatable(&self, gpu: &FakeGpu, vf: &FakeVf) -> Vec<VgpuType> {
        if vf.current != 0 || gpu.current != MigSetting::Enabled {
            return Vec::new();
        }
        self.vgpu_types
            .iter()
            .filter(|t| self.free_gi(gpu, t.gi_profile).is_some())
            .map(|t| VgpuType {
                id: t.id,
                name: t.name.clone(),
            })
            .collect()
    }
}

/// The fake's own failures, which no real seam has: they reach callers as [`Error::Seam`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FakeError {
    /// The node was told to crash after a number of mutating calls (`crash_after`).
    #[error("injected crash: the process is gone")]
    Crashed,
    /// The fake's manifest did not build (a fake set up with facts capture would refuse).
    #[error("capturing the node's manifest: {0}")]
    Manifest(#[source] miggate_compat::Error),
}

impl From<FakeError> for Error {
    fn from(e: FakeError) -> Error {
        Error::Seam(Box::new(e))
    }
}

fn cmd_err(command: String, output: &str) -> Error {
    Error::Command {
        command,
        status: "exit 1".to_string(),
        output: output.to_string(),
    }
}

impl GpuControl for FakeNode {
    fn gpus(&self) -> Result<Vec<GpuInfo>> {
        let mut s = self.lock();
        s.alive()?;
        if s.driver_after > 0 || !s.modules.iter().any(|m| m == "nvidia") {
            s.driver_after = s.driver_after.saturating_sub(1);
            return Err(cmd_err(
                "nvidia-smi --query-gpu".into(),
                "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
            ));
        }
        let mut listed: Vec<GpuInfo> = s
            .gpus
            .iter()
            .map(|g| GpuInfo {
                bus: g.bus.clone(),
                uuid: g.uuid.clone(),
                mig: g.mig_capable.then_some(MigModeState {
                    current: g.current,
                    pending: g.pending,
                }),
            })
            .collect();
        if s.lists_vfs {
            for (n, vf) in s.gpus.iter().flat_map(|g| g.vfs.iter()).enumerate() {
                listed.push(GpuInfo {
                    bus: vf.bdf.clone(),
                    uuid: format!("GPU-vf-{n}"),
                    mig: None,
                });
            }
        }
        Ok(listed)
    }

    fn set_mig_mode(&self, gpu: &Bdf, mode: MigSetting) -> Result<()> {
        let mut s = self.lock();
        s.mutate(format!(
            "nvidia-smi -i {gpu} -mig {}",
            u8::from(mode == MigSetting::Enabled)
        ))?;
        let auto = s.auto_activate;
        let g = s.gpu(gpu)?.clone();
        if !g.vfs.is_empty() {
            s.failed("In use by another client");
            return Err(cmd_err(
                format!("nvidia-smi -i {gpu} -mig"),
                "Unable to set MIG mode: In use by another client",
            ));
        }
        let held = s.held(&g);
        let g = s.gpu(gpu)?;
        g.pending = mode;
        if auto && !held && g.current != mode {
            g.current = mode;
            g.gis.clear();
        }
        Ok(())
    }

    fn reset(&self, gpus: &[Bdf]) -> Result<()> {
        let mut s = self.lock();
        let list = gpus.iter().map(Bdf::as_str).collect::<Vec<_>>().join(",");
        s.mutate(format!("nvidia-smi -r -i {list}"))?;
        let fail = |s: &mut NodeState, kind: ResetFailure, output: &str| {
            s.failed(&kind.to_string());
            Err(Error::Reset {
                gpus: gpus.to_vec(),
                kind,
                output: output.to_string(),
            })
        };
        if !s.reset_supported {
            return fail(
                &mut s,
                ResetFailure::NotSupported,
                "Resetting GPU is not supported.",
            );
        }
        if s.nvlink_group && gpus.len() < s.gpus.len() {
            return fail(
                &mut s,
                ResetFailure::NvlinkGroup,
                "GPUs connected by NVLink must be reset together",
            );
        }
        if s.board_refuses_partial_reset && gpus.len() < s.gpus.len() {
            let bus = gpus.first().map_or("", Bdf::as_str).to_string();
            return fail(
                &mut s,
                ResetFailure::InUse,
                &format!("The following GPUs could not be reset:\n  GPU {bus}: In use by another client"),
            );
        }
        for bus in gpus {
            let g = s.gpu(bus)?.clone();
            if !g.vfs.is_empty() || s.held(&g) {
                return fail(
                    &mut s,
                    ResetFailure::InUse,
                    &format!("The following GPUs could not be reset:\n  GPU {bus}: In use by another client"),
                );
            }
        }
        for bus in gpus {
            let g = s.gpu(bus)?;
            g.current = g.pending;
            g.gis.clear();
        }
        Ok(())
    }

    fn set_persistence(&self, gpu: &Bdf, on: bool) -> Result<()> {
        let mut s = self.lock();
        s.mutate(format!("nvidia-smi -i {gpu} -pm {}", u8::from(on)))?;
        s.gpu(gpu)?.persistence = on;
        Ok(())
    }

    fn instances(&self, gpu: &Bdf) -> Result<Vec<GpuInstanceLayout>> {
        let mut s = self.lock();
        s.alive()?;
        Ok(s.gpu(gpu)?.instances())
    }

    fn gpu_instance_profiles(&self, gpu: &Bdf) -> Result<Vec<(u32, String)>> {
        let mut s = self.lock();
        s.alive()?;
        s.gpu(gpu)?;
        Ok(PROFILES
            .iter()
            .map(|(id, name, _, _)| (*id, name.to_string()))
            .collect())
    }

    fn offered_placements(&self, gpu: &Bdf) -> Result<Vec<(u32, Vec<Placement>)>> {
        let mut s = self.lock();
        s.alive()?;
        s.gpu(gpu)?;
        Ok(PROFILES
            .iter()
            .map(|(id, _, starts, size)| {
                (
                    *id,
                    starts
                        .iter()
                        .map(|st| Placement {
                            start: *st,
                            size: *size,
                        })
                        .collect(),
                )
            })
            .collect())
    }

    fn create_gpu_instance(&self, gpu: &Bdf, profile_id: u32, placement: Placement) -> Result<u32> {
        let mut s = self.lock();
        s.mutate(format!(
            "nvidia-smi mig -i {gpu} -cgi {profile_id}:{}",
            placement.start
        ))?;
        let g = s.gpu(gpu)?;
        let overlaps = g.gis.iter().any(|gi| {
            gi.placement.start < placement.start + placement.size
                && placement.start < gi.placement.start + gi.placement.size
        });
        if g.current != MigSetting::Enabled || overlaps {
            s.failed("Insufficient Resources");
            return Err(cmd_err(
                format!("nvidia-smi mig -cgi {profile_id}:{}", placement.start),
                "Unable to create a GPU instance: Insufficient Resources",
            ));
        }
        let id = g.next_gi;
        g.next_gi += 1;
        g.gis.push(FakeGi {
            id,
            profile_id,
            placement,
            cis: Vec::new(),
        });
        Ok(id)
    }

    fn create_compute_instance(&self, gpu: &Bdf, gpu_instance: u32, profile_id: u32) -> Result<()> {
        let mut s = self.lock();
        s.mutate(format!(
            "nvidia-smi mig -i {gpu} -gi {gpu_instance} -cci {profile_id}"
        ))?;
        let g = s.gpu(gpu)?;
        match g.gis.iter_mut().find(|gi| gi.id == gpu_instance) {
            Some(gi) => {
                gi.cis.push(profile_id);
                Ok(())
            }
            None => {
                s.failed("Not Found");
                Err(cmd_err(
                    "nvidia-smi mig -cci".into(),
                    "Failed to create compute instances: Not Found",
                ))
            }
        }
    }

    fn destroy_instances(&self, gpu: &Bdf) -> Result<()> {
        let mut s = self.lock();
        s.mutate(format!("nvidia-smi mig -i {gpu} -dci -dgi"))?;
        let g = s.gpu(gpu)?;
        if g.vfs.iter().any(|v| v.current != 0) {
            s.failed("In use");
            return Err(cmd_err(
                "nvidia-smi mig -dgi".into(),
                "Unable to destroy GPU instance: In use by another client",
            ));
        }
        g.gis.clear();
        Ok(())
    }
}

impl Sysfs for FakeNode {
    fn sriov(&self, pf: &Bdf) -> Result<Option<SriovState>> {
        let mut s = self.lock();
        s.alive()?;
        let g = s.gpu(pf)?;
        Ok(g.total_vfs.map(|total| SriovState {
            total,
            num: g.vfs.len() as u32,
        }))
    }

    fn vfs(&self, pf: &Bdf) -> Result<Vec<(u32, Bdf)>> {
        let mut s = self.lock();
        s.alive()?;
        Ok(s.gpu(pf)?
            .vfs
            .iter()
            .enumerate()
            .map(|(n, v)| (n as u32, v.bdf.clone()))
            .collect())
    }

    fn vf_vgpu(&self, vf: &Bdf) -> Result<Option<VfVgpu>> {
        let s = self.lock();
        s.alive()?;
        let Some((gi, vi)) = s
            .gpus
            .iter()
            .enumerate()
            .find_map(|(gi, g)| g.vfs.iter().position(|v| &v.bdf == vf).map(|vi| (gi, vi)))
        else {
            return Ok(None);
        };
        if s.now < s.gpus[gi].vfs[vi].dir_at {
            return Ok(None);
        }
        let (g, v) = (&s.gpus[gi], &s.gpus[gi].vfs[vi]);
        Ok(Some(VfVgpu {
            current: v.current,
            creatable: s.creatable(g, v),
        }))
    }

    fn write_vgpu_type(&self, vf: &Bdf, type_id: u32) -> Result<()> {
        let mut s = self.lock();
        s.mutate(format!("echo {type_id} > {vf}/nvidia/current_vgpu_type"))?;
        let found = s
            .gpus
            .iter()
            .enumerate()
            .find_map(|(gi, g)| g.vfs.iter().position(|v| &v.bdf == vf).map(|vi| (gi, vi)));
        let err = |s: &mut NodeState, reason: &str| {
            s.failed(reason);
            Err(Error::VgpuWrite {
                vf: vf.clone(),
                type_id,
                reason: reason.to_string(),
            })
        };
        let Some((gi, vi)) = found else {
            return err(&mut s, "ENOENT");
        };
        if type_id == 0 {
            let v = &mut s.gpus[gi].vfs[vi];
            v.current = 0;
            v.gi = None;
            return Ok(());
        }
        let g = s.gpus[gi].clone();
        let v = g.vfs[vi].clone();
        if v.current != 0 {
            return err(&mut s, "EBUSY");
        }
        let Some(t) = s.vgpu_types.iter().find(|t| t.id == type_id).cloned() else {
            return err(&mut s, "EINVAL");
        };
        let Some(backing) = s
            .free_gi(&g, t.gi_profile)
            .filter(|_| g.current == MigSetting::Enabled)
        else {
            // dmesg: NVRM: Failed to add vgpu create request: 0x38
            return err(&mut s, "EIO (Input/output error)");
        };
        if !s.creatable(&g, &v).iter().any(|c| c.id == type_id) {
            return err(&mut s, "EINVAL");
        }
        let v = &mut s.gpus[gi].vfs[vi];
        v.current = type_id;
        v.gi = Some(backing);
        Ok(())
    }

    fn is_vf(&self, dev: &Bdf) -> Result<bool> {
        let s = self.lock();
        s.alive()?;
        Ok(s.gpus.iter().any(|g| g.vfs.iter().any(|v| &v.bdf == dev)))
    }

    fn module_loaded(&self, name: &str) -> Result<bool> {
        let s = self.lock();
        s.alive()?;
        Ok(s.modules.iter().any(|m| m == name))
    }

    fn boot_id(&self) -> Result<Option<String>> {
        let s = self.lock();
        s.alive()?;
        Ok(Some(format!("fake-boot-{}", s.boots)))
    }

    fn persistenced_reachable(&self) -> Result<bool> {
        let s = self.lock();
        s.alive()?;
        Ok(s.persistenced_reachable)
    }

    fn fabric_mode(&self) -> Result<Option<u32>> {
        let s = self.lock();
        s.alive()?;
        Ok(s.fabric_mode)
    }

    fn nvswitches(&self) -> Result<u32> {
        let s = self.lock();
        s.alive()?;
        Ok(s.nvswitches)
    }
}

impl SriovManage for FakeNode {
    fn enable(&self, pf: &Bdf) -> Result<()> {
        let mut s = self.lock();
        s.mutate(format!("sriov-manage -e {pf}"))?;
        let delay = s.now.saturating_add(s.vf_dir_delay);
        let g = s.gpu(pf)?.clone();
        if !g.pids.is_empty() {
            s.failed("Cannot obtain unbindLock");
            return Err(cmd_err(
                format!("sriov-manage -e {pf}"),
                "Cannot obtain unbindLock",
            ));
        }
        if s.sriov_transient_failures > 0 {
            s.sriov_transient_failures -= 1;
            s.failed("vgpu_mgr timeout");
            return Err(cmd_err(
                format!("sriov-manage -e {pf}"),
                "NVRM: Timeout occurred in event processing by vgpu_mgr daemon",
            ));
        }
        if s.sriov_silent_noops > 0 {
            s.sriov_silent_noops -= 1;
            s.failed("exit 0, no VFs");
            return Ok(());
        }
        let g = s.gpu(pf)?;
        if !g.vfs.is_empty() {
            return Ok(()); // "already has VFs enabled"
        }
        let Some(total) = g.total_vfs else { return Ok(()) };
        // The PF rebind wipes every GPU instance.
        g.gis.clear();
        let base = pf
            .as_str()
            .rsplit_once(':')
            .map_or("0000:00", |(b, _)| b)
            .to_string();
        g.vfs = (0..total).filter_map(|n| vf(&base, n, delay)).collect();
        Ok(())
    }

    fn disable(&self, pf: &Bdf) -> Result<()> {
        let mut s = self.lock();
        s.mutate(format!("sriov-manage -d {pf}"))?;
        let g = s.gpu(pf)?;
        if g.vfs.iter().any(|v| v.current != 0) {
            s.failed("VF in use");
            return Err(cmd_err(format!("sriov-manage -d {pf}"), "VF in use"));
        }
        g.vfs.clear();
        Ok(())
    }
}

impl Services for FakeNode {
    fn is_active(&self, unit: &str) -> Result<bool> {
        let s = self.lock();
        s.alive()?;
        Ok(s.units.get(unit).copied().unwrap_or(false))
    }

    fn stop(&self, unit: &str) -> Result<()> {
        let mut s = self.lock();
        s.mutate(format!("systemctl stop {unit}"))?;
        s.units.insert(unit.to_string(), false);
        Ok(())
    }

    fn start(&self, unit: &str) -> Result<()> {
        let mut s = self.lock();
        s.mutate(format!("systemctl start {unit}"))?;
        s.units.insert(unit.to_string(), true);
        Ok(())
    }

    fn reboot(&self) -> Result<()> {
        let mut s = self.lock();
        s.mutate("systemctl reboot".to_string())?;
        s.reboots += 1;
        Ok(())
    }
}

impl Gate for FakeNode {
    fn publish(&self, state: &RecoveryState) -> Result<()> {
        let mut s = self.lock();
        s.alive()?;
        if s.published.last() != Some(&state.state) {
            s.published.push(state.state);
        }
        s.state = Some(state.clone());
        Ok(())
    }

    fn open(&self) -> Result<()> {
        let mut s = self.lock();
        s.alive()?;
        s.ready = true;
        Ok(())
    }

    fn close(&self) -> Result<()> {
        let mut s = self.lock();
        s.alive()?;
        if s.gate_stuck_open && s.ready {
            return Err(Error::Io {
                path: "/run/miggate/ready".into(),
                what: "removing",
                source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
            });
        }
        s.ready = false;
        Ok(())
    }
}

impl Clock for FakeNode {
    fn elapsed(&self) -> Duration {
        self.lock().now
    }

    fn sleep(&self, d: Duration) {
        let mut s = self.lock();
        s.now = s.now.saturating_add(d);
    }

    fn utc_now(&self) -> String {
        "2026-11-30T12:00:00Z".to_string()
    }
}

impl StateStore for FakeNode {
    fn load(&self) -> Result<Option<Journal>> {
        let s = self.lock();
        s.alive()?;
        Ok(s.journal.clone())
    }

    fn save(&self, journal: &Journal) -> Result<()> {
        let mut s = self.lock();
        s.alive()?;
        s.journal = Some(journal.clone());
        Ok(())
    }
}

impl Inventory for FakeNode {
    /// What capture would see: H200s in bus order, cut into their GPU instances' profiles in
    /// placement order when MIG is on, and the driver version.
    fn capture(&self) -> Result<miggate_compat::GpuManifest> {
        let s = self.lock();
        s.alive()?;
        let mut builder = miggate_compat::GpuManifest::builder()
            .node("fake-node")
            .kernel("6.8.0-60-generic")
            .cpu_arch("amd64")
            .driver(s.driver_version.clone())
            .cuda("13.0");
        let mut gpus: Vec<&FakeGpu> = s.gpus.iter().collect();
        gpus.sort_by(|a, b| a.bus.cmp(&b.bus));
        for g in gpus {
            let mut gpu = miggate_compat::Gpu::h200().pci_bus_id(format!("0000{}", g.bus));
            if g.current == MigSetting::Enabled {
                let mut gis = g.gis.clone();
                gis.sort_by_key(|gi| gi.placement);
                gpu = gpu.cut(gis.iter().filter_map(|gi| profile_name(gi.profile_id)));
            }
            builder = builder.gpu(gpu);
        }
        builder.build().map_err(|e| FakeError::Manifest(e).into())
    }
}
