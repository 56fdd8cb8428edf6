//! GPU control through NVML where NVML can do it safely, nvidia-smi for the rest.
//!
//! nvml-wrapper 0.13 wraps, without `unsafe` on our side, the GPU listing (PCI info, UUID, MIG
//! mode current and pending), `nvmlDeviceSetMigMode` and `nvmlDeviceSetPersistenceMode`. It has
//! no safe calls for GPU or compute instances, their profiles or placements, and NVML has no
//! reset call at all (nvidia-smi resets through the driver). Those are delegated to an
//! [`NvidiaSmi`] held inside, so one `--gpu-control nvml` run uses NVML for the mode and
//! nvidia-smi for everything else, and both read the same driver.
//!
//! The library is opened once, when the control is built, and kept for the command's life:
//! nvml-wrapper's `Device<'nvml>` borrows the `Nvml`, so devices are looked up per call and never
//! stored.

use std::path::Path;

use miggate_compat::escape::escape;
use nvml_wrapper::Nvml;
use nvml_wrapper::error::NvmlError;

use super::smi::NvidiaSmi;
use crate::bdf::Bdf;
use crate::error::{Error, NvmlFailure, Result};
use crate::layout::{GpuInstanceLayout, MigSetting, Placement};
use crate::seams::{GpuControl, GpuInfo, MigModeState};

/// The library loaded when no path is given: the name the NVIDIA driver installs.
pub const DEFAULT_NVML_LIBRARY: &str = "libnvidia-ml.so.1";

/// `NVML_DEVICE_MIG_ENABLE`.
const MIG_ENABLE: u32 = 1;

/// What `nvmlDeviceSetMigMode`'s activation status said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Activation {
    /// `NVML_SUCCESS`: the mode is in force now (Hopper and later, nothing holding the GPU).
    Immediate,
    /// Anything else: the mode is pending until a reset (or a reboot where a reset is not
    /// exposed); the text is NVML's reason (`In use by another client`, `Not Supported`,
    /// `Reset required`).
    Pending(String),
}

/// GPU control through NVML (listing, MIG mode, persistence) and nvidia-smi (instances,
/// profiles, placements, reset).
pub struct NvmlControl {
    nvml: Nvml,
    library: String,
    smi: NvidiaSmi,
}

impl std::fmt::Debug for NvmlControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmlControl")
            .field("library", &self.library)
            .field("smi", &self.smi)
            .finish_non_exhaustive()
    }
}

impl NvmlControl {
    /// Loads and initialises NVML from `library` (default `libnvidia-ml.so.1`, found by the
    /// dynamic loader's search path); `smi` does what NVML cannot.
    ///
    /// # Errors
    /// [`Error::NvmlUnavailable`] naming the library when it cannot be loaded or `nvmlInit_v2`
    /// fails (no driver, no GPU access).
    pub fn open(library: Option<&Path>, smi: NvidiaSmi) -> Result<NvmlControl> {
        let shown = library.map_or_else(|| DEFAULT_NVML_LIBRARY.to_string(), |p| p.display().to_string());
        let nvml = match library {
            Some(path) => Nvml::builder().lib_path(path.as_os_str()).init(),
            None => Nvml::init(),
        }
        .map_err(|e| Error::NvmlUnavailable {
            library: shown.clone(),
            message: text(&e),
        })?;
        Ok(NvmlControl {
            nvml,
            library: shown,
            smi,
        })
    }

    /// The nvidia-smi that instances, profiles, placements and resets are delegated to.
    pub fn nvidia_smi(&self) -> &NvidiaSmi {
        &self.smi
    }

    /// Sets MIG mode and says whether it is in force or pending a reset
    /// ([`GpuControl::set_mig_mode`] drops this: apply reads the mode back either way).
    ///
    /// # Errors
    /// [`Error::Nvml`] when the GPU is not listed or NVML refuses the mode (not supported, no
    /// permission, in use).
    pub fn set_mig_mode_activation(&self, gpu: &Bdf, mode: MigSetting) -> Result<Activation> {
        let device = self.device(gpu)?;
        let status = device
            .set_mig_mode(mode == MigSetting::Enabled)
            .map_err(|e| nvml_error("nvmlDeviceSetMigMode", Some(gpu), &e))?;
        Ok(if status == 0 {
            Activation::Immediate
        } else {
            Activation::Pending(text(&NvmlError::from(status)))
        })
    }

    /// Every GPU NVML lists with its PCI bus id, in NVML's index order.
    fn listed(&self) -> Result<Vec<(Bdf, nvml_wrapper::Device<'_>)>> {
        let count = self
            .nvml
            .device_count()
            .map_err(|e| nvml_error("nvmlDeviceGetCount_v2", None, &e))?;
        let mut out = Vec::new();
        for index in 0..count {
            let device = self
                .nvml
                .device_by_index(index)
                .map_err(|e| nvml_error("nvmlDeviceGetHandleByIndex_v2", None, &e))?;
            let pci = device
                .pci_info()
                .map_err(|e| nvml_error("nvmlDeviceGetPciInfo_v3", None, &e))?;
            // NVML's `busId` is `00000000:18:00.0`; a malformed one is rebuilt from the numbers.
            let bus = Bdf::parse(&pci.bus_id)
                .or_else(|_| Bdf::parse(&format!("{:x}:{:02x}:{:02x}.0", pci.domain, pci.bus, pci.device)))?;
            out.push((bus, device));
        }
        Ok(out)
    }

    /// The device at a PCI bus id. Looked up by walking the listing (a handful of GPUs), so the
    /// bus id is compared in one canonical form whatever form NVML prints.
    fn device(&self, gpu: &Bdf) -> Result<nvml_wrapper::Device<'_>> {
        self.listed()?
            .into_iter()
            .find(|(bus, _)| bus == gpu)
            .map(|(_, d)| d)
            .ok_or_else(|| Error::Nvml {
                call: "nvmlDeviceGetPciInfo_v3",
                gpu: Some(gpu.clone()),
                kind: NvmlFailure::NotFound,
                message: format!("NVML lists no GPU at {gpu}"),
            })
    }
}

impl GpuControl for NvmlControl {
    fn gpus(&self) -> Result<Vec<GpuInfo>> {
        let mut gpus = Vec::new();
        for (bus, device) in self.listed()? {
            let uuid = device
                .uuid()
                .map_err(|e| nvml_error("nvmlDeviceGetUUID", Some(&bus), &e))?;
            let mig = match device.mig_mode() {
                Ok(m) => Some(MigModeState {
                    current: mig(m.current),
                    pending: mig(m.pending),
                }),
                // Not MIG-capable: a whole GPU, as nvidia-smi's `[N/A]`.
                Err(NvmlError::NotSupported) => None,
                Err(e) => return Err(nvml_error("nvmlDeviceGetMigMode", Some(&bus), &e)),
            };
            gpus.push(GpuInfo { bus, uuid, mig });
        }
        Ok(gpus)
    }

    fn set_mig_mode(&self, gpu: &Bdf, mode: MigSetting) -> Result<()> {
        // A pending mode is not a failure: apply reads it back and resets.
        self.set_mig_mode_activation(gpu, mode).map(drop)
    }

    /// Delegated: NVML has no reset call.
    fn reset(&self, gpus: &[Bdf]) -> Result<()> {
        self.smi.reset(gpus)
    }

    fn set_persistence(&self, gpu: &Bdf, on: bool) -> Result<()> {
        let mut device = self.device(gpu)?;
        device
            .set_persistent(on)
            .map_err(|e| nvml_error("nvmlDeviceSetPersistenceMode", Some(gpu), &e))
    }

    /// Delegated: nvml-wrapper has no safe GPU or compute instance calls.
    fn instances(&self, gpu: &Bdf) -> Result<Vec<GpuInstanceLayout>> {
        self.smi.instances(gpu)
    }

    /// Delegated: nvml-wrapper has no safe profile calls.
    fn gpu_instance_profiles(&self, gpu: &Bdf) -> Result<Vec<(u32, String)>> {
        self.smi.gpu_instance_profiles(gpu)
    }

    /// Delegated: nvml-wrapper has no safe placement calls.
    fn offered_placements(&self, gpu: &Bdf) -> Result<Vec<(u32, Vec<Placement>)>> {
        self.smi.offered_placements(gpu)
    }

    /// Delegated: nvml-wrapper has no safe GPU instance calls.
    fn create_gpu_instance(&self, gpu: &Bdf, profile_id: u32, placement: Placement) -> Result<u32> {
        self.smi.create_gpu_instance(gpu, profile_id, placement)
    }

    /// Delegated: nvml-wrapper has no safe compute instance calls.
    fn create_compute_instance(&self, gpu: &Bdf, gpu_instance: u32, profile_id: u32) -> Result<()> {
        self.smi.create_compute_instance(gpu, gpu_instance, profile_id)
    }

    /// Delegated: nvml-wrapper has no safe instance calls.
    fn destroy_instances(&self, gpu: &Bdf) -> Result<()> {
        self.smi.destroy_instances(gpu)
    }
}

fn mig(raw: u32) -> MigSetting {
    if raw == MIG_ENABLE {
        MigSetting::Enabled
    } else {
        MigSetting::Disabled
    }
}

/// NVML's error as text: a missing symbol without the loader's message (which repeats the
/// library path and says less than "not exported").
fn text(e: &NvmlError) -> String {
    match e {
        NvmlError::FailedToLoadSymbol(_) => "symbol not exported".to_string(),
        other => escape(&other.to_string()).into_owned(),
    }
}

/// An NVML failure as [`Error::Nvml`], classified.
fn nvml_error(call: &'static str, gpu: Option<&Bdf>, e: &NvmlError) -> Error {
    let kind = match e {
        NvmlError::NotSupported => NvmlFailure::NotSupported,
        NvmlError::NoPermission => NvmlFailure::NoPermission,
        NvmlError::InUse => NvmlFailure::InUse,
        NvmlError::GpuLost => NvmlFailure::GpuLost,
        NvmlError::ResetRequired => NvmlFailure::ResetRequired,
        NvmlError::FailedToLoadSymbol(_) => NvmlFailure::MissingFunction,
        NvmlError::NotFound => NvmlFailure::NotFound,
        _ => NvmlFailure::Other,
    };
    Error::Nvml {
        call,
        gpu: gpu.cloned(),
        kind,
        message: text(e),
    }
}
