//! Bounded reads and atomic writes of the files recovery keeps (layout, journal, gate).
//!
//! A power cut in the middle of a write must leave the old file or the new one, never half of
//! one: a half-written journal would resume from a step that never happened, a half-written
//! layout would be refused at the next boot. So: write a temporary file beside the target, fsync
//! it, rename it over the target, fsync the directory.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;

use crate::error::{Error, Result};

/// The most a layout, journal or state file may hold. A 8-GPU layout with 16 VFs each is a few
/// kilobytes.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

fn io<'a>(path: &'a Path, what: &'static str) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |source| Error::Io {
        path: path.to_path_buf(),
        what,
        source,
    }
}

/// Reads a whole text file of at most `limit` bytes; `None` when it does not exist.
pub fn read_bounded(path: &Path, limit: u64) -> Result<Option<String>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(path, "reading")(e)),
    };
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(io(path, "reading"))?;
    if bytes.len() as u64 > limit {
        return Err(Error::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// Replaces `path` with `contents` atomically (temp file, fsync, rename, fsync of the
/// directory), creating the directory when missing.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => Path::new(".").to_path_buf(),
    };
    fs::create_dir_all(&dir).map_err(io(&dir, "creating the directory"))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".to_string());
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(io(&tmp, "creating"))?;
        file.write_all(contents).map_err(io(&tmp, "writing"))?;
        file.sync_all().map_err(io(&tmp, "syncing"))?;
        fs::rename(&tmp, path).map_err(io(path, "renaming into place"))?;
        // The rename is durable only once the directory is.
        File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(io(&dir, "syncing the directory"))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Removes a file; one that is already gone is fine.
pub fn remove(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(path, "removing")(e)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn write_then_read_and_no_temp_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/layout.yaml");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(read_bounded(&path, 10).unwrap().as_deref(), Some("two"));
        let names: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["layout.yaml"]);
    }

    #[test]
    fn over_the_bound_is_refused_and_missing_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        fs::write(&path, "12345").unwrap();
        assert!(matches!(
            read_bounded(&path, 4),
            Err(Error::TooLarge { limit: 4, .. })
        ));
        assert!(read_bounded(&dir.path().join("none"), 4).unwrap().is_none());
    }
}
