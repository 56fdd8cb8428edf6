//! Reading one store file: a manifest document (miggate's or one of the Go peer's artifacts),
//! or a `GpuCheckpoint`/`GpuNode` resource object whose `spec.manifest` is the manifest body.
//! The reader itself is crds' ([`miggate_crds::read_stored`]), the crate that owns those shapes.

pub(crate) use miggate_crds::{Stored, StoredKind};

/// Reads a store file's text (crds' reader, shared with `miggate where`). The error does not
/// name the file; its reader shows it escaped.
pub(crate) fn read(text: &str) -> Result<Stored, miggate_crds::Error> {
    miggate_crds::read_stored(text)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
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
                .to_string()
                .contains("not a miggate GpuManifest")
        );
        assert!(
            read("apiVersion: other/v1\nkind: GpuNode\nspec: {manifest: {}}\n")
                .unwrap_err()
                .to_string()
                .contains("expected `miggate.io/v1alpha1`")
        );
        assert!(
            read("kind: GpuCheckpoint\napiVersion: miggate.io/v1alpha1\n")
                .unwrap_err()
                .to_string()
                .contains("spec")
        );
        assert!(read("{not json").is_err());
    }

    #[test]
    fn reads_the_go_peers_artifacts() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/peer/");
        for file in [
            "manifest-h100-mig.yaml",
            "podsnapshotcontent-h100-mig.yaml",
            "source-h100-mig.json",
        ] {
            let text = std::fs::read_to_string(format!("{root}{file}")).unwrap();
            let s = read(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(s.kind, StoredKind::Manifest, "{file}");
            assert_eq!(s.manifest.devices().map(<[_]>::len), Some(2), "{file}");
            assert!(s.manifest.warnings[0].to_string().contains("Go peer"), "{file}");
        }
    }
}
