//! Flags of `miggate convert`.

use std::path::PathBuf;

use clap::ValueEnum;

use super::read::ReadArgs;

/// Flags of `miggate convert`.
#[derive(Debug, clap::Args)]
pub struct ConvertArgs {
    /// The manifest, GpuCheckpoint or GpuNode object, or peer artifact (JSON or YAML); `-`
    /// reads standard input.
    pub file: PathBuf,
    /// How unknown fields in the manifest are read.
    #[command(flatten)]
    pub read: ReadArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = ConvertOutput::Yaml)]
    pub output: ConvertOutput,
}

/// `miggate convert -o`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ConvertOutput {
    /// The manifest as YAML.
    Yaml,
    /// The manifest as JSON.
    Json,
    /// Each GPU with its slices, as a tree for people (as `miggate capture -o table`).
    Table,
}
