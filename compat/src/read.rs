//! Reading manifests from JSON or YAML text, and writing them back.
//!
//! Reading is strict about identity (`apiVersion`, `kind`) and shape, lenient about fields it
//! does not know: those are kept and reported, so a typo such as `driverversion` is seen instead
//! of silently becoming an unknown fact.

use serde_json::Value;

use crate::Error;
use crate::manifest::{GpuManifest, PathSegment, UnknownField, render_path};

/// Manifests larger than this are refused before parsing: no real manifest comes near it, and
/// an unbounded input is a way to exhaust memory.
pub const MAX_MANIFEST_BYTES: usize = 16 * 1024 * 1024;

/// Reads a manifest from bytes (JSON when the first non-blank character is `{`, YAML otherwise).
pub fn from_slice(bytes: &[u8]) -> Result<GpuManifest, Error> {
    if bytes.len() > MAX_MANIFEST_BYTES {
        return Err(Error::TooLarge {
            size: bytes.len(),
            limit: MAX_MANIFEST_BYTES,
        });
    }
    from_str(std::str::from_utf8(bytes)?)
}

/// Reads a manifest from text (JSON when the first non-blank character is `{`, YAML otherwise).
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
    let mut manifest: GpuManifest = if json {
        let mut de = serde_json::Deserializer::from_str(body);
        let m = serde_ignored::deserialize(&mut de, |p| ignored.push(segments(&p)))?;
        de.end()?;
        m
    } else {
        serde_saphyr::with_deserializer_from_str(body, |de| {
            serde_ignored::deserialize(de, |p| ignored.push(segments(&p)))
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

/// JSON when the document is an object whose first key is quoted (or that is empty). A YAML
/// flow mapping (`{apiVersion: …}`) also starts with `{` but has bare keys, and reads as YAML.
fn looks_like_json(body: &str) -> bool {
    body.trim_start()
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
    /// Warnings about the document itself: each unknown field, by path.
    pub fn read_warnings(&self) -> Vec<String> {
        self.unknown_fields
            .iter()
            .map(|f| {
                format!(
                    "unknown field `{}` kept but not read by any check (a typo?)",
                    render_path(&f.path)
                )
            })
            .collect()
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
    }
}
