//! What several test files of this crate read: the checked-in install, `deploy/`.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use serde_json::Value;

/// Every document of every YAML file of `deploy/`, in file-name order, with its file's name.
pub fn deploy_docs() -> Vec<(String, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut docs = Vec::new();
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&file).unwrap();
        let values: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        docs.extend(
            values
                .into_iter()
                .filter(|v| v.get("kind").is_some())
                .map(|v| (name.clone(), v)),
        );
    }
    docs
}
