//! Flags of `miggate deploy`.

use std::path::PathBuf;

use miggate_crds::deploy::network_policy::Cidr;

/// Flags of `miggate deploy`.
#[derive(Debug, clap::Args)]
pub struct DeployArgs {
    /// Write the files (one per component, plus kustomization.yaml) into DIR instead of
    /// printing one stream; DIR is created if missing, existing files of the same name replaced.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The miggate container image the webhook and the publisher run.
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// The checkpoint agent's service account, NAMESPACE/NAME: the only writer of GpuCheckpoints.
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = service_account)]
    pub checkpoint_agent: Option<(String, String)>,
    /// A scheduler's user name that may bind pods with miggate's device map; repeat for
    /// several schedulers. Replaces the default, system:kube-scheduler.
    #[arg(long = "binder", value_name = "USER")]
    pub binders: Vec<String>,
    /// Waivers (miggate.io/skip-checks, nvidia.com/snapshot-skip-compat-check) need the
    /// writer to hold verb `waive` on checks.miggate.io in the pod's namespace (ClusterRole
    /// miggate-waiver). Without it, any pod author may waive checks.
    #[arg(long)]
    pub waivers_need_permission: bool,
    /// An address range the API server's calls to the webhook come from, as a CIDR
    /// (10.0.0.0/24, 10.0.0.7/32, fd00::/64); repeat for several. Given, the webhook's
    /// NetworkPolicy admits only these to the admission port; by default the port is open to
    /// every source, since where the API server's calls come from differs by distribution.
    #[arg(long = "api-server-cidr", value_name = "CIDR")]
    pub api_server_cidrs: Vec<Cidr>,
    /// Where the webhook's serving certificate comes from: `self` (the webhook makes, rotates
    /// and injects its own, kept in the Secret miggate-webhook-certs), `cert-manager`
    /// (certificates.yaml, injected by cert-manager's cainjector), or `secret:NAME` (a Secret
    /// with tls.crt and tls.key you bring, in miggate-system; give its CA with --ca-bundle).
    #[arg(long, value_name = "self|cert-manager|secret:NAME", default_value = "self", value_parser = certificates)]
    pub certificates: CertificatesArg,
    /// With `--certificates secret:NAME`: the PEM file of the CA that signed it, put in every
    /// webhook configuration's caBundle.
    #[arg(long, value_name = "FILE")]
    pub ca_bundle: Option<PathBuf>,
}

/// `--certificates`, as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertificatesArg {
    /// `self`.
    SelfManaged,
    /// `cert-manager`.
    CertManager,
    /// `secret:NAME`.
    Secret(String),
}

fn certificates(text: &str) -> Result<CertificatesArg, String> {
    match text {
        "self" => Ok(CertificatesArg::SelfManaged),
        "cert-manager" => Ok(CertificatesArg::CertManager),
        _ => match text.strip_prefix("secret:") {
            Some(name) if miggate_wire::dns::is_dns_subdomain(name) => {
                Ok(CertificatesArg::Secret(name.to_string()))
            }
            _ => Err("expected self, cert-manager or secret:NAME (a Secret's name)".into()),
        },
    }
}

/// `NAMESPACE/NAME`, each a DNS-1123 label (what Kubernetes names namespaces and service accounts by).
pub(crate) fn service_account(text: &str) -> Result<(String, String), String> {
    let label = |s: &str| {
        !s.is_empty()
            && s.len() <= 63
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !s.starts_with('-')
            && !s.ends_with('-')
    };
    match text.split_once('/') {
        Some((ns, name)) if label(ns) && label(name) => Ok((ns.to_string(), name.to_string())),
        _ => Err("expected NAMESPACE/NAME, each lowercase letters, digits and `-`".into()),
    }
}
