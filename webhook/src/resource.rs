//! Reading one store file: a miggate manifest document, or a `GpuCheckpoint`/`GpuNode`
//! resource object whose `spec.manifest` is the manifest body.
//!
//! Kept apart, and small, because the resource types will come from the `crds` crate once it
//! exists; only this module then changes.

use miggate_compat::GpuManifest;
use miggate_compat::escape::escape;
use serde::Deserialize;

/// The group and version of miggate's resources.
const CR_API_VERSION: &str = "miggate.io/v1alpha1";

/// What a store file holds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stored {
    /// The manifest body.
    pub manifest: GpuManifest,
    /// The container a checkpoint was taken from (`spec.containerName`); `None` for a manifest
    /// document, which does not record it.
    pub container_name: Option<String>,
    /// `metadata.name`, when the file is a resource object.
    pub name: Option<String>,
    /// `metadata.namespace`, when the file is a resource object and says it.
    pub namespace: Option<String>,
    /// Which kind of object the file is, so a checkpoint is not read from a node's file.
    pub kind: StoredKind,
}

/// The kinds a store file may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoredKind {
    /// A bare `GpuManifest` document: fits either place.
    Manifest,
    /// A `GpuCheckpoint` resource.
    Checkpoint,
    /// A `GpuNode` resource.
    Node,
}

impl StoredKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            StoredKind::Manifest => "GpuManifest",
            StoredKind::Checkpoint => "GpuCheckpoint",
            StoredKind::Node => "GpuNode",
        }
    }
}

#[derive(Deserialize)]
struct Peek {
    #[serde(default)]
    kind: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Resource {
    api_version: String,
    kind: String,
    #[serde(default)]
    metadata: Metadata,
    spec: Spec,
}

#[derive(Deserialize, Default)]
struct Metadata {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    manifest: GpuManifest,
    #[serde(default)]
    container_name: Option<String>,
}

fn is_json(text: &str) -> bool {
    text.trim_start_matches('\u{feff}').trim_start().starts_with('{')
}

fn parse<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, String> {
    if is_json(text) {
        serde_json::from_str(text).map_err(|e| e.to_string())
    } else {
        serde_saphyr::from_str(text).map_err(|e| e.to_string())
    }
}

/// Reads a store file's text. The error is in words, escaped, without the file's name.
pub(crate) fn read(text: &str) -> Result<Stored, String> {
    if text.len() > miggate_compat::MAX_MANIFEST_BYTES {
        return Err(format!(
            "{} bytes, over the {}-byte limit",
            text.len(),
            miggate_compat::MAX_MANIFEST_BYTES
        ));
    }
    let peek: Peek = parse(text).map_err(|e| escape(&e).into_owned())?;
    let kind = match peek.kind.as_deref() {
        Some("GpuCheckpoint") => StoredKind::Checkpoint,
        Some("GpuNode") => StoredKind::Node,
        // A manifest document, or something that is not one: compat's reader says which.
        _ => {
            let manifest = miggate_compat::from_str(text).map_err(|e| escape(&e.to_string()).into_owned())?;
            return Ok(Stored {
                manifest,
                container_name: None,
                name: None,
                namespace: None,
                kind: StoredKind::Manifest,
            });
        }
    };
    let r: Resource = parse(text).map_err(|e| escape(&e).into_owned())?;
    if r.api_version != CR_API_VERSION {
        return Err(format!(
            "apiVersion is `{}`, expected `{CR_API_VERSION}` for a {}",
            escape(&r.api_version),
            escape(&r.kind)
        ));
    }
    let container_name = r.spec.container_name.filter(|c| !c.trim().is_empty());
    Ok(Stored {
        manifest: r.spec.manifest,
        container_name: if kind == StoredKind::Checkpoint {
            container_name
        } else {
            None
        },
        name: r.metadata.name,
        namespace: r.metadata.namespace,
        kind,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_manifests_and_resources() {
        let m = read("apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\nhost: {cpuArch: amd64}\n").unwrap();
        assert_eq!(m.kind, StoredKind::Manifest);
        assert_eq!(m.manifest.host.unwrap().cpu_arch.as_deref(), Some("amd64"));

        let c = read(
            r#"{"apiVersion": "miggate.io/v1alpha1", "kind": "GpuCheckpoint",
                "metadata": {"name": "ck", "namespace": "ns"},
                "spec": {"containerName": "worker", "manifest": {"host": {"cpuArch": "arm64"}, "extra": 1}}}"#,
        )
        .unwrap();
        assert_eq!(c.kind, StoredKind::Checkpoint);
        assert_eq!(c.container_name.as_deref(), Some("worker"));
        assert_eq!(c.name.as_deref(), Some("ck"));
        assert_eq!(c.manifest.unknown_fields().len(), 1);

        let n = read("apiVersion: miggate.io/v1alpha1\nkind: GpuNode\nmetadata: {name: n1}\nspec:\n  observedAt: x\n  manifest: {nvidia: {devices: []}}\n").unwrap();
        assert_eq!(n.kind, StoredKind::Node);
        assert_eq!(n.manifest.devices().map(<[_]>::len), Some(0));
    }

    #[test]
    fn refuses_what_is_not_ours() {
        assert!(
            read("apiVersion: v1\nkind: Pod\n")
                .unwrap_err()
                .contains("not a miggate GpuManifest")
        );
        assert!(
            read("apiVersion: other/v1\nkind: GpuNode\nspec: {manifest: {}}\n")
                .unwrap_err()
                .contains("expected `miggate.io/v1alpha1`")
        );
        assert!(
            read("kind: GpuCheckpoint\napiVersion: miggate.io/v1alpha1\n")
                .unwrap_err()
                .contains("spec")
        );
        assert!(read("{not json").is_err());
    }
}
