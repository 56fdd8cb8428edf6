//! The file store: checkpoints and node inventories read from a directory, parsed once and
//! served from memory.
//!
//! Layout under the root: `checkpoints/<namespace>/<name>.yaml` and `nodes/<node>.yaml`
//! (`.yml` and `.json` too). Each file is a manifest document or a `GpuCheckpoint`/`GpuNode`
//! object. The admission path only ever reads an [`Arc<Snapshot>`]; [`FileStore::refresh`]
//! builds a new one off the request path and swaps it in atomically, re-parsing only the files
//! whose size or modification time changed. A file that cannot be read is logged and listed in
//! [`Snapshot::problems`] (and so on `/readyz`), never a crash, and never hides the others.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use arc_swap::ArcSwap;
use miggate_compat::GpuManifest;
use serde::Serialize;

use crate::Error;
pub use crate::lookup::Checkpoint;
use crate::lookup::{Lookup, NoInventory, NodeInventory, RestorePod, Source};
use crate::resource::{self, Stored, StoredKind};

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
    unusable_nodes: HashMap<String, String>,
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
    fn inventory(&self, node: &str) -> Result<NodeInventory, NoInventory> {
        match self.nodes.get(node) {
            Some(n) => Ok(NodeInventory {
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

type Parsed = Result<Stored, String>;

/// A directory of manifests, kept in memory and reloaded on change.
#[derive(Debug)]
pub struct FileStore {
    root: PathBuf,
    current: ArcSwap<Snapshot>,
    /// The last parse of each file, reused while its stamp holds.
    cache: Mutex<HashMap<PathBuf, (Stamp, Parsed)>>,
}

const EXTENSIONS: [&str; 3] = ["yaml", "yml", "json"];

impl FileStore {
    /// Opens and loads the store. A missing or unreadable root is an error (a typo in
    /// `--store` must not start a webhook that knows no checkpoint); a bad file inside is not.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, Error> {
        let root = root.into();
        std::fs::read_dir(&root).map_err(|source| Error::Read {
            path: root.clone(),
            source,
        })?;
        let store = FileStore {
            root,
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
        let mut next: HashMap<PathBuf, (Stamp, Parsed)> = HashMap::with_capacity(files.len());
        for (path, stamp) in files {
            match cache.remove(&path) {
                Some((old, parsed)) if old == stamp => {
                    next.insert(path, (old, parsed));
                }
                _ => {
                    changed = true;
                    let parsed = read_file(&path, stamp);
                    if let Err(why) = &parsed {
                        tracing::warn!(file = %path.display(), error = %why, "store file unreadable; skipped");
                    }
                    next.insert(path, (stamp, parsed));
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

    /// Every candidate file with its stamp. Hidden entries (Kubernetes volumes' `..data`) and
    /// other extensions are ignored.
    fn list(&self) -> Result<Vec<(PathBuf, Stamp)>, Error> {
        let mut out = Vec::new();
        let checkpoints = self.root.join("checkpoints");
        for ns in dir_entries(&checkpoints, true)? {
            for file in dir_entries(&ns, false)? {
                out.push(file);
            }
        }
        out.extend(dir_entries(&self.root.join("nodes"), false)?);
        // The root itself must stay readable: a vanished mount keeps the last snapshot.
        std::fs::metadata(&self.root).map_err(|source| Error::Read {
            path: self.root.clone(),
            source,
        })?;
        let mut files: Vec<(PathBuf, Stamp)> = out
            .into_iter()
            .map(|p| {
                let stamp = std::fs::metadata(&p).map_or(
                    Stamp {
                        len: 0,
                        modified: None,
                    },
                    |m| Stamp {
                        len: m.len(),
                        modified: m.modified().ok(),
                    },
                );
                (p, stamp)
            })
            .collect();
        files.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(files)
    }

    fn build(&self, cache: &HashMap<PathBuf, (Stamp, Parsed)>) -> Snapshot {
        let mut snapshot = Snapshot {
            loaded_at: Some(SystemTime::now()),
            ..Snapshot::default()
        };
        let mut paths: Vec<&PathBuf> = cache.keys().collect();
        paths.sort();
        let checkpoints = self.root.join("checkpoints");
        let nodes = self.root.join("nodes");
        for path in paths {
            let Some((_, parsed)) = cache.get(path) else {
                continue;
            };
            let rel = path
                .strip_prefix(&self.root)
                .unwrap_or(path)
                .display()
                .to_string();
            let is_node = path.parent() == Some(nodes.as_path());
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_string();
            let mut problem = |error: String| {
                if is_node && !stem.is_empty() {
                    snapshot.unusable_nodes.entry(stem.clone()).or_insert_with(|| {
                        format!(
                            "store file {} cannot be used: {}",
                            miggate_compat::escape::escape_within(&rel, 256),
                            error
                        )
                    });
                }
                snapshot_problem(&mut snapshot.problems, &rel, error);
            };
            let stored = match parsed {
                Ok(s) => s,
                Err(why) => {
                    problem(why.clone());
                    continue;
                }
            };
            let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
                problem("file name is not UTF-8".into());
                continue;
            };
            if let Some(ns_dir) = path
                .parent()
                .filter(|p| p.parent() == Some(checkpoints.as_path()))
            {
                let ns = ns_dir.file_name().and_then(|s| s.to_str()).unwrap_or_default();
                if let Err(why) = agrees(stored, StoredKind::Checkpoint, name, Some(ns)) {
                    problem(why);
                    continue;
                }
                let entry = snapshot.checkpoints.entry(ns.to_string()).or_default();
                if entry.contains_key(name) {
                    problem(format!("another file already defines checkpoint {ns}/{name}"));
                    continue;
                }
                entry.insert(
                    name.to_string(),
                    Arc::new(Checkpoint {
                        manifest: stored.manifest.clone(),
                        container_name: stored.container_name.clone(),
                        origin: rel.clone(),
                    }),
                );
            } else if is_node {
                if let Err(why) = agrees(stored, StoredKind::Node, name, None) {
                    problem(why);
                    continue;
                }
                // As in the cluster: one node's GPUs never judge another.
                if let Some(captured_on) = stored
                    .manifest
                    .host
                    .as_ref()
                    .and_then(|h| h.node_name.as_deref())
                    .filter(|n| *n != name)
                {
                    problem(format!(
                        "it holds the inventory of node `{}` (host.nodeName), not of `{}`",
                        miggate_compat::escape::escape_within(captured_on, 256),
                        miggate_compat::escape::escape_within(name, 256)
                    ));
                    continue;
                }
                if snapshot.nodes.contains_key(name) {
                    problem(format!("another file already defines node {name}"));
                    continue;
                }
                snapshot.nodes.insert(
                    name.to_string(),
                    Node {
                        manifest: Arc::new(stored.manifest.clone()),
                        file: path.clone(),
                    },
                );
            }
        }
        snapshot
    }
}

fn snapshot_problem(problems: &mut Vec<Problem>, file: &str, error: String) {
    problems.push(Problem {
        file: miggate_compat::escape::escape(file).into_owned(),
        error,
    });
}

/// Whether a file's object fits where it lies: the right kind, and the name and namespace
/// the path gives (a copied file under a new name must not answer for the old one).
fn agrees(stored: &Stored, want: StoredKind, name: &str, namespace: Option<&str>) -> Result<(), String> {
    if stored.kind != StoredKind::Manifest && stored.kind != want {
        return Err(format!(
            "a {} where a {} or GpuManifest belongs",
            stored.kind.as_str(),
            want.as_str()
        ));
    }
    if let Some(n) = stored.name.as_deref().filter(|n| *n != name) {
        return Err(format!(
            "metadata.name `{}` differs from the file name `{name}`",
            miggate_compat::escape::escape(n)
        ));
    }
    if let (Some(ns), Some(want_ns)) = (stored.namespace.as_deref(), namespace)
        && ns != want_ns
    {
        return Err(format!(
            "metadata.namespace `{}` differs from the directory `{want_ns}`",
            miggate_compat::escape::escape(ns)
        ));
    }
    Ok(())
}

/// The entries of `dir`: sub-directories when `dirs`, else manifest files. A missing
/// directory is empty (a store may have no nodes yet); any other failure is an error.
fn dir_entries(dir: &Path, dirs: bool) -> Result<Vec<PathBuf>, Error> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
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
        let hidden = entry.file_name().to_str().is_none_or(|n| n.starts_with('.'));
        if hidden {
            continue;
        }
        // `metadata` follows symlinks, as a projected volume needs.
        let is_dir = std::fs::metadata(&path).is_ok_and(|m| m.is_dir());
        let wanted = if dirs {
            is_dir
        } else {
            !is_dir
                && path
                    .extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| EXTENSIONS.contains(&e))
        };
        if wanted {
            out.push(path);
        }
    }
    Ok(out)
}

fn read_file(path: &Path, stamp: Stamp) -> Parsed {
    let limit = miggate_compat::MAX_MANIFEST_BYTES as u64;
    if stamp.len > limit {
        return Err(format!("{} bytes, over the {limit}-byte limit", stamp.len));
    }
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    resource::read(&text)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    const NODE: &str = "apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\nhost: {cpuArch: amd64}\n";

    #[test]
    fn loads_reports_and_reloads() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "nodes/n1.yaml", NODE);
        write(root, "nodes/bad.yaml", "kind: [");
        write(root, "nodes/README.md", "ignored");
        write(
            root,
            "checkpoints/ns/ck.json",
            r#"{"apiVersion": "miggate.io/v1alpha1", "kind": "GpuCheckpoint", "metadata": {"name": "ck"}, "spec": {"containerName": "w", "manifest": {}}}"#,
        );
        write(
            root,
            "checkpoints/ns/wrong.yaml",
            "apiVersion: miggate.io/v1alpha1\nkind: GpuNode\nspec: {manifest: {}}\n",
        );
        let store = FileStore::open(root).unwrap();
        let s = store.snapshot();
        assert!(s.node("n1").is_some());
        assert_eq!(
            s.checkpoint("ns", "ck").unwrap().container_name.as_deref(),
            Some("w")
        );
        let files: Vec<&str> = s.problems.iter().map(|p| p.file.as_str()).collect();
        assert_eq!(files, ["checkpoints/ns/wrong.yaml", "nodes/bad.yaml"]);
        assert!(
            s.problems[0].error.contains("a GpuNode where a GpuCheckpoint"),
            "{:?}",
            s.problems
        );

        assert!(!store.refresh().unwrap(), "nothing changed");
        write(root, "nodes/n2.yaml", NODE);
        std::fs::remove_file(root.join("nodes/bad.yaml")).unwrap();
        assert!(store.refresh().unwrap());
        let s2 = store.snapshot();
        assert!(s2.node("n2").is_some());
        assert_eq!(s2.problems.len(), 1);
        // The old snapshot is untouched for whoever still holds it.
        assert!(s.node("n2").is_none());
    }

    #[test]
    fn a_node_file_that_cannot_be_used_is_named_when_its_node_is_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(
            root,
            "nodes/n1.yaml",
            "apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\nhost: {nodeName: n2, cpuArch: amd64}\n",
        );
        write(root, "nodes/n3.yaml", "kind: [");
        let store = FileStore::open(root).unwrap();
        let s = store.snapshot();
        let why = s.inventory("n1").unwrap_err().passed_over;
        assert_eq!(
            why,
            [
                "store file nodes/n1.yaml cannot be used: it holds the inventory of node `n2` (host.nodeName), not of `n1`"
            ]
        );
        let why = s.inventory("n3").unwrap_err().passed_over;
        assert!(
            why[0].starts_with("store file nodes/n3.yaml cannot be used: "),
            "{why:?}"
        );
        assert!(s.inventory("n9").unwrap_err().passed_over.is_empty());
        assert_eq!(s.problems.len(), 2);

        // A restore pod naming n1 is refused with that reason, not "no GpuNode".
        let testdata = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata");
        let ckpt =
            std::fs::read_to_string(testdata.join("webhook-store/checkpoints/ml/vllm-ckpt.yaml")).unwrap();
        write(root, "checkpoints/ml/vllm-ckpt.yaml", &ckpt);
        store.refresh().unwrap();
        let review =
            std::fs::read_to_string(testdata.join("admission/pod-create-restore-node-allowed.json")).unwrap();
        let mut review: serde_json::Value = serde_json::from_str(&review).unwrap();
        review["request"]["object"]["spec"]["nodeName"] = "n1".into();
        let review: kube::core::admission::AdmissionReview<kube::core::DynamicObject> =
            serde_json::from_value(review).unwrap();
        let d = crate::decide::decide(&review.try_into().unwrap(), &*store.snapshot());
        let message = d.response.result.message;
        assert!(
            message.contains("node n1, which has no usable GPU inventory: store file nodes/n1.yaml cannot be used: it holds the inventory of node `n2`"),
            "{message}"
        );
    }

    #[test]
    fn a_missing_root_is_an_error() {
        let err = FileStore::open("/nonexistent/miggate-store").unwrap_err();
        assert!(err.to_string().contains("/nonexistent/miggate-store"), "{err}");
    }
}
