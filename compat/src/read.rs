//! Reading manifests from JSON or YAML text, and writing them back.
//!
//! Reading is strict about identity (`apiVersion`, `kind`) and shape, lenient about fields it
//! does not know: those are kept and reported, so a typo such as `driverversion` is seen instead
//! of silently becoming an unknown fact.

use std::fmt;

use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::Value;

use crate::Error;
use crate::manifest::{GpuManifest, PathSegment, UnknownField, render_path};

/// Manifests larger than this are refused before parsing: no real manifest comes near it, and
/// an unbounded input is a way to exhaust memory.
pub const MAX_MANIFEST_BYTES: usize = 16 * 1024 * 1024;

/// Reads a manifest from bytes (JSON when it starts with `[`, or with `{` and a quoted key;
/// YAML otherwise).
pub fn from_slice(bytes: &[u8]) -> Result<GpuManifest, Error> {
    if bytes.len() > MAX_MANIFEST_BYTES {
        return Err(Error::TooLarge {
            size: bytes.len(),
            limit: MAX_MANIFEST_BYTES,
        });
    }
    from_str(std::str::from_utf8(bytes)?)
}

/// Reads a manifest from text (JSON when it starts with `[`, or with `{` and a quoted key;
/// YAML otherwise). An error names the field it happened at, and the line and column.
pub fn from_str(text: &str) -> Result<GpuManifest, Error> {
    if text.len() > MAX_MANIFEST_BYTES {
        return Err(Error::TooLarge {
            size: text.len(),
            limit: MAX_MANIFEST_BYTES,
        });
    }
    let body = text.trim_start_matches('\u{feff}');
    if body.trim().is_empty() {
        return Err(Error::Empty);
    }
    let mut ignored: Vec<Vec<PathSegment>> = Vec::new();
    let json = looks_like_json(body);
    // The fast read does not track where it is; only a document that fails is read again, with
    // the path tracking that names the failing field.
    let fast = if json {
        let mut de = serde_json::Deserializer::from_str(body);
        quick(&mut de, &mut ignored).ok().filter(|_| de.end().is_ok())
    } else {
        serde_saphyr::with_deserializer_from_str(body, |de| quick(de, &mut ignored)).ok()
    };
    let mut manifest: GpuManifest = if let Some(m) = fast {
        m
    } else if json {
        ignored.clear();
        let mut de = serde_json::Deserializer::from_str(body);
        let m = document(&mut de, &mut ignored).map_err(|(path, error)| Error::Json { path, error })?;
        de.end()?;
        m
    } else {
        ignored.clear();
        let mut at = Vec::new();
        serde_saphyr::with_deserializer_from_str(body, |de| {
            document(de, &mut ignored).map_err(|(path, error)| {
                at = path;
                error
            })
        })
        .map_err(|error| Error::Yaml {
            path: at,
            error: Box::new(error),
        })?
    };
    if !ignored.is_empty() {
        // Only documents with unknown fields pay for a second, untyped read to keep their values.
        let tree: Value = if json {
            serde_json::from_str(body)?
        } else {
            serde_saphyr::from_str(body)?
        };
        manifest.unknown_fields = ignored
            .into_iter()
            .map(|path| {
                let value = lookup(&tree, &path).cloned().unwrap_or(Value::Null);
                UnknownField { path, value }
            })
            .collect();
    }
    Ok(manifest)
}

/// Reads the manifest, noting each field no type knows in `ignored`.
fn quick<'de, D: Deserializer<'de>>(
    de: D,
    ignored: &mut Vec<Vec<PathSegment>>,
) -> Result<GpuManifest, D::Error> {
    let mut note = |p: serde_ignored::Path<'_>| ignored.push(segments(&p));
    Mapping::deserialize(serde_ignored::Deserializer::new(de, &mut note)).map(|Mapping(m)| m)
}

/// As [`quick`], and an error comes with the path of the field it happened at.
fn document<'de, D: Deserializer<'de>>(
    de: D,
    ignored: &mut Vec<Vec<PathSegment>>,
) -> Result<GpuManifest, (Vec<PathSegment>, D::Error)> {
    let mut note = |p: serde_ignored::Path<'_>| ignored.push(segments(&p));
    serde_path_to_error::deserialize(serde_ignored::Deserializer::new(de, &mut note))
        .map(|Mapping(m)| m)
        .map_err(|e| (error_path(e.path()), e.into_inner()))
}

/// A manifest read only from a mapping: serde_json would otherwise read a struct from an array
/// of its fields in order (`["miggate.io/v1alpha1", "GpuManifest"]`), which is no manifest.
struct Mapping(GpuManifest);

impl<'de> Deserialize<'de> for Mapping {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = GpuManifest;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a GpuManifest (a mapping with apiVersion and kind)")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<GpuManifest, A::Error> {
                GpuManifest::deserialize(MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(V).map(Mapping)
    }
}

/// A serde_path_to_error path as ours; it stops before a segment it could not name (a map key
/// that is not text), so it never names a field that is not there.
fn error_path(path: &serde_path_to_error::Path) -> Vec<PathSegment> {
    use serde_path_to_error::Segment;
    path.iter()
        .map_while(|s| match s {
            Segment::Seq { index } => Some(PathSegment::Index(*index)),
            Segment::Map { key } => Some(PathSegment::Key(key.clone())),
            Segment::Enum { variant } => Some(PathSegment::Key(variant.clone())),
            Segment::Unknown => None,
        })
        .collect()
}

/// JSON when the document is an array, or an object whose first key is quoted (or that is
/// empty). A YAML flow mapping (`{apiVersion: …}`) also starts with `{` but has bare keys, and
/// reads as YAML. No manifest is an array; read as JSON, one is refused with JSON's position.
fn looks_like_json(body: &str) -> bool {
    let body = body.trim_start();
    body.starts_with('[')
        || body
            .strip_prefix('{')
            .is_some_and(|rest| rest.trim_start().starts_with(['"', '}']) || rest.trim().is_empty())
}

fn segments(path: &serde_ignored::Path<'_>) -> Vec<PathSegment> {
    let mut out = Vec::new();
    let mut cur = path;
    loop {
        match cur {
            serde_ignored::Path::Root => break,
            serde_ignored::Path::Seq { parent, index } => {
                out.push(PathSegment::Index(*index));
                cur = parent;
            }
            serde_ignored::Path::Map { parent, key } => {
                out.push(PathSegment::Key(key.clone()));
                cur = parent;
            }
            serde_ignored::Path::Some { parent }
            | serde_ignored::Path::NewtypeStruct { parent }
            | serde_ignored::Path::NewtypeVariant { parent } => cur = parent,
        }
    }
    out.reverse();
    out
}

fn lookup<'a>(tree: &'a Value, path: &[PathSegment]) -> Option<&'a Value> {
    path.iter().try_fold(tree, |node, seg| match seg {
        PathSegment::Key(k) => node.get(k),
        PathSegment::Index(i) => node.get(i),
    })
}

fn insert(tree: &mut Value, path: &[PathSegment], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut node = tree;
    for seg in parents {
        let next = match seg {
            PathSegment::Key(k) => node.get_mut(k),
            PathSegment::Index(i) => node.get_mut(i),
        };
        match next {
            Some(n) => node = n,
            None => return,
        }
    }
    if let (PathSegment::Key(k), Value::Object(map)) = (last, node) {
        map.insert(k.clone(), value);
    }
}

impl GpuManifest {
    /// Warnings about the document itself, by path: each unknown field, then each MIG profile
    /// nvidia-smi is not known to print (read as an opaque profile, compared as text).
    pub fn read_warnings(&self) -> Vec<String> {
        let unknown = self.unknown_fields.iter().map(|f| {
            format!(
                "unknown field `{}` kept but not read by any check (a typo?)",
                render_path(&f.path)
            )
        });
        let profiles = self.devices().into_iter().flatten().enumerate().filter_map(|(i, d)| {
            let p = d.mig_profile.as_ref().filter(|p| !p.is_recognised())?;
            Some(format!(
                "nvidia.devices[{i}].migProfile: `{p}` is not a MIG profile nvidia-smi is known to print; compared as text"
            ))
        });
        unknown.chain(profiles).collect()
    }

    /// The manifest as a JSON tree, unknown fields put back where they were.
    pub fn to_value(&self) -> Result<Value, Error> {
        let mut tree = serde_json::to_value(self)?;
        for field in &self.unknown_fields {
            insert(&mut tree, &field.path, field.value.clone());
        }
        Ok(tree)
    }

    /// The manifest as pretty JSON.
    pub fn to_json(&self) -> Result<String, Error> {
        Ok(serde_json::to_string_pretty(&self.to_value()?)?)
    }

    /// The manifest as YAML.
    pub fn to_yaml(&self) -> Result<String, Error> {
        Ok(serde_saphyr::to_string(&self.to_value()?)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_flow_mappings_are_not_mistaken_for_json() {
        let m =
            from_str("{apiVersion: miggate.io/v1alpha1, kind: GpuManifest, host: {cpuArch: amd64}}").unwrap();
        assert_eq!(m.host.unwrap().cpu_arch.as_deref(), Some("amd64"));
        assert!(looks_like_json("{\"apiVersion\": 1}"));
        assert!(looks_like_json(" {}"));
        assert!(looks_like_json("{"));
        assert!(!looks_like_json("apiVersion: x"));
        assert!(looks_like_json("[1]"));
        assert!(looks_like_json("\n  [\"a\"]"));
        assert!(!looks_like_json("- a\n- b\n"));
    }
}
