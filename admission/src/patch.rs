//! The JSON patches the mutating paths send, built from `json-patch`'s typed operations:
//! paths are `jsonptr` pointers made from unescaped tokens, so an annotation key such as
//! `miggate.io/steered` is escaped (`/` as `~1`, `~` as `~0`) in one place,
//! [`annotation_path`], and never by hand.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, RemoveOperation, ReplaceOperation};
use serde_json::Value;

/// `/metadata/annotations/<key>`, the key escaped as RFC 6901 asks.
pub(crate) fn annotation_path(key: &str) -> PointerBuf {
    PointerBuf::from_tokens(["metadata", "annotations", key])
}

/// A pointer from its unescaped tokens (`["spec", "affinity"]` is `/spec/affinity`).
pub(crate) fn path<'t>(tokens: impl IntoIterator<Item = &'t str>) -> PointerBuf {
    PointerBuf::from_tokens(tokens)
}

/// An `add` of `value` at `path`.
pub(crate) fn add(path: PointerBuf, value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation { path, value })
}

/// A `remove` of what is at `path` (which must be there, or the API server fails the patch).
pub(crate) fn remove(path: PointerBuf) -> PatchOperation {
    PatchOperation::Remove(RemoveOperation { path })
}

/// A `replace` of what is at `path` with `value`.
pub(crate) fn replace(path: PointerBuf, value: Value) -> PatchOperation {
    PatchOperation::Replace(ReplaceOperation { path, value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_annotation_key_is_escaped_once() {
        assert_eq!(
            annotation_path("miggate.io/steered").as_str(),
            "/metadata/annotations/miggate.io~1steered"
        );
        assert_eq!(annotation_path("a~b/c").as_str(), "/metadata/annotations/a~0b~1c");
        assert_eq!(
            path(["spec", "resourceClaims", "-"]).as_str(),
            "/spec/resourceClaims/-"
        );
    }
}
