//! The `admission.k8s.io/v1` AdmissionReview on the wire, read in place and written back.
//!
//! A decision reads a dozen fields of a review that carries the whole pod: kilobytes of spec,
//! managed fields and status. Decoding it into kube's `AdmissionReview<DynamicObject>` builds
//! a `serde_json::Value` of every one of them through serde's flatten buffer, and costs more
//! than deciding (`benches/decide.rs` measures both). Here the fields a decision reads are
//! borrowed from the body, and the object's `spec` and `target` stay raw JSON until a decision
//! reads them: a pod that restores nothing is never decoded past its annotations.
//!
//! The envelope is held to what kube's types require (`apiVersion`, `kind`, and a request's
//! `uid`, `kind`, `resource`, `operation` and `userInfo`), so a review kube would refuse is
//! refused here too, with serde's own words.

use std::collections::BTreeMap;
use std::fmt;

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use miggate_compat::escape::escape_within;
use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

pub use crate::pod::Spec as PodSpec;
use crate::restore_annotations::{ObjectAnnotations, RestoreAnnotations};
pub use crate::text::Text;

/// The only review version served: the API server sends what the registration names.
pub const API_VERSION: &str = "admission.k8s.io/v1";
/// The review's kind.
pub const KIND: &str = "AdmissionReview";

/// Why a body is not a review a decision can answer: the 400's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadReview {
    /// Not JSON, or not the shape of a review.
    #[error("malformed AdmissionReview JSON: {0}")]
    Malformed(String),
    /// Another version or kind.
    #[error("expected apiVersion admission.k8s.io/v1 kind AdmissionReview, got `{api_version}` `{kind}`")]
    Version {
        /// The `apiVersion` sent, escaped and bounded.
        api_version: String,
        /// The `kind` sent, escaped and bounded.
        kind: String,
    },
    /// A review without a request (a response sent back, say).
    #[error("AdmissionReview has no request")]
    NoRequest,
    /// A request whose uid is empty: its answer could not be matched to it.
    #[error("AdmissionReview request has no uid")]
    NoUid,
}

/// What the API server asks to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Operation {
    /// An object is created (a pod, a binding).
    Create,
    /// An object is replaced or patched.
    Update,
    /// An object is deleted.
    Delete,
    /// A connection (exec, attach, port-forward).
    Connect,
}

/// A request's kind: group, version and kind.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Gvk<'a> {
    /// The API group; empty for the core group.
    #[serde(borrow)]
    pub group: Text<'a>,
    /// The API version within the group (`v1` for a pod).
    #[serde(borrow)]
    pub version: Text<'a>,
    /// The kind's name; a pod's own request (no subresource) is `Pod` in the core group.
    #[serde(borrow)]
    pub kind: Text<'a>,
}

/// A request's resource: group, version and plural name.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Gvr<'a> {
    /// The API group; empty for the core group.
    #[serde(borrow)]
    pub group: Text<'a>,
    /// The API version within the group (`v1` for `pods`).
    #[serde(borrow)]
    pub version: Text<'a>,
    /// The plural resource name (`pods`, `bindings`).
    #[serde(borrow)]
    pub resource: Text<'a>,
}

/// A JSON value a decision may read later: raw text from a body, or a value already decoded
/// (a caller holding kube's types).
#[derive(Debug, Clone, Copy)]
pub enum Raw<'a> {
    /// Text borrowed from the body.
    Json(&'a RawValue),
    /// A decoded value.
    Value(&'a Value),
}

impl<'a> Raw<'a> {
    /// Decodes the value as `T`, borrowing strings from it where it can.
    pub fn decode<T: Deserialize<'a>>(self) -> Result<T, serde_json::Error> {
        match self {
            Raw::Json(raw) => serde_json::from_str(raw.get()),
            Raw::Value(value) => T::deserialize(value),
        }
    }
}

/// An object's `metadata.labels`, kept as they came: a decision decodes them only for a
/// restore pod under `--restore-pod-selector`, and every other pod pays no more than skipping
/// them.
#[derive(Debug, Clone, Copy)]
pub enum Labels<'a> {
    /// Text borrowed from the body.
    Json(&'a RawValue),
    /// The map of a request decoded with kube's types.
    Map(&'a BTreeMap<String, String>),
}

impl Labels<'_> {
    /// The labels as a map; an error where they are not a map of strings.
    pub fn decode(self) -> Result<BTreeMap<String, String>, serde_json::Error> {
        match self {
            Labels::Json(raw) => serde_json::from_str::<Option<BTreeMap<String, String>>>(raw.get())
                .map(Option::unwrap_or_default),
            Labels::Map(map) => Ok(map.clone()),
        }
    }
}

/// Equal when they say the same: raw text by its text, a map by its entries.
impl PartialEq for Labels<'_> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Labels::Json(a), Labels::Json(b)) => a.get() == b.get(),
            (Labels::Map(a), Labels::Map(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Labels<'_> {}

/// What a decision reads of an object's metadata: its names, its labels (raw), the restore
/// annotations and whether it carries the device map.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meta<'a> {
    /// `metadata.name`.
    pub name: Option<Text<'a>>,
    /// `metadata.namespace`.
    pub namespace: Option<Text<'a>>,
    /// `metadata.generateName`, for messages about a pod not yet named.
    pub generate_name: Option<Text<'a>>,
    /// `metadata.uid`: on a Binding, the UID of the pod it places (the scheduler sets it, and
    /// the API server binds only a pod of that UID).
    pub uid: Option<Text<'a>>,
    /// miggate's and the Go peer's restore annotations, borrowed from the body.
    pub annotations: RestoreAnnotations<Text<'a>>,
    /// Whether `metadata.annotations` is present (a JSON patch adds to it or creates it).
    pub has_annotations: bool,
    /// Whether the annotations carry `miggate.io/device-map` (on a Binding: written by the
    /// binder, which only miggate may do).
    pub has_device_map: bool,
    /// `metadata.labels`, when present and not null, undecoded.
    pub labels: Option<Labels<'a>>,
}

impl Meta<'_> {
    /// Whether the object names a checkpoint to restore: miggate's `GpuCheckpoint` or the
    /// peer's `PodSnapshot`.
    pub fn is_restore(&self) -> bool {
        self.annotations.is_restore()
    }
}

/// An object's `spec`: raw JSON, or a restore pod's spec already decoded.
#[derive(Debug, Clone)]
pub enum Spec<'a> {
    /// Kept raw, decoded by whoever reads it ([`parse`] keeps every spec raw).
    Raw(Raw<'a>),
    /// A restore pod's spec, decoded in the same pass as the review ([`parse_restore`]).
    Pod(Box<PodSpec<'a>>),
}

/// The request's object: its metadata decoded, its `spec` (a pod) and `target` (a binding)
/// kept raw, or a restore pod's spec decoded ([`Spec`]).
#[derive(Debug, Clone)]
pub struct Object<'a> {
    /// Names and annotations.
    pub meta: Meta<'a>,
    /// `spec`, when present and not null.
    pub spec: Option<Spec<'a>>,
    /// `target`, when present and not null.
    pub target: Option<Raw<'a>>,
}

/// The request of a review, as a decision reads it.
#[derive(Debug, Clone)]
pub struct Review<'a> {
    /// Echoed in the answer.
    pub uid: Text<'a>,
    /// The object's kind.
    pub kind: Gvk<'a>,
    /// The resource the request is for.
    pub resource: Gvr<'a>,
    /// `binding` for `pods/binding`.
    pub sub_resource: Option<Text<'a>>,
    /// The object's name (empty when the server does not know it yet).
    pub name: Text<'a>,
    /// The namespace the request is in.
    pub namespace: Option<Text<'a>>,
    /// What is asked.
    pub operation: Operation,
    /// Whether the request is a dry run (nothing persists).
    pub dry_run: bool,
    /// Who makes the request (`userInfo.username`): for a binding, the scheduler that places
    /// the pod.
    pub username: Text<'a>,
    /// The object created or updated.
    pub object: Option<Object<'a>>,
}

impl<'a> Review<'a> {
    /// Whether the request is on the `binding` subresource.
    pub fn is_binding(&self) -> bool {
        self.sub_resource.as_deref() == Some("binding")
    }

    /// Whether the request creates a binding: `pods/binding`, or the legacy `bindings`
    /// resource, which places a pod just as `pods/binding` does.
    pub fn is_binding_create(&self) -> bool {
        let core = self.resource.group.is_empty();
        self.operation == Operation::Create
            && core
            && ((self.resource.resource == "pods" && self.is_binding())
                || (self.resource.resource == "bindings" && self.sub_resource.is_none()))
    }

    /// The pod a binding CREATE places, as `(namespace, name)`: the request's name, or the
    /// Binding's own. `None` for any other request, or a binding that names neither.
    pub fn bound_pod(&self) -> Option<(&str, &str)> {
        if !self.is_binding_create() {
            return None;
        }
        let namespace = self.namespace.as_deref()?;
        let name = Some(&*self.name)
            .filter(|n| !n.is_empty())
            .or_else(|| self.object.as_ref().and_then(|o| o.meta.name.as_deref()))?;
        Some((namespace, name))
    }

    /// The UID of the pod a binding CREATE places (the Binding's `metadata.uid`), when it
    /// carries one: the pod cache must hold that very pod, not an earlier one of its name.
    pub fn bound_uid(&self) -> Option<&str> {
        self.object
            .as_ref()
            .and_then(|o| o.meta.uid.as_deref())
            .filter(|u| !u.is_empty())
    }

    /// The node a Binding names (`target.name`), when it names one.
    pub fn binding_node(&self) -> Option<Text<'a>> {
        #[derive(Deserialize)]
        struct Target<'a> {
            #[serde(borrow, default)]
            name: Text<'a>,
        }
        self.object
            .as_ref()
            .and_then(|o| o.target)
            .and_then(|t| t.decode::<Target<'a>>().ok())
            .map(|t| t.name)
            .filter(|n| !n.is_empty())
    }

    /// The allowed answer to this request, before a decision adds to it.
    pub fn allowed(&self) -> AdmissionResponse {
        // kube's response is not constructible field by field (non-exhaustive): an invalid
        // one, turned into the allowed answer to this uid.
        let mut response = AdmissionResponse::invalid("");
        response.uid = self.uid.to_string();
        response.allowed = true;
        response.result = kube::core::response::Status::default();
        response
    }
}

/// Reads a review from a request body: the envelope checked, the request borrowed, the
/// object's `spec` and `target` kept raw.
pub fn parse(body: &[u8]) -> Result<Review<'_>, BadReview> {
    // One UTF-8 check of the whole body is cheaper than one per string; a body that is not
    // UTF-8 goes to serde's byte reader, which says where, exactly as before.
    let envelope: Result<Envelope<'_, RawObject<'_>>, _> = match std::str::from_utf8(body) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(body),
    };
    review(envelope.map_err(|e| malformed(body, &e))?)
}

/// [`parse`] for a decision: a restore pod's spec (an object of kind `v1` `Pod` whose
/// metadata, read before its spec as the API server writes them, carries
/// `miggate.io/restore-from`) is decoded in the same pass, not scanned once raw and read again.
/// Any review this reader refuses, a spec it cannot decode included, is read again by
/// [`parse`], so every answer and every message is the one [`parse`] leads to.
pub fn parse_restore(body: &[u8]) -> Result<Review<'_>, BadReview> {
    // Only a UTF-8 body: serde's byte reader checks the UTF-8 of a string it keeps raw, not of
    // one it skips, so on other bodies the two readers could part.
    let Ok(text) = std::str::from_utf8(body) else {
        return parse(body);
    };
    match serde_json::from_str::<Envelope<'_, PodObject<'_>>>(text).map(review) {
        Ok(Ok(review)) => Ok(review),
        _ => parse(body),
    }
}

/// The review an envelope carries, or why it cannot be answered.
fn review<'a, O: Into<Object<'a>>>(envelope: Envelope<'a, O>) -> Result<Review<'a>, BadReview> {
    if envelope.api_version != API_VERSION || envelope.kind != KIND {
        return Err(BadReview::Version {
            api_version: escape_within(&envelope.api_version, 128).into_owned(),
            kind: escape_within(&envelope.kind, 128).into_owned(),
        });
    }
    let Some(request) = envelope.request else {
        return Err(BadReview::NoRequest);
    };
    if request.uid.is_empty() {
        return Err(BadReview::NoUid);
    }
    Ok(Review {
        uid: request.uid,
        kind: request.kind,
        resource: request.resource,
        sub_resource: request.sub_resource,
        name: request.name,
        namespace: request.namespace,
        operation: request.operation,
        dry_run: request.dry_run,
        username: request.user_info.username,
        object: request.object.map(Into::into),
    })
}

/// The words for a body the reader refused: kube's decoder's, as the webhook has always
/// answered (serde says "parsing a value" where kube buffers and "an object" here), computed
/// only on this cold path; the reader's own where kube's decoder would take the body.
fn malformed(body: &[u8], ours: &serde_json::Error) -> BadReview {
    let text = match serde_json::from_slice::<kube::core::admission::AdmissionReview<DynamicObject>>(body) {
        Err(kube) => kube.to_string(),
        Ok(_) => ours.to_string(),
    };
    BadReview::Malformed(escape_within(&text, 1024).into_owned())
}

impl<'a> From<&'a AdmissionRequest<DynamicObject>> for Review<'a> {
    /// A request a caller already decoded with kube's types, read the same way.
    fn from(r: &'a AdmissionRequest<DynamicObject>) -> Self {
        let b = |s: &'a String| Text::borrowed(s);
        let gvk = |g: &'a str, v: &'a str, k: &'a str| Gvk {
            group: Text::borrowed(g),
            version: Text::borrowed(v),
            kind: Text::borrowed(k),
        };
        let present =
            |o: &'a DynamicObject, key: &str| o.data.get(key).filter(|v| !v.is_null()).map(Raw::Value);
        Review {
            uid: b(&r.uid),
            kind: gvk(&r.kind.group, &r.kind.version, &r.kind.kind),
            resource: Gvr {
                group: b(&r.resource.group),
                version: b(&r.resource.version),
                resource: b(&r.resource.resource),
            },
            sub_resource: r.sub_resource.as_ref().map(b),
            name: b(&r.name),
            namespace: r.namespace.as_ref().map(b),
            operation: match r.operation {
                kube::core::admission::Operation::Create => Operation::Create,
                kube::core::admission::Operation::Update => Operation::Update,
                kube::core::admission::Operation::Delete => Operation::Delete,
                kube::core::admission::Operation::Connect => Operation::Connect,
            },
            dry_run: r.dry_run,
            username: r.user_info.username.as_ref().map(b).unwrap_or_default(),
            object: r.object.as_ref().map(|o| Object {
                meta: Meta {
                    name: o.metadata.name.as_ref().map(b),
                    namespace: o.metadata.namespace.as_ref().map(b),
                    generate_name: o.metadata.generate_name.as_ref().map(b),
                    uid: o.metadata.uid.as_ref().map(b),
                    annotations: RestoreAnnotations::from_pairs(
                        o.metadata
                            .annotations
                            .iter()
                            .flatten()
                            .map(|(k, v)| (k.as_str(), b(v))),
                    ),
                    has_annotations: o.metadata.annotations.is_some(),
                    has_device_map: o
                        .metadata
                        .annotations
                        .as_ref()
                        .is_some_and(|a| a.contains_key(miggate_wire::annotations::DEVICE_MAP)),
                    labels: o.metadata.labels.as_ref().map(Labels::Map),
                },
                spec: present(o, "spec").map(Spec::Raw),
                target: present(o, "target"),
            }),
        }
    }
}

#[derive(Deserialize)]
#[serde(bound(deserialize = "O: Deserialize<'de>"))]
struct Envelope<'a, O> {
    #[serde(borrow, rename = "apiVersion")]
    api_version: Text<'a>,
    #[serde(borrow)]
    kind: Text<'a>,
    #[serde(borrow, default)]
    request: Option<Request<'a, O>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "O: Deserialize<'de>"))]
struct Request<'a, O> {
    #[serde(borrow)]
    uid: Text<'a>,
    #[serde(borrow)]
    kind: Gvk<'a>,
    #[serde(borrow)]
    resource: Gvr<'a>,
    #[serde(borrow, default)]
    sub_resource: Option<Text<'a>>,
    #[serde(borrow, default)]
    name: Text<'a>,
    #[serde(borrow, default)]
    namespace: Option<Text<'a>>,
    operation: Operation,
    #[serde(borrow)]
    user_info: UserInfo<'a>,
    #[serde(default)]
    object: Option<O>,
    #[serde(default)]
    dry_run: bool,
}

/// `userInfo`: required by kube's types and by the API; only the user name is read.
#[derive(Deserialize)]
struct UserInfo<'a> {
    #[serde(borrow, default)]
    username: Text<'a>,
}

#[derive(Deserialize)]
struct RawObject<'a> {
    #[serde(borrow, default)]
    metadata: Option<Meta<'a>>,
    #[serde(borrow, default)]
    spec: Option<&'a RawValue>,
    #[serde(borrow, default)]
    target: Option<&'a RawValue>,
}

impl<'a> From<RawObject<'a>> for Object<'a> {
    fn from(o: RawObject<'a>) -> Self {
        Object {
            meta: o.metadata.unwrap_or_default(),
            spec: o.spec.map(|raw| Spec::Raw(Raw::Json(raw))),
            target: o.target.map(Raw::Json),
        }
    }
}

/// An object read for a decision: as [`RawObject`], but the spec of a restore pod decoded in
/// place. Fields it does not know are skipped, as [`RawObject`] skips them; a field it reads
/// given twice is refused, as serde refuses it there.
struct PodObject<'a>(Object<'a>);

impl<'a> From<PodObject<'a>> for Object<'a> {
    fn from(o: PodObject<'a>) -> Self {
        o.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for PodObject<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct PodObjectVisitor;
        impl<'de> Visitor<'de> for PodObjectVisitor {
            type Value = PodObject<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("struct RawObject")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PodObject<'de>, A::Error> {
                let (mut api_version, mut kind) = (None::<Text<'de>>, None::<Text<'de>>);
                let mut metadata: Option<Option<Meta<'de>>> = None;
                let mut spec: Option<Option<Spec<'de>>> = None;
                let mut target: Option<Option<&'de RawValue>> = None;
                while let Some(key) = map.next_key::<Text<'de>>()? {
                    match &*key {
                        "apiVersion" => api_version = map.next_value()?,
                        "kind" => kind = map.next_value()?,
                        "metadata" if metadata.is_some() => {
                            return Err(de::Error::duplicate_field("metadata"));
                        }
                        "metadata" => metadata = Some(map.next_value()?),
                        "spec" if spec.is_some() => return Err(de::Error::duplicate_field("spec")),
                        "spec" => {
                            let restore_pod = api_version.as_deref() == Some("v1")
                                && kind.as_deref() == Some("Pod")
                                && metadata
                                    .as_ref()
                                    .is_some_and(|m| m.as_ref().is_some_and(Meta::is_restore));
                            spec = Some(if restore_pod {
                                map.next_value::<Option<PodSpec<'de>>>()?
                                    .map(|s| Spec::Pod(Box::new(s)))
                            } else {
                                map.next_value::<Option<&'de RawValue>>()?
                                    .map(|raw| Spec::Raw(Raw::Json(raw)))
                            });
                        }
                        "target" if target.is_some() => return Err(de::Error::duplicate_field("target")),
                        "target" => target = Some(map.next_value()?),
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(PodObject(Object {
                    meta: metadata.flatten().unwrap_or_default(),
                    spec: spec.flatten(),
                    target: target.flatten().map(Raw::Json),
                }))
            }
        }
        d.deserialize_map(PodObjectVisitor)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Meta<'a> {
    /// Only the names and the restore annotations are decoded, the labels kept raw, and the
    /// device map's presence noted; every other field and annotation is skipped unread.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct MetaVisitor;
        impl<'de> Visitor<'de> for MetaVisitor {
            type Value = Meta<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("object metadata")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Meta<'de>, A::Error> {
                let mut meta = Meta::default();
                while let Some(key) = map.next_key::<Text<'de>>()? {
                    match &*key {
                        "name" => meta.name = map.next_value()?,
                        "namespace" => meta.namespace = map.next_value()?,
                        "generateName" => meta.generate_name = map.next_value()?,
                        "uid" => meta.uid = map.next_value()?,
                        "annotations" => {
                            if let Some(a) = map.next_value::<Option<ObjectAnnotations<Text<'de>>>>()? {
                                meta.annotations = a.restore;
                                meta.has_device_map = a.device_map;
                                meta.has_annotations = true;
                            }
                        }
                        "labels" => {
                            meta.labels = map.next_value::<Option<&'de RawValue>>()?.map(Labels::Json)
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(meta)
            }
        }
        d.deserialize_map(MetaVisitor)
    }
}

/// `base` (an allowed answer) carrying the JSON patch `ops` (built with `crate::patch`),
/// with the audit annotation `key` saying what the patch does; the error says why the patch
/// cannot be written.
pub fn patched(
    base: &AdmissionResponse,
    ops: Vec<json_patch::PatchOperation>,
    key: &str,
    what: String,
) -> Result<AdmissionResponse, kube::core::admission::SerializePatchError> {
    let mut response = base.clone().with_patch(json_patch::Patch(ops))?;
    response.audit_annotations.insert(key.to_string(), what);
    Ok(response)
}

/// Writes the answer to a review: kube's `AdmissionReview` JSON for the response, field for
/// field, without building kube's review around it.
pub fn render(response: &AdmissionResponse) -> Result<Vec<u8>, serde_json::Error> {
    #[derive(Serialize)]
    struct Out<'a> {
        #[serde(rename = "apiVersion")]
        api_version: &'static str,
        kind: &'static str,
        response: &'a AdmissionResponse,
    }
    let out_value = Out {
        api_version: API_VERSION,
        kind: KIND,
        response,
    };
    let mut out = Vec::with_capacity(256);
    if response.audit_annotations.len() > 1 {
        // kube keeps the audit annotations in a HashMap, whose order is its hasher's: sorted,
        // the same answer is the same bytes (logs, snapshots). Only restore decisions carry
        // several; every other answer is written directly.
        let mut value = serde_json::to_value(&out_value)?;
        if let Some(annotations) = value
            .pointer_mut("/response/auditAnnotations")
            .and_then(serde_json::Value::as_object_mut)
        {
            annotations.sort_keys();
        }
        serde_json::to_writer(&mut out, &value)?;
    } else {
        serde_json::to_writer(&mut out, &out_value)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_review_is_read_in_place_and_its_object_kept_raw() {
        let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
            "uid":"u1","kind":{"group":"","version":"v1","kind":"Pod"},
            "resource":{"group":"","version":"v1","resource":"pods"},"namespace":"ml",
            "operation":"CREATE","userInfo":{},"object":{"metadata":{"name":"p","labels":{"app":"x"},"annotations":{
            "a":"b","miggate.io/restore-from":"first","miggate.io/restore-from":"ck\u0031",
            "miggate.io/steer":"true","miggate.io/steered":"node affinity"}},
            "spec":{"containers":[]},"status":{"phase":"Pending"}}}}"#;
        let r = parse(body).unwrap();
        assert_eq!(r.uid, "u1");
        assert_eq!(r.resource.resource, "pods");
        assert_eq!(r.operation, Operation::Create);
        let o = r.object.unwrap();
        assert_eq!(o.meta.name.as_deref(), Some("p"));
        // The last of a repeated key, unescaped.
        assert_eq!(o.meta.annotations.restore_from.as_deref(), Some("ck1"));
        assert_eq!(o.meta.annotations.steer.as_deref(), Some("true"));
        assert!(o.meta.annotations.steered && o.meta.has_annotations);
        assert!(!o.meta.has_device_map);
        assert_eq!(o.meta.annotations.skip_checks, None);
        let labels = o.meta.labels.map(|l| l.decode().unwrap());
        assert_eq!(labels, Some([("app".to_string(), "x".to_string())].into()));
        assert!(matches!(o.spec, Some(Spec::Raw(Raw::Json(raw))) if raw.get() == r#"{"containers":[]}"#));
        assert!(o.target.is_none());
    }

    /// A Binding's device map is noted, and its labels kept raw, by both readers.
    #[test]
    fn the_device_map_and_the_labels_are_read_by_both_readers() {
        let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
            "uid":"u1","kind":{"group":"","version":"v1","kind":"Binding"},
            "resource":{"group":"","version":"v1","resource":"pods"},"subResource":"binding",
            "namespace":"ml","name":"p","operation":"CREATE","userInfo":{"username":"s"},
            "object":{"apiVersion":"v1","kind":"Binding","metadata":{"name":"p","labels":null,
            "annotations":{"miggate.io/device-map":"GPU-a=GPU-b"}},"target":{"name":"n"}}}}"#;
        for r in [parse(body).unwrap(), parse_restore(body).unwrap()] {
            let meta = &r.object.as_ref().unwrap().meta;
            assert!(meta.has_device_map && meta.has_annotations);
            assert_eq!(meta.labels, None);
        }
    }

    #[test]
    fn what_kube_refuses_is_refused() {
        let missing_user = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
            "uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},
            "resource":{"group":"","version":"v1","resource":"pods"},"operation":"CREATE"}}"#;
        let e = parse(missing_user).unwrap_err().to_string();
        assert!(e.contains("missing field `userInfo`"), "{e}");
        let bad_op = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
            "uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},
            "resource":{"group":"","version":"v1","resource":"pods"},"operation":"MOVE","userInfo":{}}}"#;
        assert!(
            parse(bad_op)
                .unwrap_err()
                .to_string()
                .contains("unknown variant `MOVE`")
        );
        let no_uid = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
            "uid":"","kind":{"group":"","version":"v1","kind":"Pod"},
            "resource":{"group":"","version":"v1","resource":"pods"},"operation":"CREATE","userInfo":{}}}"#;
        assert_eq!(parse(no_uid).unwrap_err(), BadReview::NoUid);
        assert_eq!(
            parse(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#).unwrap_err(),
            BadReview::NoRequest
        );
    }
}
