//! A pod as the pod watch reads it: only what a restore pod's binding needs, so the webhook's
//! memory is bounded by its restore pods, not by every pod of the cluster.
//!
//! Without `--restore-pod-selector` the webhook watches every pod, and k8s-openapi's `Pod`
//! holds each one whole until the cache drops it: a tenant who made 400 pods with 200 KiB of
//! annotations each took a restarted webhook to 162 MiB (its limit is 256 MiB), every one of
//! those annotations allocated in a list page of 500. [`WatchedPod`] reads the same JSON and
//! keeps only its name, namespace, `resourceVersion` and uid, the restore annotations
//! ([`RestoreAnnotations`], read by the same visitor as the review's), its containers' names
//! and resources, its `resourceClaims` and `status.resourceClaimStatuses` names; serde skips
//! every other field, and the annotation map's visitor skips every other annotation's value
//! with [`IgnoredAny`](serde::de::IgnoredAny) (its key is compared in place, never
//! allocated).
//!
//! A kept annotation's value is bounded too ([`MAX_KEPT_ANNOTATION_BYTES`]): a longer one is
//! replaced by a marker ([`Kept::Oversized`]). The pod stays a restore pod, and the marker is
//! in no annotation's grammar (not a name, not a check, not a map or a boolean), so its
//! binding is refused as a malformed or unknown reference, or a waiver that waives nothing,
//! exactly as a value of that length already was: dropping the value instead would let the
//! pod's binding pass unchecked, which a typo or an attack must never get.

use std::fmt;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

use miggate_admission::restore_annotations::RestoreAnnotations;

/// The longest value of a restore annotation the pod cache keeps.
///
/// The Go peer's annotations already have this bound
/// ([`miggate_crds::peer::MAX_ANNOTATION_BYTES`]: a container map of 64 destinations of 63
/// bytes is about 8 KiB), and miggate's own are far shorter (a `GpuCheckpoint` name is at most
/// 253 bytes, `skip-checks` a list of a dozen check names). A value past it is no contract's,
/// so what it said is not needed to refuse it; the bound keeps a restore pod's entry under
/// six times this (one per value a [`RestoreAnnotations`] holds), where the API server lets
/// annotations reach 256 KiB.
pub const MAX_KEPT_ANNOTATION_BYTES: usize = miggate_crds::peer::MAX_ANNOTATION_BYTES;

/// A kept annotation's value: whole, or only its length when over
/// [`MAX_KEPT_ANNOTATION_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kept {
    /// The value as the pod carries it.
    Value(String),
    /// A value of this many bytes, not kept.
    Oversized(usize),
}

impl Kept {
    /// The value to read: the value itself, or for an oversized one a marker that no reader
    /// of any restore annotation accepts (spaces and angle brackets are in no name, check
    /// list, container map or boolean), so the binding refuses rather than passes it.
    pub fn into_value(self) -> String {
        match self {
            Kept::Value(v) => v,
            Kept::Oversized(len) => {
                format!("<value of {len} bytes not kept: over the {MAX_KEPT_ANNOTATION_BYTES}-byte bound>")
            }
        }
    }
}

impl<'de> Deserialize<'de> for Kept {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeptVisitor;
        impl Visitor<'_> for KeptVisitor {
            type Value = Kept;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an annotation value (a string)")
            }

            // serde_json hands a string over borrowed (from the input, or its scratch buffer
            // for escapes): only a value within the bound is copied.
            fn visit_str<E: de::Error>(self, value: &str) -> Result<Kept, E> {
                Ok(if value.len() > MAX_KEPT_ANNOTATION_BYTES {
                    Kept::Oversized(value.len())
                } else {
                    Kept::Value(value.to_owned())
                })
            }

            fn visit_string<E: de::Error>(self, value: String) -> Result<Kept, E> {
                Ok(if value.len() > MAX_KEPT_ANNOTATION_BYTES {
                    Kept::Oversized(value.len())
                } else {
                    Kept::Value(value)
                })
            }
        }
        deserializer.deserialize_str(KeptVisitor)
    }
}

/// The metadata a pod is keyed and read by.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    annotations: RestoreAnnotations<Kept>,
}

/// A container's name and resources: what its GPU asks are read from.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct WatchedContainer {
    /// `name`.
    #[serde(default)]
    pub name: String,
    /// `resources` (requests, limits, claims), as k8s-openapi reads them.
    #[serde(default)]
    pub resources: Option<ResourceRequirements>,
}

/// A claim's name as the pod's spec or status gives it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimName {
    /// `resourceClaimName`: the `ResourceClaim` object's name, when set.
    #[serde(default)]
    pub resource_claim_name: Option<String>,
}

/// `spec.containers` and `spec.resourceClaims`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchedSpec {
    /// `containers`.
    #[serde(default)]
    pub containers: Option<Vec<WatchedContainer>>,
    /// `resourceClaims` (claims named directly, or made from a template).
    #[serde(default)]
    pub resource_claims: Option<Vec<ClaimName>>,
}

/// `status.resourceClaimStatuses`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchedStatus {
    /// `resourceClaimStatuses`: the names of claims made from templates.
    #[serde(default)]
    pub resource_claim_statuses: Option<Vec<ClaimName>>,
}

/// What the pod watch keeps of a pod while it converts it (see the module doc).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WatchedPod {
    /// Name, namespace, `resourceVersion` and uid; nothing else (annotations are in
    /// [`WatchedPod::annotations`]).
    pub metadata: ObjectMeta,
    /// The restore annotations, each value bounded.
    pub annotations: RestoreAnnotations<Kept>,
    /// Containers and claims.
    pub spec: Option<WatchedSpec>,
    /// Claims made from templates.
    pub status: Option<WatchedStatus>,
}

/// The pod as it arrives; every field not named here is skipped by serde unread.
#[derive(Deserialize)]
struct WirePod {
    #[serde(default)]
    metadata: Option<WireMeta>,
    #[serde(default)]
    spec: Option<WatchedSpec>,
    #[serde(default)]
    status: Option<WatchedStatus>,
}

impl<'de> Deserialize<'de> for WatchedPod {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = WirePod::deserialize(deserializer)?;
        let (metadata, annotations) = match wire.metadata {
            Some(m) => (
                ObjectMeta {
                    name: m.name,
                    namespace: m.namespace,
                    resource_version: m.resource_version,
                    uid: m.uid,
                    ..ObjectMeta::default()
                },
                m.annotations,
            ),
            None => (ObjectMeta::default(), RestoreAnnotations::default()),
        };
        Ok(WatchedPod {
            metadata,
            annotations,
            spec: wire.spec,
            status: wire.status,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use kube::Resource;
    use miggate_admission::restore_annotations::Key;
    use rstest::rstest;
    use serde_json::json;

    /// A pod with `foreign` annotations of `size` bytes each beside `restore`.
    fn pod_json(restore: serde_json::Value, foreign: usize, size: usize) -> String {
        let mut annotations = serde_json::Map::new();
        for i in 0..foreign {
            annotations.insert(format!("tenant.example/blob-{i}"), json!("x".repeat(size)));
        }
        if let serde_json::Value::Object(r) = restore {
            annotations.extend(r);
        }
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ml", "uid": "u-1", "resourceVersion": "7",
                "labels": {"app": "x".repeat(size)}, "annotations": annotations,
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:metadata": {}}}]},
            "spec": {"containers": [{"name": "c", "image": "x", "env": [{"name": "BIG", "value": "y".repeat(size)}],
                "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                "resourceClaims": [{"name": "gpus", "resourceClaimName": "claim-a"}],
                "volumes": [{"name": "v", "emptyDir": {}}]},
            "status": {"phase": "Pending", "message": "z".repeat(size),
                "resourceClaimStatuses": [{"name": "made", "resourceClaimName": "claim-b"}]}})
        .to_string()
    }

    #[test]
    fn foreign_annotations_and_fields_are_not_kept_and_restore_ones_are() {
        let text = pod_json(
            json!({"miggate.io/restore-from": "ck", "miggate.io/skip-checks": "mount",
                "nvidia.com/restore-container-map": "a=b", "nvidia.com/snapshot-skip-compat-check": "false"}),
            64,
            200 * 1024,
        );
        let pod: WatchedPod = serde_json::from_str(&text).unwrap();
        assert_eq!(
            pod.annotations,
            RestoreAnnotations {
                restore_from: Some(Kept::Value("ck".into())),
                skip_checks: Some(Kept::Value("mount".into())),
                peer_restore_from: None,
                peer_container_map: Some(Kept::Value("a=b".into())),
                peer_skip: Some(Kept::Value("false".into())),
                ..RestoreAnnotations::default()
            }
        );
        assert_eq!(
            pod.metadata,
            ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ml".into()),
                uid: Some("u-1".into()),
                resource_version: Some("7".into()),
                ..ObjectMeta::default()
            },
            "no labels, annotations or managed fields"
        );
        let spec = pod.spec.unwrap();
        assert_eq!(spec.containers.as_ref().unwrap()[0].name, "c");
        assert_eq!(
            spec.resource_claims.unwrap()[0].resource_claim_name.as_deref(),
            Some("claim-a")
        );
        assert_eq!(
            pod.status.unwrap().resource_claim_statuses.unwrap()[0]
                .resource_claim_name
                .as_deref(),
            Some("claim-b")
        );
        // What is kept is a few hundred bytes, of a pod of 13 MiB.
        assert!(text.len() > 13 * 1024 * 1024);
        assert!(format!("{:?}", spec.containers).len() < 512);
    }

    #[rstest]
    #[case::within(MAX_KEPT_ANNOTATION_BYTES, true)]
    #[case::over(MAX_KEPT_ANNOTATION_BYTES + 1, false)]
    fn a_kept_value_past_the_bound_is_replaced_by_its_length(#[case] len: usize, #[case] whole: bool) {
        let value = "a".repeat(len);
        for key in Key::ALL.into_iter().filter(|k| *k != Key::Steered).map(Key::name) {
            let text = json!({"metadata": {"annotations": {key: value}}}).to_string();
            let a = serde_json::from_str::<WatchedPod>(&text).unwrap().annotations;
            let kept = [
                a.restore_from,
                a.skip_checks,
                a.steer,
                a.peer_restore_from,
                a.peer_container_map,
                a.peer_skip,
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>();
            let expected = if whole {
                Kept::Value(value.clone())
            } else {
                Kept::Oversized(len)
            };
            assert_eq!(kept, [expected], "{key}");
        }
    }

    #[rstest]
    #[case::escaped(
        r#"{"metadata": {"annotations": {"miggate.io/restore-from": "c\u006b"}}}"#,
        Some("ck")
    )]
    #[case::null_annotations(r#"{"metadata": {"annotations": null}}"#, None)]
    #[case::no_metadata(r#"{"spec": {"containers": null}}"#, None)]
    #[case::other_values_of_any_shape(
        r#"{"metadata": {"annotations": {"a": {"b": [1, null]}, "miggate.io/restore-from": "ck"}}}"#,
        Some("ck")
    )]
    fn the_wire_forms_read_as_k8s_openapi_reads_them(#[case] text: &str, #[case] restore_from: Option<&str>) {
        let pod: WatchedPod = serde_json::from_str(text).unwrap();
        assert_eq!(
            pod.annotations.restore_from.map(Kept::into_value).as_deref(),
            restore_from
        );
    }

    #[test]
    fn a_kept_value_that_is_not_a_string_is_an_error_as_for_k8s_openapi() {
        let text = r#"{"metadata": {"annotations": {"miggate.io/restore-from": 1}}}"#;
        assert!(serde_json::from_str::<WatchedPod>(text).is_err());
        assert!(serde_json::from_str::<Pod>(text).is_err());
    }

    #[test]
    fn the_marker_is_no_name_and_no_check() {
        let marker = Kept::Oversized(70_000).into_value();
        assert!(!marker.contains(',') && !marker.contains('='), "{marker}");
        assert!(miggate_compat::parse_skip(&marker).is_err());
        assert!(miggate_crds::peer::snapshot_name(&marker).is_err());
        assert!(!miggate_crds::peer::parses_as_bool(&marker));
        assert!(miggate_crds::peer::check_container_map(&marker).is_err());
    }

    #[test]
    fn it_is_a_pod_on_the_wire() {
        assert_eq!(
            WatchedPod::url_path(&(), Some("ml")),
            Pod::url_path(&(), Some("ml"))
        );
        assert_eq!(WatchedPod::api_version(&()), "v1");
    }

    /// The annotations as JSON object text, pairs in order (a key may repeat).
    fn annotations_text(pairs: &[(String, String)]) -> String {
        let members: Vec<String> = pairs
            .iter()
            .map(|(k, v)| format!("{}: {}", json!(k), json!(v)))
            .collect();
        format!("{{{}}}", members.join(", "))
    }

    /// The restore annotations of a pod carrying `pairs`, read by each reader: the review (in
    /// place, in one pass with a restore pod's spec, and through kube's types), and the pod
    /// watch, in that order, every value as text.
    fn read_by_each_reader(pairs: &[(String, String)]) -> Vec<RestoreAnnotations<String>> {
        let object = format!(
            r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "p", "namespace": "ml",
                "annotations": {}}}, "spec": {{"containers": [{{"name": "main"}}]}}}}"#,
            annotations_text(pairs)
        );
        let body = format!(
            r#"{{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {{
                "uid": "u", "kind": {{"group": "", "version": "v1", "kind": "Pod"}},
                "resource": {{"group": "", "version": "v1", "resource": "pods"}}, "namespace": "ml",
                "operation": "CREATE", "userInfo": {{}}, "object": {object}}}}}"#
        );
        let of_review = |r: miggate_admission::review::Review<'_>| {
            r.object.unwrap().meta.annotations.map(|t| t.to_string())
        };
        let kube: kube::core::admission::AdmissionReview<kube::core::DynamicObject> =
            serde_json::from_str(&body).unwrap();
        let request = kube.request.unwrap();
        vec![
            of_review(miggate_admission::review::parse(body.as_bytes()).unwrap()),
            of_review(miggate_admission::review::parse_restore(body.as_bytes()).unwrap()),
            of_review(miggate_admission::review::Review::from(&request)),
            serde_json::from_str::<WatchedPod>(&object)
                .unwrap()
                .annotations
                .map(Kept::into_value),
        ]
    }

    /// A binding is judged on what the pod watch kept, a creation on what the review read:
    /// each reader gives the same annotations, so the two judge one pod alike.
    #[test]
    fn the_review_and_the_pod_watch_read_the_same_annotations() {
        let pairs: Vec<(String, String)> = [
            ("nvidia.com/restore-from", "snap"),
            ("nvidia.com/restore-container-map", "main=engine-0"),
            ("nvidia.com/snapshot-skip-compat-check", "false"),
            ("miggate.io/skip-checks", "mount"),
            ("miggate.io/steer", "true"),
            ("miggate.io/steered", ""),
            ("tenant.example/other", "x"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let expected = RestoreAnnotations {
            restore_from: None,
            skip_checks: Some("mount".to_string()),
            steer: Some("true".to_string()),
            steered: true,
            peer_restore_from: Some("snap".to_string()),
            peer_container_map: Some("main=engine-0".to_string()),
            peer_skip: Some("false".to_string()),
        };
        for (reader, read) in ["parse", "parse_restore", "kube", "watch"]
            .into_iter()
            .zip(read_by_each_reader(&pairs))
        {
            assert_eq!(read, expected, "{reader}");
        }
    }

    proptest::proptest! {
        /// Any annotations, restore keys and near misses among others, some repeated, read
        /// alike by every reader.
        #[test]
        fn every_reader_reads_any_annotations_alike(
            pairs in proptest::collection::vec(
                (
                    proptest::sample::select(
                        Key::ALL
                            .into_iter()
                            .map(Key::name)
                            .chain([
                                "miggate.io/restore-from ",
                                "Miggate.io/restore-from",
                                "nvidia.com/restore-from-snapshot",
                                "miggate.io/device-map",
                                "a",
                            ])
                            .collect::<Vec<_>>(),
                    ),
                    "[ -~\u{e9}\u{1F600}\\\\\"]{0,12}",
                ),
                0..10,
            )
        ) {
            let pairs: Vec<(String, String)> =
                pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            let read = read_by_each_reader(&pairs);
            for other in &read[1..] {
                proptest::prop_assert_eq!(&read[0], other);
            }
        }
    }
}
