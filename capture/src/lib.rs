#![doc = include_str!("../README.md")]
//!
//! The API is [`capture`] with its [`Options`], and the [`Error`] it returns.

mod assemble;
mod capture;
mod error;
mod facts;
mod host;
mod nvml;
mod parse;
mod run;
mod smi;

pub use capture::{Backend, Options, capture};
pub use error::{Error, RunError, Stream};

/// The parsers and the join, for this crate's integration tests, benches and cargo-fuzz
/// targets only.
///
/// Those live in separate crates and drive the pure functions on text, which [`capture`] does
/// not expose. Nothing here is a stable API: it may change in any release. Use [`capture`].
#[doc(hidden)]
pub mod internal {
    pub use crate::assemble::assemble;
    pub use crate::facts::NvidiaFacts;
    pub use crate::nvml::read as read_nvml;
    pub use crate::parse::{failure, list, mig_table, query};
    pub use crate::smi::cuda_version;

    /// The process runner (deadline, output bound, process-group kill), shared with boot
    /// recovery so that every command miggate runs on a host obeys the same limits.
    pub mod process {
        pub use crate::run::{Deadline, HeldOpen, Output, run};
    }
}
