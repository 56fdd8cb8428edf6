//! Flags of the retired `miggate deploy`: whatever it is given, it says where the install went.

use std::ffi::OsString;

/// Anything an earlier `miggate deploy` took (`--image`, `--out`, …), read and not used.
#[derive(Debug, clap::Args)]
pub struct RetiredArgs {
    /// What was given, whatever it is.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub given: Vec<OsString>,
}
