//! The real seams: nvidia-smi (or NVML with nvidia-smi for what NVML cannot do), sysfs under a
//! root, sriov-manage and systemctl by path, each command under a deadline with bounded output
//! (`miggate-smi`'s runner); the gate and the journal as files under the root.

mod clock;
mod command;
mod gate;
mod inventory;
mod journal;
mod nvml;
mod services;
mod smi;
mod sriov;
mod sysfs;

pub use clock::SystemClock;
pub use gate::{FileGate, read_state};
pub use inventory::CaptureInventory;
pub use journal::FileStore;
pub use nvml::{Activation, DEFAULT_NVML_LIBRARY, NvmlControl};
pub use services::Systemctl;
pub use smi::NvidiaSmi;
pub use sriov::SriovManageScript;
pub use sysfs::RootedSysfs;
