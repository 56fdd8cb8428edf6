//! systemd through `systemctl` at a given path.

use std::path::PathBuf;
use std::time::Duration;

use super::command::{exec, exec_ok};
use crate::error::Result;
use crate::seams::Services;

/// `systemctl` at a path.
#[derive(Debug, Clone)]
pub struct Systemctl {
    path: PathBuf,
    timeout: Duration,
}

impl Systemctl {
    /// `systemctl` at `path`; each call may take `timeout` (a stop waits for the unit).
    pub fn new(path: PathBuf, timeout: Duration) -> Systemctl {
        Systemctl { path, timeout }
    }
}

impl Services for Systemctl {
    fn is_active(&self, unit: &str) -> Result<bool> {
        // 0 active; 3 inactive; 4 no such unit: only 0 is active.
        Ok(exec(&self.path, &["is-active", "--quiet", unit], self.timeout)?
            .status
            .success())
    }

    fn stop(&self, unit: &str) -> Result<()> {
        exec_ok(&self.path, &["stop", unit], self.timeout).map(drop)
    }

    fn start(&self, unit: &str) -> Result<()> {
        exec_ok(&self.path, &["start", unit], self.timeout).map(drop)
    }

    fn reboot(&self) -> Result<()> {
        exec_ok(&self.path, &["reboot"], self.timeout).map(drop)
    }
}
