//! The file store's layout: where `miggate webhook --store dir:PATH` and `miggate where --store
//! dir:PATH` find checkpoints and node inventories, and what each directory entry is to them.
//!
//! ```text
//! <root>/checkpoints/<namespace>/<name>.yaml   a GpuCheckpoint, or a manifest document
//! <root>/nodes/<node>.yaml                     a GpuNode, or a manifest document
//! ```
//!
//! (`.yml` and `.json` too). These are the rules only, free of I/O; the one reader that applies
//! them, for the webhook and the command line alike, is `miggate_store::file_store`, and how big a
//! file may be is the manifest reader's limit (`miggate_compat::MAX_MANIFEST_BYTES`).

use std::ffi::OsStr;

/// The directory of checkpoints, one sub-directory per namespace.
pub const CHECKPOINTS_DIR: &str = "checkpoints";
/// The directory of node inventories.
pub const NODES_DIR: &str = "nodes";
/// The extensions of store files: any other file (a README) is not the store's.
pub const EXTENSIONS: [&str; 3] = ["yaml", "yml", "json"];

/// What a directory entry's name makes of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry<'a> {
    /// Hidden (`.x`, as a Kubernetes volume's `..data`): never the store's.
    Hidden,
    /// A name that is not UTF-8: it names no checkpoint, namespace or node, so it is reported
    /// rather than silently left out.
    NotUtf8,
    /// A file with another extension: not the store's.
    Other,
    /// A store entry, with the name it defines: a file's stem (`gpu-node-7` of
    /// `gpu-node-7.yaml`), a namespace directory's whole name.
    Named(&'a str),
}

/// What a file named `file_name` is in a store directory.
pub fn file_entry(file_name: &OsStr) -> Entry<'_> {
    if is_hidden(file_name) {
        return Entry::Hidden;
    }
    let Some(name) = file_name.to_str() else {
        return Entry::NotUtf8;
    };
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() && EXTENSIONS.contains(&ext) => Entry::Named(stem),
        _ => Entry::Other,
    }
}

/// What a directory named `dir_name` under [`CHECKPOINTS_DIR`] is: a namespace, by its name.
pub fn namespace_entry(dir_name: &OsStr) -> Entry<'_> {
    if is_hidden(dir_name) {
        return Entry::Hidden;
    }
    match dir_name.to_str() {
        Some(name) => Entry::Named(name),
        None => Entry::NotUtf8,
    }
}

fn is_hidden(name: &OsStr) -> bool {
    name.as_encoded_bytes().first() == Some(&b'.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_by_name() {
        fn file(n: &str) -> Entry<'_> {
            file_entry(OsStr::new(n))
        }
        assert_eq!(file("gpu-node-7.yaml"), Entry::Named("gpu-node-7"));
        assert_eq!(file("a.b.json"), Entry::Named("a.b"));
        assert_eq!(file("n.yml"), Entry::Named("n"));
        assert_eq!(file("README.md"), Entry::Other);
        assert_eq!(file("yaml"), Entry::Other);
        assert_eq!(file(".yaml"), Entry::Hidden);
        assert_eq!(file("..data"), Entry::Hidden);
        assert_eq!(namespace_entry(OsStr::new("ml")), Entry::Named("ml"));
        assert_eq!(namespace_entry(OsStr::new("..2026_12_01")), Entry::Hidden);
    }

    #[cfg(unix)]
    #[test]
    fn a_name_that_is_not_utf8_is_told_apart() {
        use std::os::unix::ffi::OsStrExt;
        assert_eq!(file_entry(OsStr::from_bytes(b"n\xff.yaml")), Entry::NotUtf8);
        assert_eq!(file_entry(OsStr::from_bytes(b".\xff")), Entry::Hidden);
        assert_eq!(namespace_entry(OsStr::from_bytes(b"\xff")), Entry::NotUtf8);
    }
}
