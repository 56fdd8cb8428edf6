//! Reading one stored object: a manifest document (miggate's, or one of the Go peer's
//! artifacts), or a `GpuCheckpoint`/`GpuNode` object whose `spec.manifest` is the body, as a
//! store file holds it or `kubectl get -o yaml` prints it.
//!
//! It lives with the resources whose shapes it reads; `miggate_compat` keeps the manifest model
//! and its reader ([`miggate_compat::read_document`] reads the manifest inside with the same
//! limits and field rules). The webhook's file store and the command line read through it, so
//! they agree on what a file holds.

use miggate_compat::{API_VERSION, GpuManifest, ReadOptions};
use serde::Deserialize;

use crate::Error;
use crate::error::NotStored;

/// What a store file holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// The manifest: the whole document, or an object's `spec.manifest`.
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
pub enum StoredKind {
    /// A manifest document: fits either place.
    Manifest,
    /// A `GpuCheckpoint` resource.
    Checkpoint,
    /// A `GpuNode` resource.
    Node,
}

impl StoredKind {
    /// The kind's name, for messages.
    pub fn as_str(self) -> &'static str {
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

/// `kubectl get gpucheckpoints -o yaml` without a name: a `List` of objects.
#[derive(Deserialize)]
struct List {
    items: Vec<Resource>,
}

/// The one object of a List: a List of any other number does not say which one is meant.
fn one_item(items: Vec<Resource>) -> Result<Resource, Error> {
    let count = items.len();
    let mut items = items.into_iter();
    match (items.next(), count) {
        (Some(item), 1) => Ok(item),
        _ => Err(Error::Stored {
            why: NotStored::ListOf { count },
        }),
    }
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

/// The object's `kind`, if the text is an object that says one (a plain read, no limits: the
/// text was already read once as a manifest within them).
fn peek_kind(text: &str) -> Option<String> {
    let peek: Option<Peek> = if is_json(text) {
        serde_json::from_str(text).ok()
    } else {
        serde_saphyr::from_str(text).ok()
    };
    peek.and_then(|p| p.kind)
}

/// Reads a store file's text: a `GpuCheckpoint` or `GpuNode` object, or else any document
/// [`miggate_compat::from_str`] reads. The error names what is wrong, without the file's name.
/// Unknown fields of the manifest are kept and warned about ([`ReadOptions::default`]).
pub fn read_stored(text: &str) -> Result<Stored, Error> {
    read_stored_with(text, ReadOptions::default())
}

/// [`read_stored`] with the reading's options: under
/// [`FieldValidation::Strict`](miggate_compat::FieldValidation::Strict) an unknown field of the
/// manifest (under `spec.manifest` in an object) is an
/// [`miggate_compat::Error::UnknownField`] (as [`Error::Manifest`]). The object's own fields
/// around the manifest (`metadata`, `status`) are the API server's to validate, and are not.
pub fn read_stored_with(text: &str, options: ReadOptions) -> Result<Stored, Error> {
    // Most files are manifest documents: read as one first, so they are parsed once.
    let manifest_error = match miggate_compat::from_str_with(text, options) {
        Ok(manifest) => {
            return Ok(Stored {
                manifest,
                container_name: None,
                name: None,
                namespace: None,
                kind: StoredKind::Manifest,
            });
        }
        Err(e) => e,
    };
    // Otherwise a resource object, or something that is neither: the manifest reader's error
    // says what a manifest needs.
    let peeked = peek_kind(text);
    if !matches!(peeked.as_deref(), Some("GpuCheckpoint" | "GpuNode" | "List")) {
        return Err(manifest_error.into());
    }
    let r: Resource = if peeked.as_deref() == Some("List") {
        one_item(miggate_compat::read_document::<List>(text, options)?.items)?
    } else {
        miggate_compat::read_document(text, options)?
    };
    let kind = match r.kind.as_str() {
        "GpuCheckpoint" => StoredKind::Checkpoint,
        "GpuNode" => StoredKind::Node,
        other => {
            return Err(Error::Stored {
                why: NotStored::OtherKind {
                    kind: other.to_string(),
                },
            });
        }
    };
    if r.api_version != API_VERSION {
        return Err(Error::Stored {
            why: NotStored::OtherVersion {
                api_version: r.api_version,
                kind: r.kind,
            },
        });
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
    fn strict_objects_name_the_path_under_spec_manifest() {
        let object = "apiVersion: miggate.io/v1alpha1\nkind: GpuNode\nmetadata: {name: n1}\nspec:\n  observedAt: \"2026-01-01T00:00:00Z\"\n  manifest:\n    hots: {cpuArch: amd64}\nstatus: {}\n";
        let err = read_stored_with(object, ReadOptions::strict())
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "unknown field `spec.manifest.hots` at line 7 column 5: did you mean `host`?"
        );
        let read = read_stored(object).unwrap();
        assert_eq!(read.manifest.unknown_fields().len(), 1);
    }
}
