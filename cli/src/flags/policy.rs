//! The policy flags `check` and `where` share, and their parsers: compat's readings, with
//! what an error quotes escaped and cut.

use std::collections::BTreeSet;
use std::fmt;

use miggate_compat::escape::{escape, escape_within};
use miggate_compat::{
    CheckName, DEFAULT_MIN_DRIVER, DEFAULT_MIN_KERNEL, DriverFloor, Mode, Options, parse_min_driver,
    parse_min_kernel, parse_skip,
};

use super::{FLAG_QUOTE_BYTES, FlagParser};

/// The policy flags `check` and `where` share, read into compat's [`Options`] in one place.
#[derive(Debug, clap::Args)]
pub struct PolicyArgs {
    /// Refuse when a fact is unknown on either side (not-applicable checks stay quiet).
    #[arg(long)]
    pub strict: bool,
    /// Waive named checks, comma-separated (or `all`); an unknown name is an error.
    #[arg(long, value_name = "CHECKS", value_parser = FlagParser(skip_list))]
    pub skip: Option<BTreeSet<CheckName>>,
    /// Lowest kernel major.minor a target may run.
    #[arg(long, value_name = "V", value_parser = FlagParser(kernel_floor),
          default_value_t = KernelFloor(DEFAULT_MIN_KERNEL))]
    pub min_kernel: KernelFloor,
    /// Lowest NVIDIA driver a target may run: a major (580) or a whole version (580.82.07),
    /// compared per numeric component.
    #[arg(long, value_name = "VERSION", value_parser = FlagParser(driver_floor),
          default_value_t = DEFAULT_MIN_DRIVER)]
    pub min_driver: DriverFloor,
}

impl PolicyArgs {
    /// The comparison options in `mode`.
    pub fn options(&self, mode: Mode) -> Options {
        Options {
            mode,
            strict: self.strict,
            skip: self.skip.clone().unwrap_or_default(),
            min_kernel: self.min_kernel.0,
            min_driver: self.min_driver,
        }
    }
}

/// `--min-kernel`: the lowest kernel (major, minor) a target may run, shown as `5.13`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelFloor(pub (u64, u64));

impl fmt::Display for KernelFloor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.0.0, self.0.1)
    }
}

/// `--skip`: compat's reading, with the unknown name quoted escaped.
fn skip_list(text: &str) -> Result<BTreeSet<CheckName>, String> {
    parse_skip(text).map_err(|e| match e {
        miggate_compat::Error::UnknownCheck { name, known } => format!(
            "unknown check `{}`; known checks: {known}",
            escape_within(&name, FLAG_QUOTE_BYTES)
        ),
        other => escape(&other.to_string()).into_owned(),
    })
}

/// `--min-kernel`: compat's reading; its reason quotes nothing from outside.
fn kernel_floor(text: &str) -> Result<KernelFloor, String> {
    parse_min_kernel(text).map(KernelFloor).map_err(|e| match e {
        miggate_compat::Error::InvalidOption { why, .. } => why.to_string(),
        other => escape(&other.to_string()).into_owned(),
    })
}

/// `--min-driver`: compat's reading; its reason quotes nothing from outside.
fn driver_floor(text: &str) -> Result<DriverFloor, String> {
    parse_min_driver(text).map_err(|e| match e {
        miggate_compat::Error::InvalidOption { why, .. } => why.to_string(),
        other => escape(&other.to_string()).into_owned(),
    })
}
