//! Reads what GPUs a process sees into a miggate manifest, from `nvidia-smi` or from NVML.
//!
//! `nvidia-smi` reports a MIG slice under its parent card's name and `--query-gpu` lists only
//! physical GPUs, so a container holding a slice looks like one holding the whole card. This
//! crate joins the `nvidia-smi -L` MIG lines onto their parent GPUs by nesting (or reads NVML's
//! MIG device handles) so each slice is recorded with its profile.
//!
//! No async runtime and no Kubernetes here: a checkpoint agent links this crate to record a
//! manifest beside each checkpoint.

pub mod assemble;
mod capture;
mod error;
pub mod host;
pub mod nvml;
pub mod parse;
pub mod run;
pub mod smi;

pub use capture::{Backend, Options, capture};
pub use error::Error;
