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
use crate::error::{Error, Result};
use crate::journal::Journal;
use crate::layout::{ComputeInstanceLayout, GpuInstanceLayout, MigSetting, Placement};
use crate::seams::{Host, VgpuType};
use miggate_wire::recovery::{Phase, RecoveryState};

mod gpu;
mod host;
mod sysfs;

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
