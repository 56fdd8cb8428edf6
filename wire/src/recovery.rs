//! Boot recovery's state: the file `miggate recover` writes and `miggate publish` reads into
//! the node's `Recovered` condition.
//!
//! The two run as different processes (a systemd unit, a DaemonSet) and may run different
//! releases during an upgrade, so the file's shape is a contract of its own, kept here rather
//! than in either side: the publisher no longer links boot recovery (NVML, its planner) to read
//! four fields.
//!
//! - `<root>/run/miggate/ready`: present only after a verified recovery (tmpfs: gone at boot).
//! - `<root>/run/miggate/recovery.json`:
//!   `{"state": "pending|recovering|ready|failed", "step": …, "message": …, "updatedAt": …}`.

use serde::{Deserialize, Serialize};

/// The readiness file, under the host root.
pub const READY_FILE: &str = "run/miggate/ready";
/// The state file, under the host root.
pub const STATE_FILE: &str = "run/miggate/recovery.json";
/// The most a reader takes of the state file: it holds a step and a message, so anything
/// larger was written by something else and is refused, not read into memory.
pub const MAX_STATE_BYTES: u64 = 4 * 1024 * 1024;

/// Where recovery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

impl Phase {
    /// Every phase, in the order recovery goes through them.
    pub const ALL: [Phase; 4] = [Phase::Pending, Phase::Recovering, Phase::Ready, Phase::Failed];
}

/// The state file's contents.
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The file's wire form, field by field, as the publisher of an older or newer release
    /// reads it.
    #[test]
    fn the_state_file_reads_as_written() {
        let state = RecoveryState {
            state: Phase::Failed,
            step: Some("reset".into()),
            message: None,
            updated_at: "2026-11-30T12:00:00Z".into(),
        };
        let text = serde_json::to_string(&state).unwrap();
        assert_eq!(
            text,
            r#"{"state":"failed","step":"reset","updatedAt":"2026-11-30T12:00:00Z"}"#
        );
        assert_eq!(serde_json::from_str::<RecoveryState>(&text).unwrap(), state);
        for phase in Phase::ALL {
            let name = serde_json::to_string(&phase).unwrap();
            assert_eq!(serde_json::from_str::<Phase>(&name).unwrap(), phase);
        }
        assert!(serde_json::from_str::<Phase>(r#""done""#).is_err());
    }
}
