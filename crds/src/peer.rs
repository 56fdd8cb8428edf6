//! The Go peer's restore contract (NVIDIA Snapshot, `ai-dynamo/snapshot`), read as its node
//! agent reads it, so a restore pod the peer would restore is gated before it is scheduled.
//!
//! - A pod annotated `nvidia.com/restore-from: <name>` restores the `PodSnapshot` of that name
//!   in its namespace ([`snapshot_name`]: trimmed, a DNS-1123 subdomain).
//! - The `PodSnapshot`'s `status.boundSnapshotContentName` names the cluster-scoped
//!   `PodSnapshotContent`, the artifact of record; its `status.source` says what the checkpoint
//!   was captured on, in one of the shapes `miggate_compat::from_snapshot_source` reads, and its
//!   `spec.source.podRef.containers` the one container captured ([`SnapshotContent`]).
//! - `nvidia.com/restore-container-map` maps that container to destinations in the pod
//!   ([`destinations`], the peer's parse and validation rules); each destination is checked.
//! - `nvidia.com/snapshot-skip-compat-check` disables the checks for one restore when Go's
//!   `strconv.ParseBool` of the trimmed value is true ([`skip_compat_check`]).
//!
//! The types here hold only what miggate reads of the peer's objects, so a watch cache of them
//! costs little and a field the peer adds later cannot fail the decoding of a list. miggate
//! never writes these objects and never installs their CRDs.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use miggate_compat::GpuManifest;
use miggate_compat::escape::escape;
use miggate_wire::peer::{
    GROUP, POD_SNAPSHOT, POD_SNAPSHOT_CONTENT, POD_SNAPSHOT_CONTENTS, POD_SNAPSHOTS, RESTORE_CONTAINER_MAP,
    RESTORE_FROM, VERSION,
};
use serde::{Deserialize, Serialize};

use crate::schema::{is_dns_label, is_dns_subdomain, is_subdomain_part};

/// The longest value of the peer's annotations miggate reads. A container map of 64
/// destinations of 63 bytes each is about 8 KiB; a longer value is no contract's, so it is
/// refused before it is split.
pub const MAX_ANNOTATION_BYTES: usize = 16 * 1024;

/// Why a restore pod's peer annotation cannot be read, in the peer's own words (its node agent
/// refuses the same values with the same messages). Names from the pod are held escaped and
/// cut; the labels checked are plain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PeerError {
    /// `nvidia.com/restore-from` is empty.
    #[error("{RESTORE_FROM} must name a PodSnapshot")]
    NoSnapshotName,
    /// `nvidia.com/restore-from` is not a DNS-1123 subdomain.
    #[error("{RESTORE_FROM} value \"{name}\" is not a valid PodSnapshot name: {why}")]
    SnapshotName {
        /// The value, trimmed, escaped and cut.
        name: String,
        /// What `validation.IsDNS1123Subdomain` says of it.
        why: String,
    },
    /// The container map is longer than any real one.
    #[error(
        "{RESTORE_CONTAINER_MAP} is {len} bytes, more than the {MAX_ANNOTATION_BYTES} any container map needs"
    )]
    MapTooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The captured container's name is not a DNS-1123 label.
    #[error("captured source container \"{name}\" is invalid: {why}")]
    CapturedName {
        /// The name, escaped and cut.
        name: String,
        /// What `validation.IsDNS1123Label` says of it.
        why: String,
    },
    /// A container map entry that is not one `source=destination` pair.
    #[error("invalid {RESTORE_CONTAINER_MAP} entry \"{entry}\": expected source=destination")]
    MapEntry {
        /// The entry, trimmed, escaped and cut.
        entry: String,
    },
    /// A map entry's source is not a DNS-1123 label.
    #[error("invalid restore source container \"{name}\": {why}")]
    SourceName {
        /// The source, escaped and cut.
        name: String,
        /// What `validation.IsDNS1123Label` says of it.
        why: String,
    },
    /// A map entry's destination is not a DNS-1123 label.
    #[error("invalid restore destination container \"{name}\": {why}")]
    DestinationName {
        /// The destination, escaped and cut.
        name: String,
        /// What `validation.IsDNS1123Label` says of it.
        why: String,
    },
    /// A map entry's source is not the captured container.
    #[error("restore source container \"{given}\" does not match captured container \"{captured}\"")]
    NotCaptured {
        /// The entry's source (a label).
        given: String,
        /// The captured container (a label).
        captured: String,
    },
    /// Two entries' sources differ, checked before the captured container is known: no
    /// captured container can match both.
    #[error("restore source container \"{given}\" differs from the map's first source \"{first}\"")]
    SourcesDiffer {
        /// The differing source (a label).
        given: String,
        /// The map's first source (a label).
        first: String,
    },
    /// Two entries restore into the same destination.
    #[error("duplicate restore destination container \"{name}\"")]
    DuplicateDestination {
        /// The destination (a label).
        name: String,
    },
}

/// A `PodSnapshot` (`nvidia.com/v1alpha1`, namespaced): what a restore pod names.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodSnapshot {
    /// Its name and namespace.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What it captures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<PodSnapshotSpec>,
    /// Its binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PodSnapshotStatus>,
}

/// `PodSnapshot.spec`: the pod and container captured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodSnapshotSpec {
    /// `spec.source`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SnapshotSource>,
}

/// `spec.source` of either object: the source pod (and, on a content, its node).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotSource {
    /// The source pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_ref: Option<PodRef>,
    /// The node the source pod ran on (a content's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
}

/// `podRef`: the source pod and the containers captured (v1alpha1 captures exactly one).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodRef {
    /// The source pod's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The containers captured.
    #[serde(default)]
    pub containers: Vec<String>,
}

/// `PodSnapshot.status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSnapshotStatus {
    /// The `PodSnapshotContent` it is bound to; absent until the peer's agent made one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_snapshot_content_name: Option<String>,
}

/// A `PodSnapshotContent` (`nvidia.com/v1alpha1`, cluster-scoped): the artifact of record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodSnapshotContent {
    /// Its name.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The snapshot it is bound to and what was captured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<PodSnapshotContentSpec>,
    /// What the capture ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PodSnapshotContentStatus>,
}

/// `PodSnapshotContent.spec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSnapshotContentSpec {
    /// The back-pointer to the bound `PodSnapshot`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_ref: Option<SnapshotRef>,
    /// The source pod, its captured container and node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SnapshotSource>,
}

/// `spec.snapshotRef`: the back-pointer a content keeps to the one `PodSnapshot` it belongs to.
/// The peer records the snapshot's UID at binding, so a snapshot deleted and made again under
/// the same name is not the content's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRef {
    /// The snapshot's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The snapshot's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The snapshot's UID, when the peer recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

impl SnapshotRef {
    /// Whether this back-pointer names the `PodSnapshot` `namespace/name` whose UID is `uid`:
    /// namespace and name equal, and the UIDs too where both are known (an empty UID is none,
    /// as the peer's `omitempty` writes it). The peer's operator holds a content to the same
    /// rule before it adopts it.
    pub fn names(&self, namespace: &str, name: &str, uid: Option<&str>) -> bool {
        fn known(u: Option<&str>) -> Option<&str> {
            u.filter(|u| !u.is_empty())
        }
        let uid_agrees = match (known(self.uid.as_deref()), known(uid)) {
            (Some(recorded), Some(uid)) => recorded == uid,
            _ => true,
        };
        self.namespace.as_deref() == Some(namespace) && self.name.as_deref() == Some(name) && uid_agrees
    }
}

/// `PodSnapshotContent.status`: only `source` is read, kept as JSON until it is translated
/// (its `devices` preserve unknown fields, so no type can promise its shape).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodSnapshotContentStatus {
    /// `status.source`, in any of the shapes the peer has published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<serde_json::Value>,
}

impl kube::Resource for PodSnapshot {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        POD_SNAPSHOT.into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        GROUP.into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        VERSION.into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        POD_SNAPSHOTS.into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl kube::Resource for PodSnapshotContent {
    type DynamicType = ();
    type Scope = ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        POD_SNAPSHOT_CONTENT.into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        GROUP.into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        VERSION.into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        POD_SNAPSHOT_CONTENTS.into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl PodSnapshotStatus {
    /// The content it names, when it names one (a blank name is not a binding).
    pub fn bound_content(&self) -> Option<&str> {
        self.bound_snapshot_content_name
            .as_deref()
            .map(str::trim)
            .filter(|n| !n.is_empty())
    }
}

impl PodSnapshot {
    /// The content it is bound to, when it is bound (a blank name is not a binding).
    pub fn bound_content(&self) -> Option<&str> {
        self.status.as_ref().and_then(PodSnapshotStatus::bound_content)
    }

    /// The container its spec says is captured (the first of `podRef.containers`).
    pub fn captured_container(&self) -> Option<&str> {
        first_container(self.spec.as_ref().and_then(|s| s.source.as_ref()))
    }
}

fn first_container(source: Option<&SnapshotSource>) -> Option<&str> {
    source
        .and_then(|s| s.pod_ref.as_ref())
        .and_then(|p| p.containers.first())
        .map(|c| c.trim())
        .filter(|c| !c.is_empty())
}

/// What a `PodSnapshotContent` gives a decision: the checkpoint's facts, or why there are none.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotContent {
    /// The content's name, for messages.
    pub name: String,
    /// The container captured (`spec.source.podRef.containers[0]`).
    pub container: Option<String>,
    /// `spec.snapshotRef`: the snapshot the content belongs to ([`SnapshotRef::names`]).
    pub snapshot_ref: Option<SnapshotRef>,
    /// `status.source` translated, or why it cannot be compared.
    pub source: Result<GpuManifest, NoSource>,
}

/// Why a content's `status.source` cannot be compared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoSource {
    /// The content has none: written by an agent that does not record it, or not Ready yet.
    Absent,
    /// It does not read as any shape the peer has published.
    Unreadable(String),
}

impl std::fmt::Display for NoSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoSource::Absent => f.write_str(
                "has no status.source (an agent that does not record it, or a capture not Ready yet)",
            ),
            NoSource::Unreadable(why) => write!(f, "has a status.source miggate cannot read: {why}"),
        }
    }
}

impl SnapshotContent {
    /// Reads what a decision needs of `content`: its captured container, its back-pointer and
    /// its `status.source` translated (once, as the object arrives, not per decision).
    pub fn read(content: &PodSnapshotContent) -> SnapshotContent {
        let spec = content.spec.as_ref();
        let source = match content.status.as_ref().and_then(|s| s.source.as_ref()) {
            None | Some(serde_json::Value::Null) => Err(NoSource::Absent),
            Some(value) => serde_json::to_string(value)
                .map_err(|e| NoSource::Unreadable(e.to_string()))
                .and_then(|text| {
                    miggate_compat::from_snapshot_source(&text)
                        .map_err(|e| NoSource::Unreadable(escape(&e.to_string()).into_owned()))
                }),
        };
        SnapshotContent {
            name: content.metadata.name.clone().unwrap_or_default(),
            container: first_container(spec.and_then(|s| s.source.as_ref())).map(str::to_string),
            snapshot_ref: spec.and_then(|s| s.snapshot_ref.clone()),
            source,
        }
    }
}

/// The `PodSnapshot` a restore pod names: `nvidia.com/restore-from` trimmed, a DNS-1123
/// subdomain; otherwise the peer's own words for why not.
pub fn snapshot_name(value: &str) -> Result<&str, PeerError> {
    let name = value.trim();
    if name.is_empty() {
        return Err(PeerError::NoSnapshotName);
    }
    if !is_dns_subdomain(name) {
        return Err(PeerError::SnapshotName {
            name: escape_within_name(name).into_owned(),
            why: subdomain_errors(name),
        });
    }
    Ok(name)
}

/// A name quoted in a message: escaped and cut, since it comes from the pod's author.
fn escape_within_name(name: &str) -> Cow<'_, str> {
    miggate_compat::escape::escape_within(name, 256)
}

/// What `validation.IsDNS1123Subdomain` says of a name that is not one.
fn subdomain_errors(name: &str) -> String {
    let mut errs = Vec::new();
    if name.len() > 253 {
        errs.push("must be no more than 253 characters");
    }
    if !name.split('.').all(is_subdomain_part) {
        errs.push(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', \
             and must start and end with an alphanumeric character (e.g. 'example.com', regex used for \
             validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        );
    }
    errs.join("; ")
}

/// What `validation.IsDNS1123Label` says of a name that is not one.
fn label_errors(name: &str) -> String {
    let mut errs = Vec::new();
    if name.len() > 63 {
        errs.push("must be no more than 63 characters");
    }
    if !is_subdomain_part(name) {
        errs.push(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and \
             must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used \
             for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        );
    }
    errs.join("; ")
}

/// The destinations the captured container restores into: `nvidia.com/restore-container-map`
/// parsed and validated as the peer's agent does (`source=destination` pairs split on `,` then
/// `=`, each side trimmed; every source the captured container, every destination a distinct
/// DNS-1123 label), or, without the annotation, the captured container itself. The error is
/// the peer's wording.
pub fn destinations(map: Option<&str>, captured: &str) -> Result<Vec<String>, PeerError> {
    let captured = captured.trim();
    let Some(raw) = map else {
        return Ok(vec![captured.to_string()]);
    };
    if raw.len() > MAX_ANNOTATION_BYTES {
        return Err(PeerError::MapTooLong { len: raw.len() });
    }
    if !is_dns_label(captured) {
        return Err(PeerError::CapturedName {
            name: escape_within_name(captured).into_owned(),
            why: label_errors(captured),
        });
    }
    let mut out: Vec<String> = Vec::new();
    for part in raw.trim().split(',') {
        let mut pair = part.split('=');
        let (Some(source), Some(destination), None) = (pair.next(), pair.next(), pair.next()) else {
            return Err(PeerError::MapEntry {
                entry: escape_within_name(part.trim()).into_owned(),
            });
        };
        let (source, destination) = (source.trim(), destination.trim());
        if !is_dns_label(source) {
            return Err(PeerError::SourceName {
                name: escape_within_name(source).into_owned(),
                why: label_errors(source),
            });
        }
        if !is_dns_label(destination) {
            return Err(PeerError::DestinationName {
                name: escape_within_name(destination).into_owned(),
                why: label_errors(destination),
            });
        }
        if source != captured {
            return Err(PeerError::NotCaptured {
                given: source.to_string(),
                captured: captured.to_string(),
            });
        }
        if out.iter().any(|d| d == destination) {
            return Err(PeerError::DuplicateDestination {
                name: destination.to_string(),
            });
        }
        out.push(destination.to_string());
    }
    Ok(out)
}

/// The container map's own syntax, checked without the captured container (which only the
/// content knows): a pair list whose sides are labels. The same rules and words as
/// [`destinations`], so a pod whose map can never be right is refused at once.
pub fn check_container_map(map: &str) -> Result<(), PeerError> {
    if map.len() > MAX_ANNOTATION_BYTES {
        return destinations(Some(map), "x").map(|_| ());
    }
    let first_source = map
        .trim()
        .split(',')
        .next()
        .and_then(|p| p.split('=').next())
        .map(str::trim)
        .unwrap_or_default();
    match destinations(
        Some(map),
        if is_dns_label(first_source) {
            first_source
        } else {
            "x"
        },
    ) {
        // Two sources that differ: no captured container can match both.
        Err(PeerError::NotCaptured { given, captured }) => Err(PeerError::SourcesDiffer {
            given,
            first: captured,
        }),
        other => other.map(|_| ()),
    }
}

/// Whether `nvidia.com/snapshot-skip-compat-check` disables the checks: Go's
/// `strconv.ParseBool` of the trimmed value is true (`1 t T TRUE true True`). Anything else,
/// `yes` included, is not a waiver.
pub fn skip_compat_check(value: Option<&str>) -> bool {
    matches!(
        value.map(str::trim),
        Some("1" | "t" | "T" | "TRUE" | "true" | "True")
    )
}

/// Whether Go's `strconv.ParseBool` reads the trimmed value at all, for a warning that an
/// annotation present waives nothing.
pub fn parses_as_bool(value: &str) -> bool {
    matches!(
        value.trim(),
        "1" | "t" | "T" | "TRUE" | "true" | "True" | "0" | "f" | "F" | "FALSE" | "false" | "False"
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("  snap-1 ", Ok("snap-1"))]
    #[case("a.b-c.d", Ok("a.b-c.d"))]
    #[case(&"a".repeat(100), Ok(""))]
    #[case("", Err("nvidia.com/restore-from must name a PodSnapshot"))]
    #[case(" \t", Err("nvidia.com/restore-from must name a PodSnapshot"))]
    #[case(
        "Snap",
        Err(
            "nvidia.com/restore-from value \"Snap\" is not a valid PodSnapshot name: a lowercase RFC 1123 subdomain"
        )
    )]
    #[case("snap..1", Err("is not a valid PodSnapshot name"))]
    #[case("snap/1", Err("is not a valid PodSnapshot name"))]
    #[case(&"a".repeat(254), Err("must be no more than 253 characters"))]
    fn restore_from_is_read_as_the_peer_reads_it(#[case] value: &str, #[case] expected: Result<&str, &str>) {
        match (snapshot_name(value), expected) {
            (Ok(name), Ok("")) => assert_eq!(name, value.trim()),
            (Ok(name), Ok(want)) => assert_eq!(name, want),
            (Err(e), Err(want)) => assert!(e.to_string().contains(want), "{e}"),
            (got, want) => panic!("{value:?}: got {got:?}, want {want:?}"),
        }
    }

    #[rstest]
    #[case(None, Ok(vec!["engine"]))]
    #[case(Some("engine=engine-0"), Ok(vec!["engine-0"]))]
    #[case(Some(" engine = engine-0 , engine=engine-1 "), Ok(vec!["engine-0", "engine-1"]))]
    #[case(
        Some(""),
        Err("invalid nvidia.com/restore-container-map entry \"\": expected source=destination")
    )]
    #[case(
        Some("engine=a,"),
        Err("invalid nvidia.com/restore-container-map entry \"\": expected source=destination")
    )]
    #[case(Some("engine=a=b"), Err("expected source=destination"))]
    #[case(Some("engine"), Err("expected source=destination"))]
    #[case(
        Some("other=a"),
        Err("restore source container \"other\" does not match captured container \"engine\"")
    )]
    #[case(
        Some("engine=a,engine=a"),
        Err("duplicate restore destination container \"a\"")
    )]
    #[case(
        Some("engine=Main"),
        Err("invalid restore destination container \"Main\": a lowercase RFC 1123 label")
    )]
    #[case(Some("Engine=a"), Err("invalid restore source container \"Engine\""))]
    fn container_maps_follow_the_peer(#[case] map: Option<&str>, #[case] expected: Result<Vec<&str>, &str>) {
        match (destinations(map, "engine"), expected) {
            (Ok(got), Ok(want)) => assert_eq!(got, want),
            (Err(e), Err(want)) => assert!(e.to_string().contains(want), "{e}"),
            (got, want) => panic!("{map:?}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn a_long_map_is_refused_before_it_is_split() {
        let map = "engine=a,".repeat(4000);
        let e = destinations(Some(&map), "engine").unwrap_err().to_string();
        assert!(e.contains("more than the 16384"), "{e}");
        // 10,000 distinct destinations within the limit would be quadratic to check for
        // duplicates; the limit keeps it to a few hundred.
        assert!(MAX_ANNOTATION_BYTES / "engine=a,".len() < 2000);
    }

    #[rstest]
    #[case("engine=a,engine=b", Ok(()))]
    #[case(
        "engine=a,other=b",
        Err("restore source container \"other\" differs from the map's first source \"engine\"")
    )]
    #[case("engine", Err("expected source=destination"))]
    fn a_map_is_checked_before_its_content_is_known(#[case] map: &str, #[case] expected: Result<(), &str>) {
        match (check_container_map(map), expected) {
            (Ok(()), Ok(())) => {}
            (Err(e), Err(want)) => assert!(e.to_string().contains(want), "{e}"),
            (got, want) => panic!("{map:?}: got {got:?}, want {want:?}"),
        }
    }

    #[rstest]
    #[case(Some("true"), true)]
    #[case(Some(" True "), true)]
    #[case(Some("1"), true)]
    #[case(Some("t"), true)]
    #[case(Some("TRUE"), true)]
    #[case(Some("yes"), false)]
    #[case(Some("tRUE"), false)]
    #[case(Some("false"), false)]
    #[case(Some(""), false)]
    #[case(None, false)]
    fn skip_is_go_parse_bool(#[case] value: Option<&str>, #[case] skip: bool) {
        assert_eq!(skip_compat_check(value), skip);
    }

    /// A content belongs to the snapshot its back-pointer names: namespace and name, and the
    /// UID where both sides know one.
    #[rstest]
    #[case::matches(Some("ml"), Some("s1"), Some("u-1"), Some("u-1"), true)]
    #[case::other_name(Some("ml"), Some("s2"), Some("u-1"), Some("u-1"), false)]
    #[case::other_namespace(Some("team-b"), Some("s1"), Some("u-1"), Some("u-1"), false)]
    #[case::uid_mismatch(Some("ml"), Some("s1"), Some("u-old"), Some("u-1"), false)]
    #[case::uid_not_recorded(Some("ml"), Some("s1"), None, Some("u-1"), true)]
    #[case::uid_recorded_empty(Some("ml"), Some("s1"), Some(""), Some("u-1"), true)]
    #[case::snapshot_uid_unknown(Some("ml"), Some("s1"), Some("u-1"), None, true)]
    #[case::no_namespace(None, Some("s1"), None, Some("u-1"), false)]
    #[case::no_name(Some("ml"), None, None, Some("u-1"), false)]
    fn a_back_pointer_names_one_snapshot(
        #[case] namespace: Option<&str>,
        #[case] name: Option<&str>,
        #[case] recorded: Option<&str>,
        #[case] uid: Option<&str>,
        #[case] names: bool,
    ) {
        let r = SnapshotRef {
            namespace: namespace.map(str::to_string),
            name: name.map(str::to_string),
            uid: recorded.map(str::to_string),
        };
        assert_eq!(r.names("ml", "s1", uid), names, "{r:?}");
    }

    #[test]
    fn a_content_is_read_in_each_shape() {
        let content = |status: serde_json::Value| -> SnapshotContent {
            let c: PodSnapshotContent = serde_json::from_value(serde_json::json!({
                "apiVersion": "nvidia.com/v1alpha1", "kind": "PodSnapshotContent",
                "metadata": {"name": "c1"},
                "spec": {"snapshotRef": {"namespace": "ml", "name": "s1"},
                    "source": {"nodeName": "n1", "podRef": {"name": "p", "containers": ["engine"]}}},
                "status": status}))
            .unwrap();
            SnapshotContent::read(&c)
        };
        let none = content(serde_json::json!({}));
        assert_eq!(none.source, Err(NoSource::Absent));
        assert_eq!(none.container.as_deref(), Some("engine"));
        assert_eq!(
            none.snapshot_ref,
            Some(SnapshotRef {
                namespace: Some("ml".into()),
                name: Some("s1".into()),
                uid: None
            })
        );
        let node_only = content(serde_json::json!({"source": {"node": {"name": "n1"}}}));
        let m = node_only.source.unwrap();
        assert!(m.nvidia.is_none(), "GPUs unknown when only the node is recorded");
        let full = content(
            serde_json::json!({"source": {"node": {"name": "n1"}, "pod": {"memory": "32Gi"},
            "devices": {"nvidia": {"instances": [{"productName": "NVIDIA H100 80GB HBM3", "migProfile": "1g.10gb"}]}}}}),
        );
        assert_eq!(full.source.unwrap().nvidia.unwrap().devices.unwrap().len(), 1);
        let bad = content(serde_json::json!({"source": {"devices": {"nvidia": {"instances": 3}}}}));
        assert!(matches!(bad.source, Err(NoSource::Unreadable(_))));
    }
}
