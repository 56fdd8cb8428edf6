//! `miggate deploy`, retired: the Helm chart (`charts/miggate`) is the install's one source, and
//! `deploy/` is what it renders with its defaults. The command stays, hidden, so a script
//! written for it learns where the install went instead of reading a usage error.

use std::process::ExitCode;

/// Where the install is now, said as the error every invocation gets (exit status 2).
pub fn run() -> anyhow::Result<ExitCode> {
    anyhow::bail!(
        "`miggate deploy` is retired: the Helm chart is the install's one source. Install with \
         `helm install miggate charts/miggate -n miggate-system --create-namespace`, print it with \
         your values with `helm template miggate charts/miggate -n miggate-system --include-crds \
         --set createNamespace=true`, or apply the defaults without Helm with `kubectl apply \
         --server-side -k deploy/` (docs/deploy.md)"
    )
}
