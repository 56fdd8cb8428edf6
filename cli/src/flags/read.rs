//! `--validate`: how a manifest is read, on every command that reads one.

use clap::ValueEnum;

/// `--validate`, on every command that reads manifests: kubectl's flag, with its values and
/// its default. A typo (`devcies:`) read leniently would make the devices unknown, and unknown
/// admits: so an unknown field is an error unless asked otherwise.
#[derive(Debug, clap::Args)]
pub struct ReadArgs {
    /// What an unknown field in a manifest does: strict (an error naming the field, its line and
    /// the nearest known name), warn (kept and reported as a warning), ignore (dropped).
    #[arg(long, value_enum, value_name = "MODE", default_value_t = ValidateArg::Strict)]
    pub validate: ValidateArg,
}

impl ReadArgs {
    /// compat's reading options.
    pub fn options(&self) -> miggate_compat::ReadOptions {
        miggate_compat::ReadOptions {
            fields: match self.validate {
                ValidateArg::Strict => miggate_compat::FieldValidation::Strict,
                ValidateArg::Warn => miggate_compat::FieldValidation::Warn,
                ValidateArg::Ignore => miggate_compat::FieldValidation::Ignore,
            },
        }
    }
}

/// `--validate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ValidateArg {
    /// An unknown field is an error (exit 2).
    #[value(alias = "true")]
    Strict,
    /// An unknown field is kept and reported as a warning.
    Warn,
    /// An unknown field is dropped without a word.
    #[value(alias = "false")]
    Ignore,
}
