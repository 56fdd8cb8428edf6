//! The commands the parsers read, as their errors and warnings name them. A leaf of its own, so
//! the warnings ([`crate::warning`]) name a command without depending on its parser.

/// `nvidia-smi -L` ([`crate::list::COMMAND`]).
pub(crate) const LIST: &str = "nvidia-smi -L";
/// `nvidia-smi --query-gpu` ([`crate::query::COMMAND`]).
pub(crate) const QUERY: &str = "nvidia-smi --query-gpu";
/// `nvidia-smi mig -lgipp`.
pub(crate) const LGIPP: &str = "nvidia-smi mig -lgipp";
