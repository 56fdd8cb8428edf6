//! `--kubeconfig` and `--context`: which cluster a command reads or writes, as kubectl says it.

use std::path::PathBuf;

/// `--kubeconfig` and `--context`, as kubectl takes them; the loading is kube's own
/// ([`miggate_store::cluster`]).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClusterFlags {
    /// The kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else the pod's service
    /// account).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current-context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

impl ClusterFlags {
    /// The flags as the cluster module takes them.
    pub fn args(&self) -> miggate_store::cluster::ClusterArgs<'_> {
        miggate_store::cluster::ClusterArgs {
            kubeconfig: self.kubeconfig.as_deref(),
            context: self.context.as_deref(),
        }
    }
}
