//! Reading manifests from JSON or YAML text, and writing them back.
//!
//! Reading is strict about identity (`apiVersion`, `kind`) and shape, lenient about fields it
//! does not know: those are kept and reported, so a typo such as `driverversion` is seen instead
//! of silently becoming an unknown fact.

use serde::Deserialize;
use serde_json::Value;

use crate::Error;
use crate::field_path::PathSegment;
use crate::fields::Document;
use crate::manifest::{API_VERSION, GpuManifest, KIND};
use crate::validation::{ReadOptions, Scope, take_refused};
use crate::warning::Warning;

/// Manifests larger than this are refused before parsing: no real manifest comes near it, and
/// an unbounded input is a way to exhaust memory.
pub const MAX_MANIFEST_BYTES: usize = 16 * 1024 * 1024;

/// Reads a manifest from bytes (JSON when it starts with `[`, or with `{` and a quoted key;
/// YAML otherwise). Unknown fields are kept and warned about ([`ReadOptions::default`]).
pub fn from_slice(bytes: &[u8]) -> Result<GpuManifest, Error> {
    from_slice_with(bytes, ReadOptions::default())
}

/// [`from_slice`] with the reading's options: under
/// [`FieldValidation::Strict`](crate::FieldValidation::Strict) an unknown
/// field is an [`Error::UnknownField`] naming its path, line and the nearest known name.
pub fn from_slice_with(bytes: &[u8], options: ReadOptions) -> Result<GpuManifest, Error> {
    if bytes.len() > MAX_MANIFEST_BYTES {
        return Err(Error::TooLarge {
            size: bytes.len(),
            limit: MAX_MANIFEST_BYTES,
        });
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let (line, column) = line_column(bytes, e.valid_up_to());
        Error::NotUtf8 { line, column }
    })?;
    from_str_with(text, options)
}

/// The 1-based line and column (in characters) of byte `at`, all of which before it is UTF-8.
fn line_column(bytes: &[u8], at: usize) -> (usize, usize) {
    let before = bytes.get(..at).unwrap_or(bytes);
    let line_start = before.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let column = std::str::from_utf8(&before[line_start..]).map_or(0, |s| s.chars().count()) + 1;
    (line, column)
}

/// Reads a manifest from text (JSON when it starts with `[`, or with `{` and a quoted key;
/// YAML otherwise). An error names the field it happened at, and the line and column. Unknown
/// fields are kept and warned about ([`ReadOptions::default`]).
pub fn from_str(text: &str) -> Result<GpuManifest, Error> {
    from_str_with(text, ReadOptions::default())
}

/// [`from_str`] with the reading's options: under
/// [`FieldValidation::Strict`](crate::FieldValidation::Strict) an unknown field
/// is an [`Error::UnknownField`] naming its path, line and the nearest known name.
pub fn from_str_with(text: &str, options: ReadOptions) -> Result<GpuManifest, Error> {
    let _scope = Scope::enter(options.fields);
    with_refusal(text, from_str_as_set(text))
}

/// Reads a document of another shape that holds a manifest (a Kubernetes object whose
/// `spec.manifest` is one, as `miggate_crds` reads it) by the manifest reader's rules: the size
/// limit, JSON or YAML by the first character, field paths in errors, and `options`'
/// unknown-field policy for every manifest inside, whose refusals are named by path, line and
/// column as [`from_str_with`]'s are. The fields around the manifest are the caller's type's
/// to judge.
pub fn read_document<T: serde::de::DeserializeOwned>(text: &str, options: ReadOptions) -> Result<T, Error> {
    if text.len() > MAX_MANIFEST_BYTES {
        return Err(Error::TooLarge {
            size: text.len(),
            limit: MAX_MANIFEST_BYTES,
        });
    }
    let _scope = Scope::enter(options.fields);
    with_refusal(
        text,
        read_tracked(text, looks_like_json(text.trim_start_matches('\u{feff}'))),
    )
}

/// A reading's error, turned into [`Error::UnknownField`] when what failed it was a strict
/// refusal of an unknown field: the reader's path is the mapping's, the refused key is added.
pub(crate) fn with_refusal<T>(text: &str, read: Result<T, Error>) -> Result<T, Error> {
    let Err(error) = read else {
        return read;
    };
    let Some(refused) = take_refused() else {
        return Err(error);
    };
    let (mut path, at) = match error {
        // serde_json stands at the key's closing quote.
        Error::Json { path, error } => (path, key_before(text, error.line(), error.column(), &refused.key)),
        // serde-saphyr stands at the last event it read, before the key, or nowhere (a key of
        // the root mapping): then the key is looked for from the start.
        Error::Yaml { path, error } => {
            let stood = error
                .location()
                .and_then(|l| Some((usize::try_from(l.line()).ok()?, usize::try_from(l.column()).ok()?)))
                .filter(|&(line, _)| line > 0);
            let (line, column) = stood.unwrap_or((1, 1));
            (path, key_after(text, line, column, &refused.key).or(stood))
        }
        other => return Err(other),
    };
    // A path that already ends at the key (a reader that tracks keys before values) is kept.
    if path.last() != Some(&PathSegment::Key(refused.key.clone())) {
        path.push(PathSegment::Key(refused.key));
    }
    Err(Error::UnknownField {
        path,
        at: at.filter(|&(line, _)| line > 0),
        suggestion: refused.suggestion,
    })
}

/// The byte offset of 1-based `line` and `column` (in characters) in `text`.
fn offset_of(text: &str, line: usize, column: usize) -> Option<usize> {
    let start = if line <= 1 {
        0
    } else {
        text.match_indices('\n').nth(line - 2)?.0 + 1
    };
    let rest = text.get(start..)?;
    let within = rest
        .char_indices()
        .nth(column.saturating_sub(1))
        .map_or(rest.len(), |(i, _)| i);
    Some(start + within)
}

/// The 1-based line and column (in characters) of byte `at` of `text`.
fn position_of(text: &str, at: usize) -> (usize, usize) {
    line_column(text.as_bytes(), at)
}

/// Where a JSON key ends with its closing quote at `line`/`column`: its opening quote's
/// position, when the text there is the key quoted as written (no escapes); else the position
/// as given.
fn key_before(text: &str, line: usize, column: usize, key: &str) -> Option<(usize, usize)> {
    let end = offset_of(text, line, column + 1)?;
    let quoted = format!("\"{key}\"");
    let start = end.checked_sub(quoted.len())?;
    match text.get(start..end) {
        Some(found) if found == quoted => Some(position_of(text, start)),
        _ => Some((line, column)),
    }
}

/// Where a YAML key stands at or after `line`/`column`: the first occurrence of it followed by
/// `:` (quoted or not) at the start of a key (after white space, `{`, `,`, `-` or a line break).
/// The next thing after the event the reader stopped at is that key, so this finds it unless
/// a comment in between spells it too; `None` when it is not found, the given place stands.
fn key_after(text: &str, line: usize, column: usize, key: &str) -> Option<(usize, usize)> {
    if key.is_empty() {
        return None;
    }
    let from = offset_of(text, line, column)?;
    let mut search = from;
    while let Some(found) = text.get(search..)?.find(key) {
        let at = search + found;
        let before = text[..at].chars().next_back();
        let quote = before.filter(|c| matches!(c, '"' | '\''));
        let key_start = if quote.is_some() { at - 1 } else { at };
        let opens = text[..key_start]
            .chars()
            .next_back()
            .is_none_or(|c| c.is_whitespace() || matches!(c, '{' | ',' | '-'));
        let mut after = text[at + key.len()..].chars();
        let closes = match quote {
            Some(q) => after.next() == Some(q),
            None => true,
        };
        if opens && closes && after.next() == Some(':') {
            return Some(position_of(text, key_start));
        }
        search = at + key.len();
    }
    None
}

/// [`from_str`] under the policy already in force on this thread.
pub(crate) fn from_str_as_set(text: &str) -> Result<GpuManifest, Error> {
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
    if looks_like_json(body) {
        let mut de = serde_json::Deserializer::from_str(body);
        // The fast read does not track where it is; only a document that fails is read again,
        // with the path tracking that names the failing field.
        if let Ok(Document(m)) = Document::deserialize(&mut de)
            && de.end().is_ok()
        {
            return Ok(m);
        }
        if let Some(peer) = read_peer(body, true) {
            return peer;
        }
        let mut de = serde_json::Deserializer::from_str(body);
        let Document(m) = serde_path_to_error::deserialize(&mut de).map_err(|e| Error::Json {
            path: error_path(e.path()),
            error: e.into_inner(),
        })?;
        de.end()?;
        Ok(m)
    } else {
        let budget = match serde_saphyr::with_deserializer_from_str_with_options(body, yaml_options(), |de| {
            Document::deserialize(de)
        }) {
            Ok(Document(m)) => return Ok(m),
            Err(e) => budget_breach(&e),
        };
        if let Some(why) = budget {
            return Err(Error::YamlLimit { why });
        }
        if let Some(peer) = read_peer(body, false) {
            return peer;
        }
        let mut at = Vec::new();
        serde_saphyr::with_deserializer_from_str_with_options(body, yaml_options(), |de| {
            serde_path_to_error::deserialize(de).map_err(|e| {
                at = error_path(e.path());
                e.into_inner()
            })
        })
        .map(|Document(m)| m)
        .map_err(|error| yaml_error(at, error))
    }
}

/// Reads a `PodSnapshotContent`'s `status.source` (JSON or YAML text) as a manifest, whatever
/// its keys: a caller that took it from the object's `status.source` knows what it is, so no
/// shape is guessed (`{}` or a `pod` alone is a source too, with every other fact unknown).
/// The manifest reader's size limit applies, and errors name the field.
pub fn from_snapshot_source(text: &str) -> Result<GpuManifest, Error> {
    if text.len() > MAX_MANIFEST_BYTES {
        return Err(Error::TooLarge {
            size: text.len(),
            limit: MAX_MANIFEST_BYTES,
        });
    }
    let body = text.trim_start_matches('\u{feff}');
    let _scope = Scope::enter(ReadOptions::default().fields);
    read_tracked(body, looks_like_json(body)).map(crate::peer::from_source)
}

/// A document that is not a miggate manifest, read as one of the Go peer's artifacts when its
/// shape says it is one (`None` otherwise: the caller reports the miggate reading's error).
/// Only a document the fast read refused gets here, so a miggate manifest costs nothing more.
fn read_peer(body: &str, json: bool) -> Option<Result<GpuManifest, Error>> {
    use crate::peer::{self, Keys, Shape};
    let keys: Keys = if json {
        serde_json::from_str(body).ok()?
    } else {
        serde_saphyr::with_deserializer_from_str_with_options(body, yaml_options(), |de| {
            Keys::deserialize(de)
        })
        .ok()?
    };
    Some(match keys.shape()? {
        Shape::Manifest => read_tracked(body, json).map(peer::from_manifest),
        Shape::SnapshotContent => read_tracked(body, json).and_then(peer::from_object),
        Shape::Source => read_tracked(body, json).map(peer::from_source),
    })
}

/// Reads `T` from JSON or YAML text, an error naming the field it happened at.
pub(crate) fn read_tracked<T: serde::de::DeserializeOwned>(body: &str, json: bool) -> Result<T, Error> {
    if json {
        let mut de = serde_json::Deserializer::from_str(body);
        let value = serde_path_to_error::deserialize(&mut de).map_err(|e| Error::Json {
            path: error_path(e.path()),
            error: e.into_inner(),
        })?;
        de.end()?;
        Ok(value)
    } else {
        let mut at = Vec::new();
        serde_saphyr::with_deserializer_from_str_with_options(body, yaml_options(), |de| {
            serde_path_to_error::deserialize(de).map_err(|e| {
                at = error_path(e.path());
                e.into_inner()
            })
        })
        .map_err(|error| yaml_error(at, error))
    }
}

/// The deepest nesting YAML is read to: serde-saphyr's own default, which keeps deep input off
/// the stack of a 2 MiB thread (JSON's is serde_json's 128).
pub const MAX_YAML_DEPTH: usize = 64;

/// YAML is read within limits that let through every document JSON reads under the size limit
/// (a node takes at least two bytes), while alias bombs stay refused by serde-saphyr's alias
/// and anchor limits.
fn yaml_options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_nodes = MAX_MANIFEST_BYTES;
    budget.max_events = 2 * MAX_MANIFEST_BYTES;
    budget.max_depth = MAX_YAML_DEPTH;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options
}

/// A budget breach said in words instead of serde-saphyr's Debug text; `None` for any other
/// error. Budgets are checked as the parser reads, so the first (untracked) read reports one
/// as itself.
fn budget_breach(error: &serde_saphyr::Error) -> Option<String> {
    use serde_saphyr::budget::BudgetBreach;
    let mut error = error;
    // Snippets and alias context wrap the breach; look through them.
    while let serde_saphyr::Error::WithSnippet { error: inner, .. }
    | serde_saphyr::Error::AliasError { error: inner, .. } = error
    {
        error = inner;
    }
    let serde_saphyr::Error::Budget { breach, .. } = error else {
        return None;
    };
    Some(match breach {
        BudgetBreach::Depth { .. } => format!("it nests deeper than {MAX_YAML_DEPTH} levels"),
        BudgetBreach::Nodes { .. } | BudgetBreach::Events { .. } => {
            "it has more YAML nodes than a 16 MiB manifest can hold".to_string()
        }
        BudgetBreach::Aliases { .. }
        | BudgetBreach::Anchors { .. }
        | BudgetBreach::AliasAnchorRatio { .. }
        | BudgetBreach::RecordedAnchorEvents { .. }
        | BudgetBreach::RecordedAnchorBytes { .. } => {
            "it uses more YAML aliases or anchors than a manifest needs (an alias bomb?)".to_string()
        }
        BudgetBreach::Documents { .. } => "it holds more than one YAML document".to_string(),
        other => format!("it exceeds a YAML reading limit ({other:?})"),
    })
}

/// A YAML error with the field path it happened at.
fn yaml_error(path: Vec<PathSegment>, error: serde_saphyr::Error) -> Error {
    if let Some(why) = budget_breach(&error) {
        return Error::YamlLimit { why };
    }
    Error::Yaml {
        path,
        error: Box::new(error),
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

impl GpuManifest {
    /// Warnings about the document itself, by path: each unknown field
    /// ([`Warning::UnknownField`]), then each MIG profile nvidia-smi is not known to print (read
    /// as an opaque profile, compared as text: [`Warning::UnrecognisedProfile`]).
    pub fn read_warnings(&self) -> Vec<Warning> {
        if !self.has_read_warnings() {
            return Vec::new();
        }
        let unknown = self
            .unknown_fields()
            .into_iter()
            .map(|f| Warning::UnknownField { path: f.path });
        let profiles = self
            .devices()
            .into_iter()
            .flatten()
            .enumerate()
            .filter_map(|(index, d)| {
                let profile = d.mig_profile.as_ref().filter(|p| !p.is_recognised())?;
                Some(Warning::UnrecognisedProfile {
                    index,
                    profile: profile.clone(),
                })
            });
        unknown.chain(profiles).collect()
    }

    /// Whether [`GpuManifest::read_warnings`] has anything to say: one pass that builds nothing,
    /// since a report is built per admission request and nearly every manifest is clean.
    pub fn has_read_warnings(&self) -> bool {
        let mappings = [
            Some(&self.unknown),
            self.captured_by.as_ref().map(|c| &c.unknown),
            self.host.as_ref().map(|h| &h.unknown),
            self.pod.as_ref().map(|p| &p.unknown),
            self.nvidia.as_ref().map(|n| &n.unknown),
        ];
        if mappings.into_iter().flatten().any(|u| !u.is_empty()) {
            return true;
        }
        let Some(n) = &self.nvidia else {
            return false;
        };
        n.gpus.iter().flatten().any(|g| !g.unknown.is_empty())
            || n.devices
                .iter()
                .flatten()
                .any(|d| !d.unknown.is_empty() || d.mig_profile.as_ref().is_some_and(|p| !p.is_recognised()))
    }

    /// The manifest document as a JSON tree: the envelope, then the body with its unknown
    /// fields where they were.
    pub fn to_value(&self) -> Result<Value, Error> {
        let mut tree = serde_json::Map::new();
        tree.insert("apiVersion".into(), API_VERSION.into());
        tree.insert("kind".into(), KIND.into());
        if let Value::Object(body) = serde_json::to_value(self)? {
            for (k, v) in body {
                // A body read on its own may hold no envelope of its own: the one above stands.
                tree.entry(k).or_insert(v);
            }
        }
        Ok(Value::Object(tree))
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
    use crate::FieldValidation;

    const TYPO_YAML: &str = "apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\nnvidia:\n  driverVersion: \"580.82.07\"\n  devcies:\n  - {uuid: GPU-1}\n";
    const TYPO_JSON: &str = "{\"apiVersion\": \"miggate.io/v1alpha1\", \"kind\": \"GpuManifest\",\n \"nvidia\": {\"devices\": [{\"uuid\": \"GPU-1\",\n  \"migprofile\": \"1g.10gb\"}]}}";

    fn strict(text: &str) -> String {
        from_str_with(text, ReadOptions::strict())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn strict_reading_names_the_path_the_line_and_the_nearest_name() {
        assert_eq!(
            strict(TYPO_YAML),
            "unknown field `nvidia.devcies` at line 5 column 3: did you mean `devices`?"
        );
        assert_eq!(
            strict(TYPO_JSON),
            "unknown field `nvidia.devices[0].migprofile` at line 3 column 3: did you mean `migProfile`?"
        );
        assert_eq!(
            strict("apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\ncolour: blue\n"),
            "unknown field `colour` at line 3 column 1"
        );
    }

    #[test]
    fn warn_keeps_the_field_and_ignore_drops_it() {
        let warned = from_str(TYPO_YAML).unwrap();
        assert_eq!(
            warned.read_warnings(),
            ["unknown field `nvidia.devcies` kept but not read by any check (a typo?)"]
        );
        let ignored = from_str_with(
            TYPO_YAML,
            ReadOptions {
                fields: FieldValidation::Ignore,
            },
        )
        .unwrap();
        assert!(ignored.read_warnings().is_empty());
        assert!(ignored.nvidia.unwrap().devices.is_none());
        // A strict reading leaves the thread's default as it was.
        assert!(from_str(TYPO_YAML).is_ok());
    }

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
