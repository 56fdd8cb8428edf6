//! Flags of `miggate where` (`where` is a keyword, so the module is named for what it does).

use std::path::PathBuf;

use miggate_store::StoreConfig;

use super::check::CheckOutput;
use super::policy::PolicyArgs;
use super::read::ReadArgs;

/// Flags of `miggate where`.
#[derive(Debug, clap::Args)]
pub struct WhereArgs {
    /// The checkpoint: a manifest, a GpuCheckpoint object or a Go peer artifact; `-` reads
    /// standard input. With `-n`, a checkpoint in the cluster: a GpuCheckpoint's name, or
    /// `podsnapshot/NAME` for the Go peer's.
    pub checkpoint: PathBuf,
    /// Read the checkpoint from the cluster: CHECKPOINT in NAMESPACE.
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Where the node inventories are: `dir:PATH`, a file store whose `nodes/<node>.yaml`
    /// files are read (the webhook's layout). Without it, the cluster's: every node's
    /// GpuNode, ResourceSlices and GFD labels, read as the webhook reads them.
    #[arg(long, value_name = "dir:PATH", value_parser = store_dir)]
    pub store: Option<PathBuf>,
    /// Which cluster, as kubectl takes it (with `-n` or without `--store`).
    #[command(flatten)]
    pub cluster: crate::flags::cluster::ClusterFlags,
    /// The policy: strict, skips, floors.
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// How unknown fields in the checkpoint and the node files are read.
    #[command(flatten)]
    pub read: ReadArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = CheckOutput::Table)]
    pub output: CheckOutput,
}

/// `miggate where --store`: `dir:PATH` only (`where` reads no cluster yet).
pub(crate) fn store_dir(text: &str) -> Result<PathBuf, String> {
    match super::store_arg(text)? {
        StoreConfig::Dir(path) => Ok(path),
        StoreConfig::Kube(_) => Err("`where` reads only a file store; use dir:PATH".into()),
    }
}
