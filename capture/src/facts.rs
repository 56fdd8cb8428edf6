//! The one shape both backends read into: the driver, the GPUs, the devices, and what could not
//! be read cleanly. The capture front end turns it into a manifest in one place, so the
//! nvidia-smi and NVML backends cannot drift apart in how a fact lands in the manifest.

use miggate_compat::{Device, Gpu, Nvidia, VersionText};
use serde::Serialize;

use crate::warning::Warning;

/// What one backend read about the driver and the GPUs this process can see: the NVIDIA part of
/// a manifest, plus what could not be read. Kept apart from [`Nvidia`] so the capture front end
/// decides what else (MIG strategy, host facts) goes into the manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NvidiaFacts {
    /// The kernel driver version (`580.82.07`); absent when it could not be read.
    pub driver_version: Option<VersionText>,
    /// The CUDA version the driver supports, as nvidia-smi prints it (`13.0`).
    pub cuda_driver_version: Option<VersionText>,
    /// Every physical GPU, in index order (the order nvidia-smi and NVML use).
    pub gpus: Vec<Gpu>,
    /// What a workload is given, in visible order (GPU index, then MIG device order): whole GPUs
    /// and MIG slices. `None` when some GPU's slices could not be read, since a partial list
    /// would miscount devices; `Some(vec![])` when there are none.
    pub devices: Option<Vec<Device>>,
    /// Facts that could not be read cleanly, to be carried into the manifest's `warnings` (in
    /// words) so nobody mistakes an absent fact for a known one; serialized as their words.
    pub warnings: Vec<Warning>,
}

impl NvidiaFacts {
    /// The manifest's `nvidia` section (`migStrategy` is left unknown: it is the device plugin's
    /// setting, which neither backend can see), and the warnings the manifest should carry.
    pub fn into_nvidia(self) -> (Nvidia, Vec<Warning>) {
        let nvidia = Nvidia {
            unknown: Default::default(),
            driver_version: self.driver_version,
            cuda_driver_version: self.cuda_driver_version,
            mig_strategy: None,
            gpus: Some(self.gpus),
            devices: self.devices,
            uncounted: Vec::new(),
        };
        (nvidia, self.warnings)
    }
}
