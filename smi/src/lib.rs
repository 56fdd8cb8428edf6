#![doc = include_str!("../README.md")]
//!
//! The API: [`run`] a command under a [`Deadline`] into its [`Output`]; read the text with the
//! parsers of [`list`] (`-L`), [`query`] (`--query-gpu`) and [`mig_table`] (`mig -lgi`, `-lci`,
//! `-lgip`, `-lcip`, `-lgipp`), and [`cuda_version`]; tell what a failure was with
//! [`failure::classify`] (as an [`Error`]) or [`Failure::of`] (its kind alone). What a parser
//! skips or guesses is in its table's `warnings`, each a typed [`Warning`] that says its words
//! when displayed or serialized.

mod commands;
mod error;
pub mod failure;
pub mod list;
pub mod mig_table;
pub mod query;
mod run;
mod text;
mod version;
pub mod warning;

pub use error::{Error, RunError, Stream};
pub use failure::Failure;
pub use run::{DEFAULT_TIMEOUT, Deadline, HeldOpen, MAX_OUTPUT_BYTES, Output, nvidia_smi_path, run};
pub use version::cuda_version;
pub use warning::Warning;
