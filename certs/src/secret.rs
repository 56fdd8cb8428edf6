//! The Secret's reads and writes. A write is an update at the version read (replicas racing
//! end with one CA, the losers reading again), or a create when there was nothing. A Secret
//! that cannot be updated in place (`immutable`, a type other than `Opaque`, an update
//! refused as invalid) is deleted at the UID and version read, so a newer one is never lost,
//! and created again: `Opaque`, never immutable, with its labels and annotations.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams, Preconditions};

use crate::error::Error;
use crate::material::{Contents, PREVIOUS_CA_UNTIL, Raw, WRITTEN_BY};

/// The only type miggate writes: a Secret of another type either carries rules of its own
/// (`kubernetes.io/tls` wants exactly a serving pair, a service account token's is filled in
/// by a controller) or means someone else's use, and a type never changes on update.
const OPAQUE: &str = "Opaque";

/// Labels and annotations of the Secret, as last read. A Secret deleted (to rotate, or
/// because it could not be written) comes back with them: whoever installed it (Helm's release
/// annotations, an owner's labels) still owns it, so `helm uninstall` removes it too.
#[derive(Debug, Clone, Default)]
pub(crate) struct KeptMeta {
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
}

impl KeptMeta {
    pub(crate) fn of(secret: &Secret) -> Self {
        KeptMeta {
            labels: secret.metadata.labels.clone().unwrap_or_default(),
            annotations: secret.metadata.annotations.clone().unwrap_or_default(),
        }
    }
}

/// Why the Secret cannot be updated in place: the `reason` label of its recreation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unwritable {
    /// `immutable: true`: neither its data nor the flag can change.
    Immutable,
    /// A type other than `Opaque` (named), which an update cannot change.
    WrongType(String),
    /// The API server refused the update as invalid (`422`), in its words.
    Invalid(String),
}

impl Unwritable {
    /// Why `secret`, as read, cannot be updated in place; `None` when it can.
    pub(crate) fn of(secret: &Secret) -> Option<Unwritable> {
        if secret.immutable == Some(true) {
            return Some(Unwritable::Immutable);
        }
        match secret.type_.as_deref() {
            // The API server defaults an unset type to Opaque.
            None | Some(OPAQUE) => None,
            Some(other) => Some(Unwritable::WrongType(other.to_string())),
        }
    }

    /// The label value.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            Unwritable::Immutable => "immutable",
            Unwritable::WrongType(_) => "wrong-type",
            Unwritable::Invalid(_) => "invalid",
        }
    }

    /// What is wrong, after "the Secret".
    pub(crate) fn words(&self) -> String {
        match self {
            Unwritable::Immutable => "is immutable".to_string(),
            Unwritable::WrongType(t) => format!("has type {t:?}, not {OPAQUE}"),
            Unwritable::Invalid(why) => format!("refused an update as invalid ({why})"),
        }
    }
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Whether the contents were written; `false`: another writer changed the Secret since it
    /// was read (read again).
    pub(crate) written: bool,
    /// Set when the Secret was deleted to be created again, and why.
    pub(crate) recreated: Option<Unwritable>,
}

/// The Secret, by namespace and name.
pub(crate) struct SecretStore {
    api: Api<Secret>,
    namespace: String,
    name: String,
}

impl SecretStore {
    pub(crate) fn new(client: kube::Client, namespace: &str, name: &str) -> Self {
        SecretStore {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }

    pub(crate) fn api(&self) -> Api<Secret> {
        self.api.clone()
    }

    fn what(&self, verb: &str) -> String {
        format!("{verb} Secret {}/{}", self.namespace, self.name)
    }

    /// The Secret, or `None` when there is none.
    pub(crate) async fn read(&self) -> Result<Option<Secret>, Error> {
        self.api.get_opt(&self.name).await.map_err(|source| Error::Api {
            what: self.what("read"),
            source: Box::new(source),
        })
    }

    /// Writes `contents` over `read`: an update at the version read, a create when there was
    /// nothing (with `kept`'s labels and annotations), or a delete and a create when `read`
    /// cannot be updated in place.
    pub(crate) async fn write(
        &self,
        read: Option<Secret>,
        contents: &Contents,
        kept: &KeptMeta,
    ) -> Result<Outcome, Error> {
        let Some(secret) = read else {
            let written = self.create(self.fresh(kept), contents).await?;
            return Ok(Outcome {
                written,
                recreated: None,
            });
        };
        if let Some(why) = Unwritable::of(&secret) {
            return self.recreate(secret, contents, why).await;
        }
        let mut updated = secret.clone();
        fill(&mut updated, contents);
        match self
            .api
            .replace(&self.name, &PostParams::default(), &updated)
            .await
        {
            Ok(_) => Ok(Outcome {
                written: true,
                recreated: None,
            }),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Outcome {
                written: false,
                recreated: None,
            }),
            // Immutable since it was read, or refused by a rule of the cluster's own.
            Err(kube::Error::Api(s)) if s.code == 422 => {
                self.recreate(secret, contents, Unwritable::Invalid(s.message))
                    .await
            }
            Err(source) => Err(Error::Api {
                what: self.what("update"),
                source: Box::new(source),
            }),
        }
    }

    /// Deletes `secret` at the UID and version read (a newer one, written meanwhile, is left
    /// alone: the delete is refused and the round reads again), then creates it again.
    async fn recreate(&self, secret: Secret, contents: &Contents, why: Unwritable) -> Result<Outcome, Error> {
        let at = DeleteParams {
            preconditions: Some(Preconditions {
                uid: secret.metadata.uid.clone(),
                resource_version: secret.metadata.resource_version.clone(),
            }),
            ..DeleteParams::default()
        };
        let recreated = match self.api.delete(&self.name, &at).await {
            Ok(_) => Some(why),
            // Gone already: create it, nothing was deleted here.
            Err(kube::Error::Api(s)) if s.code == 404 => None,
            Err(kube::Error::Api(s)) if s.code == 409 => {
                return Ok(Outcome {
                    written: false,
                    recreated: None,
                });
            }
            Err(source) => {
                return Err(Error::Unwritable {
                    secret: format!("{}/{}", self.namespace, self.name),
                    name: self.name.clone(),
                    unwritable: why.words(),
                    source: Box::new(source),
                });
            }
        };
        let written = self.create(self.fresh(&KeptMeta::of(&secret)), contents).await?;
        Ok(Outcome { written, recreated })
    }

    /// Creates `secret` holding `contents`. `Ok(false)`: another writer created it first.
    async fn create(&self, mut secret: Secret, contents: &Contents) -> Result<bool, Error> {
        fill(&mut secret, contents);
        match self.api.create(&PostParams::default(), &secret).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(source) => Err(Error::Api {
                what: self.what("create"),
                source: Box::new(source),
            }),
        }
    }

    /// A new Secret with `kept`'s labels and annotations: `Opaque`, never immutable, whatever
    /// the one it replaces was.
    fn fresh(&self, kept: &KeptMeta) -> Secret {
        let mut labels = kept.labels.clone();
        labels.insert("app.kubernetes.io/part-of".to_string(), "miggate".to_string());
        Secret {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: Some(labels),
                annotations: Some(kept.annotations.clone()),
                ..ObjectMeta::default()
            },
            type_: Some(OPAQUE.into()),
            ..Secret::default()
        }
    }
}

/// Puts `contents` into `secret`: every data key (nothing else kept), the previous CA's
/// until, and who wrote it.
fn fill(secret: &mut Secret, contents: &Contents) {
    secret.data = Some(
        contents
            .data()
            .into_iter()
            .map(|(k, v)| (k, ByteString(v)))
            .collect(),
    );
    secret.string_data = None;
    let annotations = secret.metadata.annotations.get_or_insert_with(BTreeMap::new);
    match contents.previous_until_text() {
        Some(until) => annotations.insert(PREVIOUS_CA_UNTIL.to_string(), until),
        None => annotations.remove(PREVIOUS_CA_UNTIL),
    };
    annotations.insert(WRITTEN_BY.to_string(), contents.written_by.clone());
}

/// The Secret's data and annotations, as [`judge`](crate::material::judge) reads them.
pub(crate) fn raw_of(secret: &Secret) -> Raw {
    let annotation = |key: &str| {
        secret
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .cloned()
    };
    Raw {
        data: secret
            .data
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.0.clone()))
            .collect(),
        previous_until: annotation(PREVIOUS_CA_UNTIL),
        written_by: annotation(WRITTEN_BY),
    }
}
