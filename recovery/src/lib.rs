#![doc = include_str!("../README.md")]
//!
//! The API: [`Layout`] (read, written, [`record`]ed from a node), [`observe`] a node and
//! [`plan`] the difference, [`apply`] it, with the [`Error`] a seam returns and the [`Failure`]
//! a run ends in. The host is reached only through the traits of [`seams`]; [`real`] holds the
//! implementations a node runs, and `fake` (feature `testing`) a behavioural fake node for
//! tests. Boot recovery's state file is the contract in `miggate_wire::recovery`, re-exported
//! here as [`Phase`] and [`RecoveryState`].

mod apply;
mod bdf;
mod error;
#[cfg(any(test, feature = "testing"))]
pub mod fake;
mod files;
mod journal;
mod layout;
mod observe;
mod plan;
pub mod real;
mod record;
pub mod seams;
mod steps;

pub use apply::{Failure, Options, Outcome, Progress, apply};
pub use bdf::{Bdf, BdfError};
pub use error::{Error, NvmlFailure, ResetFailure, Result};
pub use journal::{JOURNAL_FILE, Journal};
pub use layout::{
    ComputeInstanceLayout, GpuInstanceLayout, GpuLayout, Layout, MigManager, MigSetting, Placement, VfLayout,
};
pub use miggate_wire::recovery::{Phase, RecoveryState};
pub use observe::{ObservedGpu, ObservedNode, ObservedVf, observe};
pub use plan::{Blocker, Plan, Step, plan};
pub use record::record;
pub use steps::StepName;
