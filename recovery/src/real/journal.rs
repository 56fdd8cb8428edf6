//! The journal as a file under the root (`var/lib/miggate/`, which survives a reboot).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::files;
use crate::journal::{JOURNAL_FILE, Journal};
use crate::seams::StateStore;

/// The journal as a file under a root.
#[derive(Debug, Clone)]
pub struct FileStore {
    path: PathBuf,
}

impl FileStore {
    /// The store under `root`.
    pub fn new(root: &Path) -> FileStore {
        FileStore {
            path: root.join(JOURNAL_FILE),
        }
    }
}

impl StateStore for FileStore {
    fn load(&self) -> Result<Option<Journal>> {
        let Some(text) = files::read_bounded(&self.path, files::MAX_FILE_BYTES)? else {
            return Ok(None);
        };
        serde_json::from_str(&text).map(Some).map_err(|e| Error::Sysfs {
            path: self.path.clone(),
            content: format!("not a recovery journal ({e}); remove it to start afresh"),
        })
    }

    fn save(&self, journal: &Journal) -> Result<()> {
        let text = serde_json::to_vec_pretty(journal).map_err(|e| Error::Sysfs {
            path: self.path.clone(),
            content: e.to_string(),
        })?;
        files::write_atomic(&self.path, &text)
    }
}
