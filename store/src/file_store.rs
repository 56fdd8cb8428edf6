//! The file store: checkpoints and node inventories read from a directory, parsed once and
//! served from memory.
//!
//! The layout and its naming rules are `miggate_wire::store`'s: `checkpoints/<namespace>/<name>.yaml`
//! and `nodes/<node>.yaml` (`.yml` and `.json` too), each a manifest document or a
//! `GpuCheckpoint`/`GpuNode` object. This module is the one reader of that layout:
//! [`FileStore`] for the webhook, [`read_node_files`] for `miggate where`, both through the
//! same listing, bounded read and agreement rules. The admission path only ever reads an [`Arc<Snapshot>`]; [`FileStore::refresh`]
//! builds a new one off the request path and swaps it in atomically, re-parsing only the files
//! whose size or modification time changed. A file that cannot be read is logged and listed in
//! [`Snapshot::problems`] (and so on `/readyz`), never a crash, and never hides the others.

use std::collections::HashMap;
use std::fs::Metadata;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use arc_swap::ArcSwap;
use miggate_compat::escape::{escape, escape_within};
use miggate_compat::{GpuManifest, MAX_MANIFEST_BYTES, ReadOptions};
use miggate_wire::store::{CHECKPOINTS_DIR, Entry, NODES_DIR, file_entry, namespace_entry};
use serde::Serialize;

use crate::Error;
use crate::resource::{self, Stored, StoredKind};
pub use miggate_admission::lookup::Checkpoint;
use miggate_admission::lookup::{Inventory, Lookup, NoInventory, PassedOver, RestorePod, Source};

/// A node's inventory.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The node's manifest body (host and GPU facts), shared with every decision reading it.
    pub manifest: Arc<GpuManifest>,
    /// The file it came from.
    pub file: PathBuf,
}

/// A store file that could not be used, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The file, relative to the store root.
    pub file: String,
    /// What is wrong with it.
    pub error: String,
}

/// Everything the admission path reads, as of one load. Immutable: a reload makes a new one.
#[derive(Debug, Default)]
pub struct Snapshot {
    checkpoints: HashMap<String, HashMap<String, Arc<Checkpoint>>>,
    nodes: HashMap<String, Node>,
    /// Nodes whose file under `nodes/` could not be used, with why: a decision about such a
    /// node says so instead of "no inventory".
    unusable_nodes: HashMap<String, PassedOver>,
    /// Files that could not be used, in path order.
    pub problems: Vec<Problem>,
    /// When this snapshot was built.
    pub loaded_at: Option<SystemTime>,
}

impl Snapshot {
    /// A snapshot built from in-memory parts, for tests and for stores other than files.
    pub fn from_parts(
        checkpoints: impl IntoIterator<Item = ((String, String), Checkpoint)>,
        nodes: impl IntoIterator<Item = (String, Node)>,
    ) -> Self {
        let mut s = Snapshot {
            loaded_at: Some(SystemTime::now()),
            ..Snapshot::default()
        };
        for ((ns, name), c) in checkpoints {
            s.checkpoints.entry(ns).or_default().insert(name, Arc::new(c));
        }
        s.nodes.extend(nodes);
        s
    }

    /// The checkpoint `name` in `namespace`, without allocating.
    pub fn checkpoint(&self, namespace: &str, name: &str) -> Option<&Checkpoint> {
        self.checkpoints.get(namespace)?.get(name).map(|c| &**c)
    }

    /// The inventory of node `name`.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.get(name)
    }

    /// How many checkpoints it holds.
    pub fn checkpoint_count(&self) -> usize {
        self.checkpoints.values().map(HashMap::len).sum()
    }

    /// How many node inventories it holds.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }
}

impl Lookup for Snapshot {
    fn checkpoint(&self, namespace: &str, name: &str) -> Option<Arc<Checkpoint>> {
        self.checkpoints.get(namespace)?.get(name).cloned()
    }

    /// A file under `nodes/` is a `GpuNode` or a manifest: the `GpuNode` source either way.
    /// A node whose file could not be used has none, and the reason says which file and why.
    fn inventory(&self, node: &str) -> Result<Inventory, NoInventory> {
        match self.nodes.get(node) {
            Some(n) => Ok(Inventory {
                manifest: n.manifest.clone(),
                source: Source::GpuNode,
                notes: Vec::new(),
                passed_over: Vec::new(),
                slices_listed: false,
                supply: None,
            }),
            None => Err(NoInventory {
                passed_over: self.unusable_nodes.get(node).cloned().into_iter().collect(),
            }),
        }
    }

    /// The file store keeps no pods: a binding is never known to be a restore pod's.
    fn restore_pod(&self, _namespace: &str, _name: &str) -> Option<Arc<RestorePod>> {
        None
    }
}

/// What identifies a file's version without reading it: size and modification time of the
/// resolved target (a symlink swap changes both for any real edit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
}

impl Stamp {
    /// The stamp of an entry whose metadata was read (`None`: it could not be, and the read
    /// that follows says why).
    fn of(metadata: Option<&Metadata>) -> Stamp {
        metadata.map_or(
            Stamp {
                len: 0,
                modified: None,
            },
            |m| Stamp {
                len: m.len(),
                modified: m.modified().ok(),
            },
        )
    }
}

type Parsed = Result<Stored, Arc<Unusable>>;

/// Where a listed entry sits in the store's layout, as the walk found it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Place {
    /// A file under `checkpoints/<namespace>/`.
    Checkpoint {
        /// The namespace directory's name.
        namespace: String,
    },
    /// A file under `nodes/`.
    Node,
    /// A namespace directory whose name is not UTF-8: listed only to be reported.
    Namespace,
}

/// What the walk learnt of one entry: its place, the name it defines (`None`: its name is not
/// UTF-8) and its stamp. The same path always has the same place and name, so an entry is
/// re-read exactly when its stamp changes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Listed {
    place: Place,
    name: Option<String>,
    stamp: Stamp,
}

impl Listed {
    /// A file of the layout at `place`, named by its file name's stem.
    fn file(path: &Path, place: Place, metadata: Option<&Metadata>) -> Listed {
        let name = match path.file_name().map(file_entry) {
            Some(Entry::Named(name)) => Some(name.to_string()),
            _ => None,
        };
        Listed {
            place,
            name,
            stamp: Stamp::of(metadata),
        }
    }
}

/// Why a store file cannot be used: its problem on `/readyz` and in `miggate where`, and the
/// reason its node has no inventory. Outside text is escaped when shown.
#[derive(Debug, thiserror::Error)]
enum Unusable {
    /// The file's (or a namespace directory's) name is not UTF-8.
    #[error("file name is not UTF-8")]
    NameNotUtf8,
    /// Listed larger than a manifest may be.
    #[error("{len} bytes, over the {limit}-byte limit")]
    TooLarge {
        /// Its size when listed.
        len: u64,
        /// [`MAX_MANIFEST_BYTES`].
        limit: usize,
    },
    /// Grew past the limit while it was read.
    #[error("over the {limit}-byte limit")]
    GrewPastLimit {
        /// [`MAX_MANIFEST_BYTES`].
        limit: usize,
    },
    /// Opening or reading it failed.
    #[error("{}", escape(&error.to_string()))]
    Io {
        /// The failure.
        error: std::io::Error,
    },
    /// Its bytes are not UTF-8.
    #[error("not UTF-8 text")]
    NotText,
    /// Its text is not a stored object.
    #[error("{}", escape(&.0.to_string()))]
    NotStored(miggate_crds::Error),
    /// An object of another kind than its place takes.
    #[error("a {} where a {} or GpuManifest belongs", found.as_str(), want.as_str())]
    WrongKind {
        /// What the file holds.
        found: StoredKind,
        /// What its place takes.
        want: StoredKind,
    },
    /// `metadata.name` is not the file's name.
    #[error(
        "metadata.name `{}` differs from the file name `{}`",
        escape(name),
        escape(file)
    )]
    NameDiffers {
        /// `metadata.name`.
        name: String,
        /// The file's name without its extension.
        file: String,
    },
    /// `metadata.namespace` is not the directory's name.
    #[error(
        "metadata.namespace `{}` differs from the directory `{}`",
        escape(namespace),
        escape(directory)
    )]
    NamespaceDiffers {
        /// `metadata.namespace`.
        namespace: String,
        /// The namespace directory's name.
        directory: String,
    },
    /// A node file captured on another node.
    #[error(
        "it holds the inventory of node `{}` (host.nodeName), not of `{}`",
        escape_within(captured_on, 256),
        escape_within(node, 256)
    )]
    OtherNode {
        /// The node its manifest was captured on.
        captured_on: String,
        /// The node its file name gives.
        node: String,
    },
    /// A checkpoint another file already defines.
    #[error(
        "another file already defines checkpoint {}/{}",
        escape(namespace),
        escape(name)
    )]
    DuplicateCheckpoint {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// A node another file already defines.
    #[error("another file already defines node {}", escape(name))]
    DuplicateNode {
        /// The node.
        name: String,
    },
}

/// A directory of manifests, kept in memory and reloaded on change.
#[derive(Debug)]
pub struct FileStore {
    root: PathBuf,
    current: ArcSwap<Snapshot>,
    /// The last parse of each file, reused while its stamp holds.
    cache: Mutex<HashMap<PathBuf, (Listed, Parsed)>>,
}

impl FileStore {
    /// Opens and loads the store. A missing or unreadable root is an error (a typo in
    /// `--store` must not start a webhook that knows no checkpoint); a bad file inside is not.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, Error> {
        let store = FileStore {
            root: root.into(),
            current: ArcSwap::from_pointee(Snapshot::default()),
            cache: Mutex::new(HashMap::new()),
        };
        store.refresh()?;
        Ok(store)
    }

    /// The store's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The current snapshot: one atomic load, no lock, no disk.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// Re-reads the directory and swaps in a new snapshot when anything changed. Returns
    /// whether it did. Blocking: call it off the async executor. An unreadable root keeps the
    /// current snapshot and is the error.
    pub fn refresh(&self) -> Result<bool, Error> {
        let files = self.list()?;
        let mut cache = match self.cache.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut changed = cache.len() != files.len() || self.current.load().loaded_at.is_none();
        let mut next: HashMap<PathBuf, (Listed, Parsed)> = HashMap::with_capacity(files.len());
        for (path, listed) in files {
            match cache.remove(&path) {
                Some((old, parsed)) if old == listed => {
                    next.insert(path, (old, parsed));
                }
                _ => {
                    changed = true;
                    let parsed = read_file(&path, &listed);
                    if let Err(why) = &parsed {
                        tracing::warn!(file = %path.display(), error = %why, "store file unreadable; skipped");
                    }
                    next.insert(path, (listed, parsed));
                }
            }
        }
        if !cache.is_empty() {
            changed = true;
        }
        *cache = next;
        if changed {
            let snapshot = self.build(&cache);
            tracing::info!(
                checkpoints = snapshot.checkpoint_count(),
                nodes = snapshot.node_count(),
                problems = snapshot.problems.len(),
                "store loaded"
            );
            self.current.store(Arc::new(snapshot));
        }
        Ok(changed)
    }

    /// Every candidate file, with what the walk learnt of it, in path order: one walk, each
    /// directory read once. Hidden entries (Kubernetes volumes' `..data`) and other extensions
    /// are ignored; an entry whose name is not UTF-8 is listed, to be reported. The root must
    /// be readable: an unreadable root is the error, and keeps the last snapshot.
    fn list(&self) -> Result<Vec<(PathBuf, Listed)>, Error> {
        std::fs::read_dir(&self.root).map_err(|source| Error::Read {
            path: self.root.clone(),
            source,
        })?;
        let mut out = Vec::new();
        let checkpoints = self.root.join(CHECKPOINTS_DIR);
        for (ns_dir, metadata) in dir_entries(&checkpoints, Kind::Namespaces, Missing::Empty)? {
            let namespace = match ns_dir.file_name().map(namespace_entry) {
                Some(Entry::Named(namespace)) => namespace.to_string(),
                _ => {
                    let stamp = Stamp::of(metadata.as_ref());
                    let place = Place::Namespace;
                    out.push((
                        ns_dir,
                        Listed {
                            place,
                            name: None,
                            stamp,
                        },
                    ));
                    continue;
                }
            };
            for (path, metadata) in dir_entries(&ns_dir, Kind::Files, Missing::Empty)? {
                let place = Place::Checkpoint {
                    namespace: namespace.clone(),
                };
                let listed = Listed::file(&path, place, metadata.as_ref());
                out.push((path, listed));
            }
        }
        for (path, metadata) in dir_entries(&self.root.join(NODES_DIR), Kind::Files, Missing::Empty)? {
            let listed = Listed::file(&path, Place::Node, metadata.as_ref());
            out.push((path, listed));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// The snapshot of the files read, in path order, each placed where the walk found it.
    fn build(&self, cache: &HashMap<PathBuf, (Listed, Parsed)>) -> Snapshot {
        let mut snapshot = Snapshot {
            loaded_at: Some(SystemTime::now()),
            ..Snapshot::default()
        };
        let mut files: Vec<(&PathBuf, &(Listed, Parsed))> = cache.iter().collect();
        files.sort_by_key(|(p, _)| *p);
        for (path, (listed, parsed)) in files {
            let rel = path
                .strip_prefix(&self.root)
                .unwrap_or(path)
                .display()
                .to_string();
            let node = (listed.place == Place::Node).then(|| listed.name.as_deref().unwrap_or_default());
            let placed = match parsed {
                Ok(stored) => snapshot.place(listed, stored, path, &rel),
                Err(error) => {
                    snapshot.file_problem(&rel, node, Arc::clone(error));
                    continue;
                }
            };
            if let Err(error) = placed {
                snapshot.file_problem(&rel, node, Arc::new(error));
            }
        }
        snapshot
    }
}

impl Snapshot {
    /// A file read into its place: a checkpoint or a node, by where the walk found it.
    fn place(&mut self, listed: &Listed, stored: &Stored, path: &Path, rel: &str) -> Result<(), Unusable> {
        let Some(name) = listed.name.as_deref() else {
            return Err(Unusable::NameNotUtf8);
        };
        match &listed.place {
            Place::Checkpoint { namespace } => self.add_checkpoint(namespace, name, stored, rel),
            Place::Node => self.add_node(name, stored, path),
            Place::Namespace => Ok(()),
        }
    }

    /// Checkpoint `namespace`/`name` from the store file `rel`; an error when the file says
    /// another kind, name or namespace, or another file has defined it.
    fn add_checkpoint(
        &mut self,
        namespace: &str,
        name: &str,
        stored: &Stored,
        rel: &str,
    ) -> Result<(), Unusable> {
        agrees(stored, StoredKind::Checkpoint, name, Some(namespace))?;
        let entry = self.checkpoints.entry(namespace.to_string()).or_default();
        if entry.contains_key(name) {
            return Err(Unusable::DuplicateCheckpoint {
                namespace: namespace.to_string(),
                name: name.to_string(),
            });
        }
        entry.insert(
            name.to_string(),
            Arc::new(Checkpoint {
                manifest: stored.manifest.clone(),
                container_name: stored.container_name.clone(),
                origin: rel.to_string(),
            }),
        );
        Ok(())
    }

    /// Node `name`'s inventory from the store file at `path`; an error when the file says
    /// another kind or name, or another file has defined it.
    fn add_node(&mut self, name: &str, stored: &Stored, path: &Path) -> Result<(), Unusable> {
        node_agrees(stored, name)?;
        if self.nodes.contains_key(name) {
            return Err(Unusable::DuplicateNode {
                name: name.to_string(),
            });
        }
        self.nodes.insert(
            name.to_string(),
            Node {
                manifest: Arc::new(stored.manifest.clone()),
                file: path.to_path_buf(),
            },
        );
        Ok(())
    }

    /// A store file that cannot be used: a problem of the snapshot, and the reason node
    /// `node` (the file's stem, for a file under `nodes/`) has no inventory.
    fn file_problem(&mut self, rel: &str, node: Option<&str>, error: Arc<Unusable>) {
        let text = error.to_string();
        if let Some(node) = node.filter(|n| !n.is_empty()) {
            self.unusable_nodes
                .entry(node.to_string())
                .or_insert_with(|| PassedOver::StoreFile {
                    file: rel.to_string(),
                    why: error,
                });
        }
        snapshot_problem(&mut self.problems, rel, text);
    }
}

fn snapshot_problem(problems: &mut Vec<Problem>, file: &str, error: String) {
    problems.push(Problem {
        file: escape(file).into_owned(),
        error,
    });
}

/// Whether a file's object fits where it lies: the right kind, and the name and namespace
/// the path gives (a copied file under a new name must not answer for the old one).
fn agrees(stored: &Stored, want: StoredKind, name: &str, namespace: Option<&str>) -> Result<(), Unusable> {
    if stored.kind != StoredKind::Manifest && stored.kind != want {
        return Err(Unusable::WrongKind {
            found: stored.kind,
            want,
        });
    }
    if let Some(n) = stored.name.as_deref().filter(|n| *n != name) {
        return Err(Unusable::NameDiffers {
            name: n.to_string(),
            file: name.to_string(),
        });
    }
    if let (Some(ns), Some(want_ns)) = (stored.namespace.as_deref(), namespace)
        && ns != want_ns
    {
        return Err(Unusable::NamespaceDiffers {
            namespace: ns.to_string(),
            directory: want_ns.to_string(),
        });
    }
    Ok(())
}

/// Whether a node file's object may stand for the node its file name gives: a `GpuNode` or a
/// manifest, the file's name as its `metadata.name`, and, as in the cluster, captured on that
/// node when it says where (`host.nodeName`): one node's GPUs never judge another.
fn node_agrees(stored: &Stored, name: &str) -> Result<(), Unusable> {
    agrees(stored, StoredKind::Node, name, None)?;
    if let Some(captured_on) = stored
        .manifest
        .host
        .as_ref()
        .and_then(|h| h.node_name.as_deref())
        .filter(|n| *n != name)
    {
        return Err(Unusable::OtherNode {
            captured_on: captured_on.to_string(),
            node: name.to_string(),
        });
    }
    Ok(())
}

/// Which entries of a directory are wanted.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Namespace directories (under `checkpoints/`).
    Namespaces,
    /// Store files.
    Files,
}

/// What a missing directory means to its reader.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Missing {
    /// Nothing there yet (a store may have no nodes yet).
    Empty,
    /// The error: the reader has nothing else to read.
    Error,
}

/// The entries of `dir` the layout names (see [`miggate_wire::store`]), and those whose name is
/// not UTF-8, to be reported, each with the metadata of what it resolves to (`None` when it
/// could not be read). One walk: the directory is read once and each entry's metadata taken
/// once, for both what it is and its stamp or size. A missing directory is as `missing` says;
/// any other failure is an error.
fn dir_entries(dir: &Path, kind: Kind, missing: Missing) -> Result<Vec<(PathBuf, Option<Metadata>)>, Error> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && missing == Missing::Empty => {
            return Ok(Vec::new());
        }
        Err(source) => {
            return Err(Error::Read {
                path: dir.to_path_buf(),
                source,
            });
        }
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        // `metadata` follows symlinks, as a projected volume needs.
        let metadata = std::fs::metadata(&path).ok();
        let is_dir = metadata.as_ref().is_some_and(Metadata::is_dir);
        let wanted = match kind {
            Kind::Namespaces => is_dir && !matches!(namespace_entry(&name), Entry::Hidden),
            Kind::Files => !is_dir && matches!(file_entry(&name), Entry::Named(_) | Entry::NotUtf8),
        };
        if wanted {
            out.push((path, metadata));
        }
    }
    Ok(out)
}

/// A store file's text, read to at most the manifest limit: a file that grows after it was
/// listed is cut at the limit and refused, never read whole.
fn read_bounded(path: &Path, stamp_len: Option<u64>) -> Result<String, Unusable> {
    let limit = MAX_MANIFEST_BYTES;
    if let Some(len) = stamp_len.filter(|len| *len > limit as u64) {
        return Err(Unusable::TooLarge { len, limit });
    }
    let io = |error| Unusable::Io { error };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(limit as u64 + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() > limit {
        return Err(Unusable::GrewPastLimit { limit });
    }
    String::from_utf8(bytes).map_err(|_| Unusable::NotText)
}

fn read_file(path: &Path, listed: &Listed) -> Parsed {
    if listed.name.is_none() {
        return Err(Arc::new(Unusable::NameNotUtf8));
    }
    resource::read(&read_bounded(path, Some(listed.stamp.len))?).map_err(|e| Arc::new(Unusable::NotStored(e)))
}

/// The node inventories of a store's `nodes/`, by the rules [`FileStore`] reads them by, each
/// read with `options`.
#[derive(Debug, Default)]
pub struct NodeFiles {
    /// Each usable node's name and inventory, in file name order.
    pub nodes: Vec<(String, GpuManifest)>,
    /// Every file that could not be used, and why: listed, never fatal, so one bad file does
    /// not hide the other nodes.
    pub problems: Vec<Problem>,
}

/// Reads every node file of the store at `root` as [`FileStore`] does (the same listing,
/// bounded read and agreement rules), with `options` for the manifests. A missing or unreadable
/// `nodes/` is the error: `miggate where` reads nothing else, so a typo in `--store` must not
/// read as "no node fits" (where the webhook's store, whose root must exist, may start with
/// checkpoints only).
pub fn read_node_files(root: &Path, options: ReadOptions) -> Result<NodeFiles, Error> {
    let mut files = dir_entries(&root.join(NODES_DIR), Kind::Files, Missing::Error)?;
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = NodeFiles::default();
    let mut seen = std::collections::HashSet::with_capacity(files.len());
    for (path, metadata) in files {
        let file_name = path.file_name().unwrap_or_default();
        let rel = format!("{NODES_DIR}/{}", file_name.to_string_lossy());
        let problem = |error: Unusable| Problem {
            file: escape(&rel).into_owned(),
            error: error.to_string(),
        };
        let Entry::Named(name) = file_entry(file_name) else {
            out.problems.push(problem(Unusable::NameNotUtf8));
            continue;
        };
        let len = metadata.map(|m| m.len());
        let read = read_bounded(&path, len)
            .and_then(|text| miggate_crds::read_stored_with(&text, options).map_err(Unusable::NotStored))
            .and_then(|stored| node_agrees(&stored, name).map(|()| stored.manifest));
        match read {
            Ok(_) if !seen.insert(name.to_string()) => {
                out.problems.push(problem(Unusable::DuplicateNode {
                    name: name.to_string(),
                }));
            }
            Ok(manifest) => out.nodes.push((name.to_string(), manifest)),
            Err(why) => out.problems.push(problem(why)),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
