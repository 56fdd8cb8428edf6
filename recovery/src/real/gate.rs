//! The gate: a readiness file that exists only when recovery finished and verified, and a state
//! file saying where recovery is. `miggate publish` reads the state file and reports it on the
//! node's `GpuNode` (condition `Recovered`); recovery itself knows no Kubernetes. The files'
//! names and the state's shape are the contract in `miggate_wire::recovery`.

use std::path::{Path, PathBuf};

use miggate_wire::recovery::{READY_FILE, RecoveryState, STATE_FILE};

use crate::error::Result;
use crate::files;
use crate::seams::Gate;

/// Reads a state file; `None` when there is none.
pub fn read_state(path: &Path) -> Result<Option<RecoveryState>> {
    let Some(text) = files::read_bounded(path, miggate_wire::recovery::MAX_STATE_BYTES)? else {
        return Ok(None);
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| crate::error::Error::Sysfs {
            path: path.to_path_buf(),
            content: format!("not a recovery state: {e}"),
        })
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
        let mut text = serde_json::to_string_pretty(state).map_err(|e| crate::error::Error::Sysfs {
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
    use miggate_wire::recovery::Phase;

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
        assert_eq!(read_state(&gate.state_path()).unwrap(), Some(state));
        gate.open().unwrap();
        assert!(gate.ready_path().exists());
        gate.close().unwrap();
        gate.close().unwrap();
        assert!(!gate.ready_path().exists());
    }
}
