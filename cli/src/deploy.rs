//! `miggate deploy`: the Kubernetes install (webhook, publisher, RBAC, policies, CRDs), as one
//! YAML stream for `kubectl apply -f -`, or as the files of `deploy/` with a kustomization.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use miggate_crds::deploy::{self, Certificates, Config};

use crate::flags::deploy::{CertificatesArg, DeployArgs};

/// A PEM CA bundle: read, and held to at least one certificate, so a wrong file is refused
/// here rather than by the API server on every call.
fn read_ca_bundle(path: &std::path::Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    match miggate_certs::material::bundle_certs(text.as_bytes()) {
        Some(certs) if !certs.is_empty() => Ok(text),
        _ => anyhow::bail!(
            "{} is not a PEM bundle of certificates (-----BEGIN CERTIFICATE-----)",
            path.display()
        ),
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
    config.api_server_cidrs.clone_from(&args.api_server_cidrs);
    config.certificates = match (&args.certificates, &args.ca_bundle) {
        (CertificatesArg::SelfManaged, None) => Certificates::SelfManaged,
        (CertificatesArg::CertManager, None) => Certificates::CertManager,
        (CertificatesArg::Secret(secret), bundle) => Certificates::Provided {
            secret: secret.clone(),
            ca_bundle: bundle.as_deref().map(read_ca_bundle).transpose()?,
        },
        (_, Some(_)) => anyhow::bail!(
            "--ca-bundle goes with --certificates secret:NAME: with self or cert-manager the CA is injected for you"
        ),
    };
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
