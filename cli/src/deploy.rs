//! `miggate deploy`: the Kubernetes install (webhook, publisher, RBAC, policies, CRDs), as one
//! YAML stream for `kubectl apply -f -`, or as the files of `deploy/` with a kustomization.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use miggate_crds::deploy::{self, Config};

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
}

/// `NAMESPACE/NAME`, each a DNS-1123 label (what Kubernetes names namespaces and service accounts by).
fn service_account(text: &str) -> Result<(String, String), String> {
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

/// Prints the install, or writes its files.
pub fn run(args: &DeployArgs) -> anyhow::Result<ExitCode> {
    let mut config = Config::default();
    if let Some(image) = &args.image {
        config.image.clone_from(image);
    }
    if let Some((ns, name)) = &args.checkpoint_agent {
        config.checkpoint_agent_namespace.clone_from(ns);
        config.checkpoint_agent_name.clone_from(name);
    }
    if !args.binders.is_empty() {
        config.binders.clone_from(&args.binders);
    }
    config.waivers_need_permission = args.waivers_need_permission;
    match &args.out {
        None => {
            let yaml = deploy::stream(&config)?;
            let mut out = std::io::stdout().lock();
            out.write_all(yaml.as_bytes())
                .and_then(|()| out.flush())
                .context("cannot write the manifests to standard output")?;
        }
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            for (file, content) in deploy::files(&config)? {
                let path = dir.join(file);
                std::fs::write(&path, content).with_context(|| format!("cannot write {}", path.display()))?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
