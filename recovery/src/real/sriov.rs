//! `sriov-manage` by path. Its exit status is unreliable (some driver branches exit 0 when VF
//! creation failed); the state machine verifies `sriov_numvfs` in sysfs after every call.

use std::path::PathBuf;
use std::time::Duration;

use super::command::exec_ok;
use crate::bdf::Bdf;
use crate::error::Result;
use crate::seams::SriovManage;

/// `sriov-manage` at a path (`/usr/lib/nvidia/sriov-manage`, or under the operator's driver
/// root `/run/nvidia/driver/usr/lib/nvidia/sriov-manage`).
#[derive(Debug, Clone)]
pub struct SriovManageScript {
    path: PathBuf,
    timeout: Duration,
}

impl SriovManageScript {
    /// The script at `path`, each call limited to `timeout`.
    pub fn new(path: PathBuf, timeout: Duration) -> SriovManageScript {
        SriovManageScript { path, timeout }
    }
}

impl SriovManage for SriovManageScript {
    fn enable(&self, pf: &Bdf) -> Result<()> {
        exec_ok(&self.path, &["-e", pf.as_str()], self.timeout).map(drop)
    }

    fn disable(&self, pf: &Bdf) -> Result<()> {
        exec_ok(&self.path, &["-d", pf.as_str()], self.timeout).map(drop)
    }
}
