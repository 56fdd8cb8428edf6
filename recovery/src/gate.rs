//! The gate: a readiness file that exists only when recovery finished and verified, and a state
//! file saying where recovery is. `miggate publish` reads the state file and reports it on the
//! node's `GpuNode` (condition `Recovered`); recovery itself knows no Kubernetes.
//!
//! - `<root>/run/miggate/ready`: present only after a verified recovery (tmpfs: gone at boot).
//! - `<root>/run/miggate/recovery.json`:
//!   `{"state": "pending|recovering|ready|failed", "step": …, "message": …, "updatedAt": …}`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::files;
use crate::seams::Gate;

/// The readiness file, under the root.
pub const READY_FILE: &str = "run/miggate/ready";
/// The state file, under the root.
pub const STATE_FILE: &str = "run/miggate/recovery.json";

/// Where recovery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Waiting for the driver, the fabric manager or persistenced: nothing changed yet. No
    /// state file at all (a fresh boot before recovery ran) means the same.
    Pending,
    /// Running.
    Recovering,
    /// Finished and verified; the readiness file exists.
    Ready,
    /// Stopped at a step; the gate stays closed.
    Failed,
}

/// The state file's contents (the contract `miggate publish` reads).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecoveryState {
    /// Where recovery stands.
    pub state: Phase,
    /// The step it is at or failed at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// What happened (the failure's message when failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When this was written, RFC 3339 UTC.
    pub updated_at: String,
}

impl RecoveryState {
    /// Reads a state file; `None` when there is none.
    pub fn read(path: &Path) -> Result<Option<RecoveryState>> {
        let Some(text) = files::read_bounded(path, files::MAX_FILE_BYTES)? else {
            return Ok(None);
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| crate::Error::Sysfs {
                path: path.to_path_buf(),
                content: format!("not a recovery state: {e}"),
            })
    }
}

/// The gate as files under a root.
#[derive(Debug, Clone)]
pub struct FileGate {
    root: PathBuf,
}

impl FileGate {
    /// The gate under `root` (`/` on a host).
    pub fn new(root: &Path) -> FileGate {
        FileGate {
            root: root.to_path_buf(),
        }
    }

    /// The readiness file's path.
    pub fn ready_path(&self) -> PathBuf {
        self.root.join(READY_FILE)
    }

    /// The state file's path.
    pub fn state_path(&self) -> PathBuf {
        self.root.join(STATE_FILE)
    }
}

impl Gate for FileGate {
    fn publish(&self, state: &RecoveryState) -> Result<()> {
        let mut text = serde_json::to_string_pretty(state).map_err(|e| crate::Error::Sysfs {
            path: self.state_path(),
            content: e.to_string(),
        })?;
        text.push('\n');
        files::write_atomic(&self.state_path(), text.as_bytes())
    }

    fn open(&self) -> Result<()> {
        files::write_atomic(&self.ready_path(), b"")
    }

    fn close(&self) -> Result<()> {
        files::remove(&self.ready_path())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_state_file_is_the_published_contract() {
        let dir = tempfile::tempdir().unwrap();
        let gate = FileGate::new(dir.path());
        let state = RecoveryState {
            state: Phase::Failed,
            step: Some("reset".into()),
            message: Some("in use".into()),
            updated_at: "2026-11-30T12:00:00Z".into(),
        };
        gate.publish(&state).unwrap();
        let text = std::fs::read_to_string(dir.path().join(STATE_FILE)).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"state": "failed", "step": "reset", "message": "in use", "updatedAt": "2026-11-30T12:00:00Z"})
        );
        assert_eq!(RecoveryState::read(&gate.state_path()).unwrap(), Some(state));
        gate.open().unwrap();
        assert!(gate.ready_path().exists());
        gate.close().unwrap();
        gate.close().unwrap();
        assert!(!gate.ready_path().exists());
    }
}
