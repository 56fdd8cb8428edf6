//! The workspace's crates stand in layers, each using only crates below it, and the crates that
//! decide (the manifest, the checks, the CRDs, the inventories, the admission decision) link no
//! async runtime, HTTP, TLS or Kubernetes client.
//!
//! `docs/architecture.md` draws these layers; this test holds them, read from what Cargo reads
//! (`cargo metadata`, and `cargo tree` for what a crate links): a dependency that arrives
//! through another crate or a feature counts as much as one written down.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Bottom to top. A crate may use a crate of a lower layer, never one of its own or a higher
/// one; its tests may use its own layer's test helpers (`kube-fake`) too.
const LAYERS: &[&[&str]] = &[
    &["miggate-wire", "kube-fake", "miggate-testkit"],
    &["miggate-compat"],
    &["miggate-smi", "miggate-crds", "miggate-certs"],
    &["miggate-inventory"],
    &["miggate-capture", "miggate-admission"],
    &[
        "miggate-store",
        "miggate-recovery",
        "miggate-publish",
        "miggate-doctor",
    ],
    &["miggate-webhook"],
    &["miggate"],
    // Tests only, of every crate above; it uses none of them.
    &["miggate-layering"],
];

/// The crates without I/O, and what none of them may link, directly or through anything.
const IO_FREE: &[&str] = &[
    "miggate-wire",
    "miggate-compat",
    "miggate-crds",
    "miggate-inventory",
    "miggate-admission",
];
const IO_CRATES: &[&str] = &[
    "tokio",
    "mio",
    "hyper",
    "hyper-util",
    "h2",
    "axum",
    "tower",
    "rustls",
    "tokio-rustls",
    "hyper-rustls",
    "ring",
    "kube-client",
    "kube-runtime",
    "reqwest",
];

/// The workspace as Cargo reads it: each member's workspace dependencies by kind (`None` for
/// a normal one, `dev`, `build`).
struct Workspace {
    deps: Vec<(String, Vec<Dep>)>,
}

/// A workspace dependency: its name and kind.
type Dep = (String, Option<String>);

fn cargo(args: &[&str]) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(args)
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

impl Workspace {
    /// Read once for every test of this file.
    fn get() -> &'static Workspace {
        static READ: std::sync::OnceLock<Workspace> = std::sync::OnceLock::new();
        READ.get_or_init(Workspace::read)
    }

    fn read() -> Workspace {
        let meta: Value = serde_json::from_str(&cargo(&[
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--locked",
            "--offline",
        ]))
        .unwrap();
        let packages = meta["packages"].as_array().unwrap();
        let members: BTreeSet<&str> = packages.iter().map(|p| p["name"].as_str().unwrap()).collect();
        let deps = packages
            .iter()
            .map(|p| {
                let deps = p["dependencies"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|d| members.contains(d["name"].as_str().unwrap()))
                    .map(|d| {
                        (
                            d["name"].as_str().unwrap().to_string(),
                            d["kind"].as_str().map(str::to_string),
                        )
                    })
                    .collect();
                (p["name"].as_str().unwrap().to_string(), deps)
            })
            .collect();
        Workspace { deps }
    }

    /// The workspace crates `name` depends on directly as `kind` (`None`: normal).
    fn deps_of(&self, name: &str, kind: Option<&str>) -> BTreeSet<String> {
        let (_, deps) = self.deps.iter().find(|(n, _)| n == name).unwrap();
        deps.iter()
            .filter(|(_, k)| k.as_deref() == kind)
            .map(|(d, _)| d.clone())
            .collect()
    }
}

/// Every package `name` links on this host: its normal dependencies, theirs, and so on, as
/// `cargo tree` resolves them (build scripts' dependencies run at build time, not linked).
fn linked(name: &str) -> BTreeSet<String> {
    cargo(&[
        "tree",
        "-p",
        name,
        "-e",
        "normal",
        "--prefix",
        "none",
        "--format",
        "{p}",
        "--locked",
        "--offline",
    ])
    .lines()
    .filter_map(|line| line.split_whitespace().next())
    .map(str::to_string)
    .collect()
}

fn layer_of(name: &str) -> usize {
    LAYERS
        .iter()
        .position(|layer| layer.contains(&name))
        .unwrap_or_else(|| panic!("{name} is in no layer: add it to LAYERS and docs/architecture.md"))
}

#[test]
fn every_crate_uses_only_crates_below_it() {
    let workspace = Workspace::get();
    let mut wrong = Vec::new();
    for (name, _) in &workspace.deps {
        let layer = layer_of(name);
        for dep in workspace
            .deps_of(name, None)
            .into_iter()
            .chain(workspace.deps_of(name, Some("build")))
        {
            if layer_of(&dep) >= layer {
                wrong.push(format!(
                    "{name} (layer {layer}) uses {dep} (layer {})",
                    layer_of(&dep)
                ));
            }
        }
        for dep in workspace.deps_of(name, Some("dev")) {
            if dep != *name && layer_of(&dep) > layer && dep != "kube-fake" {
                wrong.push(format!("{name}'s tests use {dep}, a layer above"));
            }
        }
    }
    assert!(wrong.is_empty(), "against the layers:\n  {}", wrong.join("\n  "));
}

#[test]
fn the_crates_that_decide_link_no_runtime_http_tls_or_client() {
    let mut wrong = Vec::new();
    for name in IO_FREE {
        let linked = linked(name);
        assert!(
            *name == "miggate-wire" || linked.contains("serde"),
            "{name}: read no dependencies"
        );
        for io in IO_CRATES.iter().filter(|io| linked.contains(**io)) {
            wrong.push(format!("{name} links {io}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "I/O in a deciding crate:\n  {}",
        wrong.join("\n  ")
    );
}

/// The checks themselves, on what they must refuse: a layer table that let a crate use one
/// beside it, or an I/O list that missed what the server links, would hold nothing.
#[test]
fn the_checks_see_what_they_refuse() {
    let server = linked("miggate-webhook");
    for io in ["tokio", "hyper", "rustls", "kube-client"] {
        assert!(server.contains(io), "the server links {io}: {server:?}");
    }
    assert!(layer_of("miggate-store") > layer_of("miggate-admission"));
    assert!(
        Workspace::get()
            .deps_of("miggate-store", None)
            .contains("miggate-admission")
    );
}
