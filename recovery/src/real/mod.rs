//! The real seams: nvidia-smi (or NVML with nvidia-smi for what NVML cannot do), sysfs under a root, sriov-manage and systemctl by path, each
//! command under a deadline with bounded output (`miggate-smi`'s runner).

mod clock;
mod inventory;
mod nvml;
mod services;
mod smi;
mod sriov;
mod sysfs;

use std::path::Path;
use std::time::Duration;

use miggate_smi::{Deadline, Output, run};

pub use clock::SystemClock;
pub use inventory::CaptureInventory;
pub use nvml::{Activation, DEFAULT_NVML_LIBRARY, NvmlControl};
pub use services::Systemctl;
pub use smi::NvidiaSmi;
pub use sriov::SriovManageScript;
pub use sysfs::RootedSysfs;

use crate::error::{Error, Result};

/// Runs a command to its end within `limit`; `Ok` whatever its exit status.
fn exec(program: &Path, args: &[&str], limit: Duration) -> Result<Output> {
    Ok(run(program, args, &Deadline::after(limit))?)
}

/// Runs a command; a non-zero exit is [`Error::Command`] with what it printed.
fn exec_ok(program: &Path, args: &[&str], limit: Duration) -> Result<Output> {
    let out = exec(program, args, limit)?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(failed(&out))
    }
}

fn failed(out: &Output) -> Error {
    Error::Command {
        command: out.command.clone(),
        status: out
            .status
            .code()
            .map_or("killed".to_string(), |c| format!("exit {c}")),
        output: out.combined(),
    }
}
