//! The seams: every effect recovery has on the host goes through one of these traits, so that
//! each can be replaced by the behavioural fake node in tests and by stand-in scripts end to end.
//!
//! Reads and writes are split by name: a method that changes the node starts with a verb
//! (`set_`, `create_`, `destroy_`, `write_`, `enable`, `disable`, `stop`, `start`, `reset`,
//! `reboot`); everything else only reads.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::bdf::Bdf;
use crate::error::Result;
use crate::journal::Journal;
use crate::layout::{GpuInstanceLayout, MigSetting, Placement};
use miggate_wire::recovery::RecoveryState;

/// MIG mode as the driver reports it: what is in force and what takes effect at the next reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigModeState {
    /// In force now.
    pub current: MigSetting,
    /// After the next reset (equal to `current` when nothing is pending).
    pub pending: MigSetting,
}

/// A physical GPU as the driver lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuInfo {
    /// PCI bus id.
    pub bus: Bdf,
    /// UUID.
    pub uuid: String,
    /// MIG mode; `None` when the GPU is not MIG-capable.
    pub mig: Option<MigModeState>,
}

/// A PF's SR-IOV counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SriovState {
    /// `sriov_totalvfs`.
    pub total: u32,
    /// `sriov_numvfs`.
    pub num: u32,
}

/// A vGPU type as `creatable_vgpu_types` lists it (`1414 : NVIDIA H200X-1-18C`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VgpuType {
    /// The numeric id written to `current_vgpu_type`.
    pub id: u32,
    /// Its name.
    pub name: String,
}

/// A VF's vendor-specific VFIO directory (`<VF>/nvidia/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VfVgpu {
    /// `current_vgpu_type`; 0 means no vGPU.
    pub current: u32,
    /// `creatable_vgpu_types`: what could be created on this VF now (shrinks as siblings fill).
    pub creatable: Vec<VgpuType>,
}

/// GPU control: nvidia-smi (reset is not an NVML call) or NVML.
pub trait GpuControl {
    /// The physical GPUs (never VFs), with MIG mode.
    fn gpus(&self) -> Result<Vec<GpuInfo>>;
    /// Asks for a MIG mode; whether it took effect is read back with [`GpuControl::gpus`].
    fn set_mig_mode(&self, gpu: &Bdf, mode: MigSetting) -> Result<()>;
    /// Resets these GPUs together ([`crate::Error::Reset`] says why not).
    fn reset(&self, gpus: &[Bdf]) -> Result<()>;
    /// Turns persistence mode on or off (the reset escalation's `-pm 0`).
    fn set_persistence(&self, gpu: &Bdf, on: bool) -> Result<()>;
    /// The GPU instances (with placement) and their compute instances. Empty when MIG is off.
    fn instances(&self, gpu: &Bdf) -> Result<Vec<GpuInstanceLayout>>;
    /// The GPU instance profiles this GPU offers (`-lgip`) as `(id, name)`: the same id names
    /// different sizes on different models (19 is `1g.10gb` on an H100, `1g.18gb` on an H200).
    fn gpu_instance_profiles(&self, gpu: &Bdf) -> Result<Vec<(u32, String)>>;
    /// Which placements each GPU instance profile may take (`-lgipp`), by profile id.
    fn offered_placements(&self, gpu: &Bdf) -> Result<Vec<(u32, Vec<Placement>)>>;
    /// Creates a GPU instance of a profile at a placement; gives its instance id.
    fn create_gpu_instance(&self, gpu: &Bdf, profile_id: u32, placement: Placement) -> Result<u32>;
    /// Creates a compute instance of a profile in a GPU instance.
    fn create_compute_instance(&self, gpu: &Bdf, gpu_instance: u32, profile_id: u32) -> Result<()>;
    /// Destroys every compute and GPU instance of a GPU.
    fn destroy_instances(&self, gpu: &Bdf) -> Result<()>;
}

/// PCI sysfs and the other host files recovery reads, all under one root.
pub trait Sysfs {
    /// A PF's SR-IOV counters; `None` when it has no SR-IOV capability.
    fn sriov(&self, pf: &Bdf) -> Result<Option<SriovState>>;
    /// A PF's VFs as `(N, address)` from its `virtfnN` links, sorted by N.
    fn vfs(&self, pf: &Bdf) -> Result<Vec<(u32, Bdf)>>;
    /// A VF's vGPU state: its `nvidia/` directory (vendor-specific VFIO), else its mdev types
    /// and devices; `None` while neither is populated.
    fn vf_vgpu(&self, vf: &Bdf) -> Result<Option<VfVgpu>>;
    /// Creates a vGPU of a type on a VF: the id written to `nvidia/current_vgpu_type`, or, on an
    /// mdev host, a device created from `mdev_supported_types/nvidia-<id>`.
    fn write_vgpu_type(&self, vf: &Bdf, type_id: u32) -> Result<()>;
    /// Whether a PCI function is a VF (has a `physfn` link): a listing of GPUs must leave VFs
    /// out, or a reset "of every GPU" would name them.
    fn is_vf(&self, dev: &Bdf) -> Result<bool>;
    /// Whether a kernel module is loaded.
    fn module_loaded(&self, name: &str) -> Result<bool>;
    /// The kernel's boot id (`/proc/sys/kernel/random/boot_id`), new at every boot; `None`
    /// where it cannot be read.
    fn boot_id(&self) -> Result<Option<String>>;
    /// Whether nvidia-persistenced's socket is there for nvidia-smi to reach.
    fn persistenced_reachable(&self) -> Result<bool>;
    /// The fabric manager's configured `FABRIC_MODE`; `None` without a configuration.
    fn fabric_mode(&self) -> Result<Option<u32>>;
    /// How many NVSwitches the host has: NVIDIA PCI functions (vendor `0x10de`) of class
    /// `0x0680` (bridge, other) under `sys/bus/pci/devices`. On such a board (HGX) the GPUs are
    /// NVLink peers that may only be reset together, whatever a refused reset says.
    fn nvswitches(&self) -> Result<u32>;
}

/// `sriov-manage`: its exit status is not trusted; callers verify in sysfs.
pub trait SriovManage {
    /// `sriov-manage -e <pf>`.
    fn enable(&self, pf: &Bdf) -> Result<()>;
    /// `sriov-manage -d <pf>`.
    fn disable(&self, pf: &Bdf) -> Result<()>;
}

/// systemd units.
pub trait Services {
    /// Whether a unit is active.
    fn is_active(&self, unit: &str) -> Result<bool>;
    /// Stops a unit.
    fn stop(&self, unit: &str) -> Result<()>;
    /// Starts a unit.
    fn start(&self, unit: &str) -> Result<()>;
    /// Reboots the node (returns when the reboot was requested).
    fn reboot(&self) -> Result<()>;
}

/// The readiness gate that consumers (the device plugin, `miggate publish`) wait on.
pub trait Gate {
    /// Writes the state file.
    fn publish(&self, state: &RecoveryState) -> Result<()>;
    /// Creates the readiness file: recovery finished and verified.
    fn open(&self) -> Result<()>;
    /// Removes the readiness file.
    fn close(&self) -> Result<()>;
}

/// Time, so that waits cost nothing in tests.
pub trait Clock {
    /// Time since the run started.
    fn elapsed(&self) -> Duration;
    /// Waits.
    fn sleep(&self, d: Duration);
    /// The wall clock as RFC 3339 UTC, for the state file.
    fn utc_now(&self) -> String;
}

/// What capture sees (a manifest), for verify's compat checks.
pub trait Inventory {
    /// Captures the node's GPUs and devices.
    fn capture(&self) -> Result<miggate_compat::GpuManifest>;
}

/// Where the journal lives (`/var/lib/miggate/`: survives reboots, for the reboot guard).
pub trait StateStore {
    /// The journal, when one was left.
    fn load(&self) -> Result<Option<Journal>>;
    /// Saves it atomically.
    fn save(&self, journal: &Journal) -> Result<()>;
}

/// Everything recovery touches, one seam each.
#[derive(Clone, Copy)]
pub struct Host<'a> {
    /// GPU control.
    pub gpu: &'a dyn GpuControl,
    /// sysfs and host files.
    pub sysfs: &'a dyn Sysfs,
    /// sriov-manage.
    pub sriov: &'a dyn SriovManage,
    /// systemd.
    pub services: &'a dyn Services,
    /// The state file and the readiness file that consumers wait on.
    pub gate: &'a dyn Gate,
    /// Elapsed time, waits and the state file's timestamps (virtual in the fake).
    pub clock: &'a dyn Clock,
    /// The journal's store.
    pub store: &'a dyn StateStore,
    /// Capture, for the compat checks.
    pub inventory: &'a dyn Inventory,
}
