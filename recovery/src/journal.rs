//! The journal: what an interrupted run left behind that the next run must undo or remember.
//!
//! Every step re-reads the node before it acts, so the journal does not replay steps; it keeps
//! what the node itself cannot tell: which services recovery stopped (to start them again),
//! which GPUs it turned persistence off on (to turn it back on), the step it was at (to say so),
//! and the reboot guard (at most one automatic reboot, ever, until the mode is seen right). It
//! lives under `<root>/var/lib/miggate/`, which survives a reboot, unlike `/run`.

use serde::{Deserialize, Serialize};

use crate::bdf::Bdf;

/// The journal file, under the root.
pub const JOURNAL_FILE: &str = "var/lib/miggate/recovery-journal.json";

/// What a run keeps between its steps, and across crashes and the one reboot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Journal {
    /// The step being run; `None` once a run ended (ready or failed).
    #[serde(default)]
    pub step: Option<String>,
    /// Units recovery stopped and has not started again yet.
    #[serde(default)]
    pub stopped_units: Vec<String>,
    /// GPUs recovery turned persistence mode off on and has not turned back on yet.
    #[serde(default)]
    pub persistence_off: Vec<Bdf>,
    /// Set just before the one automatic reboot; cleared when the MIG mode is seen right.
    #[serde(default)]
    pub reboot_attempted: bool,
    /// The kernel's boot id when the reboot was requested: the same id at the next run means
    /// the node never rebooted (a crash before the request, or a request that did nothing),
    /// which is not the same failure as a reboot that did not help.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reboot_boot_id: Option<String>,
}
