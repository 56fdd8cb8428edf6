//! The Helm chart (`charts/miggate`) rendered by the real `helm`, and `promtool`: both built
//! from their Go modules by `e2e/cluster.sh tools` (the binaries the e2e suite uses).
//!
//! Each binary is its environment variable (`MIGGATE_HELM`, `MIGGATE_PROMTOOL`), else the one
//! `e2e/cluster.sh tools` links under `target/e2e/bin`. Without one the tests that need it say
//! so and pass, except under CI, where `.ci/run` builds them first and a missing one fails.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// The workspace's root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The tool `name`: `$var`, else `target/e2e/bin/<name>`; `None` when neither exists, outside
/// CI.
fn binary(var: &str, name: &str) -> Option<PathBuf> {
    let path = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/e2e/bin").join(name));
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI needs {name} at {} (.ci/run builds it with e2e/cluster.sh tools)",
        path.display()
    );
    eprintln!(
        "skipped: no {name} at {} (run e2e/cluster.sh tools)",
        path.display()
    );
    None
}

/// `binary ARGS` in `dir`: stdout, or stderr and stdout when it fails.
fn run(binary: PathBuf, args: &[&str], dir: &std::path::Path) -> Result<String, String> {
    let out = Command::new(&binary)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", binary.display()));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!("{}{stdout}", String::from_utf8_lossy(&out.stderr)))
    }
}

/// `helm ARGS` in the workspace: stdout, or the error text; `None` when there is no helm
/// outside CI.
pub fn helm(args: &[&str]) -> Option<Result<String, String>> {
    Some(run(binary("MIGGATE_HELM", "helm")?, args, &root()))
}

/// `promtool ARGS` in `dir`: stdout, or the error text and stdout; `None` when there is no
/// promtool outside CI.
pub fn promtool(args: &[&str], dir: &std::path::Path) -> Option<Result<String, String>> {
    Some(run(binary("MIGGATE_PROMTOOL", "promtool")?, args, dir))
}

/// The chart rendered as release `miggate` in `miggate-system`, CRDs included, with each of
/// `sets` as a `--set`: its objects, or helm's error.
pub fn template(sets: &[&str]) -> Option<Result<Vec<Value>, String>> {
    let mut args = vec![
        "template",
        "miggate",
        "charts/miggate",
        "--namespace",
        "miggate-system",
        "--include-crds",
    ];
    for s in sets {
        args.extend(["--set", s]);
    }
    Some(helm(&args)?.map(|text| {
        serde_saphyr::from_str_multiple::<Value, Vec<Value>>(&text)
            .unwrap()
            .into_iter()
            .filter(|v| !v.is_null())
            .collect()
    }))
}

/// The chart rendered with each of `sets` (see [`template`]): its objects; `None` when there is
/// no helm outside CI; panics with helm's words when it refuses the values.
pub fn rendered(sets: &[&str]) -> Option<Vec<Value>> {
    Some(template(sets)?.unwrap_or_else(|e| panic!("helm template --set {sets:?}: {e}")))
}

/// The install with the chart's defaults and each of `sets`: `deploy/` when there are none,
/// else the chart rendered as `deploy/` is (its namespaces made by the chart) with `sets` on
/// top; `None` when there is no helm, outside CI.
pub fn install(sets: &[&str]) -> Option<Vec<Value>> {
    if sets.is_empty() {
        return Some(super::installed());
    }
    let mut all = vec!["createNamespace=true"];
    all.extend(sets);
    rendered(&all)
}

/// The rendered object of `kind` named `name`.
pub fn object<'a>(chart: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    chart
        .iter()
        .find(|v| v["kind"] == kind && v["metadata"]["name"] == name)
}
