//! Where a field stands in a document (`nvidia.devices[0].migprofile`): the steps of its path
//! and how people write them. A leaf: the error type, the model and the readers all name
//! paths, and none of them needs another to do so.

/// One step of an [`UnknownField`](crate::UnknownField)'s path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSegment {
    /// A mapping key.
    Key(String),
    /// A list position.
    Index(usize),
}

/// Renders a path the way people write it: `nvidia.devices[0].migprofile`; a key that is not a
/// plain word is quoted (`pod["odd key"]`).
pub fn render_path(path: &[PathSegment]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            // A key that is not a plain word is quoted, so `host.amd64` (nested) and
            // `["host.amd64"]` (one key with a dot) never read alike.
            PathSegment::Key(k)
                if k.is_empty() || !k.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-') =>
            {
                out.push('[');
                out.push_str(&serde_json::Value::String(k.clone()).to_string());
                out.push(']');
            }
            PathSegment::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            PathSegment::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_render_unambiguously() {
        let key = |k: &str| PathSegment::Key(k.to_string());
        assert_eq!(
            render_path(&[
                key("nvidia"),
                key("devices"),
                PathSegment::Index(0),
                key("migprofile")
            ]),
            "nvidia.devices[0].migprofile"
        );
        assert_eq!(render_path(&[key("host"), key("amd64")]), "host.amd64");
        assert_eq!(render_path(&[key("host.amd64")]), r#"["host.amd64"]"#);
        assert_eq!(render_path(&[key("pod"), key("odd key")]), r#"pod["odd key"]"#);
    }
}
