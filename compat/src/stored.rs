//! Reading one file of a manifest store: a manifest document (miggate's, or one of the Go
//! peer's artifacts), or a `GpuCheckpoint`/`GpuNode` object whose `spec.manifest` is the body.
//!
//! The webhook's file store and `miggate where` read the same directories; one reader here
//! keeps them agreeing on what a file holds.

use serde::Deserialize;

use crate::Error;
use crate::escape::escape;
use crate::manifest::{API_VERSION, GpuManifest};
use crate::read::{from_str_as_set, read_tracked, with_refusal};
use crate::validation::{ReadOptions, Scope, take_refused};

/// What a store file holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
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
        _ => Err(Error::Store {
            why: format!("a List of {count} objects: name one (`kubectl get gpucheckpoint NAME -o yaml`)"),
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

fn parse<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, Error> {
    if is_json(text) {
        Ok(serde_json::from_str(text)?)
    } else {
        Ok(serde_saphyr::from_str(text)?)
    }
}

/// Reads a store file's text: a `GpuCheckpoint` or `GpuNode` object, or else any document
/// [`from_str`](crate::from_str) reads. The error names what is wrong, without the file's name.
/// Unknown fields of the manifest are kept and warned about ([`ReadOptions::default`]).
pub fn read_stored(text: &str) -> Result<Stored, Error> {
    read_stored_with(text, ReadOptions::default())
}

/// [`read_stored`] with the reading's options: under
/// [`FieldValidation::Strict`](crate::FieldValidation::Strict) an unknown field of the manifest
/// (under `spec.manifest` in an object) is an [`Error::UnknownField`]. The object's own fields
/// around the manifest (`metadata`, `status`) are the API server's to validate, and are not.
pub fn read_stored_with(text: &str, options: ReadOptions) -> Result<Stored, Error> {
    let _scope = Scope::enter(options.fields);
    with_refusal(text, read_stored_as_set(text))
}

fn read_stored_as_set(text: &str) -> Result<Stored, Error> {
    if text.len() > crate::MAX_MANIFEST_BYTES {
        return Err(Error::TooLarge {
            size: text.len(),
            limit: crate::MAX_MANIFEST_BYTES,
        });
    }
    // Most files are manifest documents: read as one first, so they are parsed once.
    let manifest_error = match from_str_as_set(text) {
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
    let peeked = parse::<Peek>(text).ok().and_then(|p| p.kind);
    if !matches!(peeked.as_deref(), Some("GpuCheckpoint" | "GpuNode" | "List")) {
        return Err(manifest_error);
    }
    // The first reading's refusal, if any, was of the text as a manifest: not this one's.
    let _ = take_refused();
    let r: Resource = if peeked.as_deref() == Some("List") {
        one_item(read_tracked::<List>(text, is_json(text))?.items)?
    } else {
        read_tracked(text, is_json(text))?
    };
    let kind = match r.kind.as_str() {
        "GpuCheckpoint" => StoredKind::Checkpoint,
        "GpuNode" => StoredKind::Node,
        other => {
            return Err(Error::Store {
                why: format!(
                    "the List holds a `{}`, not a GpuCheckpoint or GpuNode",
                    escape(other)
                ),
            });
        }
    };
    if r.api_version != API_VERSION {
        return Err(Error::Store {
            why: format!(
                "apiVersion is `{}`, expected `{API_VERSION}` for a {}",
                escape(&r.api_version),
                escape(&r.kind)
            ),
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
