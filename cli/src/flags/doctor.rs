//! Flags of `miggate doctor`.

/// Flags of `miggate doctor`.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Which cluster, as kubectl takes it.
    #[command(flatten)]
    pub cluster: super::cluster::ClusterFlags,
    /// The namespace miggate's webhook runs in (default: the one its restore webhook's Service
    /// names, else miggate-system).
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Where the probe's dry-run restore pod is created (never stored): a namespace tenants
    /// restore in.
    #[arg(long, value_name = "NAMESPACE", default_value = "default")]
    pub probe_namespace: String,
    /// Do not try the API server's call to the webhook (the dry-run probe needs `create` on
    /// pods in --probe-namespace).
    #[arg(long)]
    pub no_probe: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = DoctorOutput::Text)]
    pub output: DoctorOutput,
}

/// `miggate doctor -o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DoctorOutput {
    /// One line per check: ✔ passes, ⚠ at risk, ✖ fails, each with its hint.
    Text,
    /// The findings as JSON, for scripts.
    Json,
}
