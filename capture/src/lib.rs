//! Reads what GPUs a process sees into a miggate manifest, from `nvidia-smi` or from NVML.
//!
//! `nvidia-smi` reports a MIG slice under its parent card's name and `--query-gpu` lists only
//! physical GPUs, so a container holding a slice looks like one holding the whole card. This
//! crate joins the `nvidia-smi -L` MIG lines onto their parent GPUs by nesting (or reads NVML's
//! MIG device handles) so each slice is recorded with its profile.
//!
//! No async runtime and no Kubernetes here: a checkpoint agent links this crate to record a
//! manifest beside each checkpoint. The API is [`capture`] with its [`Options`], and the
//! [`Error`] it returns.
//!
//! Limits that hold for any nvidia-smi or NVML, however broken or hostile: one deadline bounds
//! the whole capture; each output stream is read up to 8 MiB, and output over that is an error,
//! never parsed; UUIDs are read only in the forms nvidia-smi prints; every quoted outside text
//! in an error or warning is escaped and cut to 4 KiB.

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
}
