//! The node's manifest through capture (the nvidia-smi backend, the same binary recovery runs).

use std::path::PathBuf;
use std::time::Duration;

use miggate_capture::{Backend, Options, capture};
use miggate_compat::GpuManifest;

use crate::error::{Error, Result};
use crate::seams::Inventory;

/// Capture with nvidia-smi at a path.
#[derive(Debug, Clone)]
pub struct CaptureInventory {
    nvidia_smi: PathBuf,
    timeout: Duration,
}

impl CaptureInventory {
    /// Capture through `nvidia_smi`, within `timeout`.
    pub fn new(nvidia_smi: PathBuf, timeout: Duration) -> CaptureInventory {
        CaptureInventory { nvidia_smi, timeout }
    }
}

impl Inventory for CaptureInventory {
    fn capture(&self) -> Result<GpuManifest> {
        let options = Options {
            backend: Backend::NvidiaSmi,
            nvidia_smi: Some(self.nvidia_smi.clone()),
            nvml_library: None,
            node_name: None,
            timeout: Some(self.timeout),
        };
        capture(&options).map_err(|e| Error::Capture(e.to_string()))
    }
}
