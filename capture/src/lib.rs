#![doc = include_str!("../README.md")]
//!
//! The API is [`capture`] with its [`Options`], and the [`Error`] it returns. Each backend can
//! also be run on its own: [`read_nvml`] reads NVML alone, and [`assemble`] joins nvidia-smi's
//! `-L` and `--query-gpu` tables (parsed with `miggate-smi`) into the same [`NvidiaFacts`], for
//! a caller that holds recorded output (a test corpus, a fuzz target, a bench) rather than a GPU.
//! What could not be read cleanly is a typed [`Warning`] in [`NvidiaFacts`]; the manifest
//! [`capture`] returns carries each in words.

mod assemble;
mod capture;
mod error;
mod facts;
mod host;
mod nvml;
mod smi;
pub mod warning;

pub use assemble::assemble;
pub use capture::{Backend, Options, capture};
pub use error::{Error, RunError, Stream};
pub use facts::NvidiaFacts;
pub use nvml::read as read_nvml;
pub use warning::Warning;
