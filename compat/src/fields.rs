//! How every manifest mapping is deserialized, whichever deserializer reads it (the CLI's
//! reader, plain `serde_json::from_value`, kube): known keys into their fields, every other key
//! kept in the mapping's [`UnknownFields`], a repeated key an error.
//!
//! serde's derive drops unknown keys, so a typo such as `driverversion` would silently become
//! an unknown fact off the CLI path. These impls keep it, and it is reported and written back.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;

use crate::manifest::{
    API_VERSION, ApiVersion, CapturedBy, Device, Gpu, GpuManifest, Host, KIND, Kind, Nvidia, Pod,
};
use crate::validation::FieldValidation;

/// A mapping key, borrowed from the input where it can be.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// How deep a value under an unknown field may nest. Known fields nest at most five levels, so
/// a document stays within 5 + 32 levels: under YAML's and JSON's own limits (64 and 128), so
/// JSON and YAML accept the same documents and refuse deeper ones with the same message.
pub const MAX_UNKNOWN_DEPTH: usize = 32;

/// Reads the value of an unknown field, kept as JSON, at most `.0` levels deep.
struct Unknown(usize);

impl<'de> de::DeserializeSeed<'de> for Unknown {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl Unknown {
    /// One level further down, or the error that says the limit was reached.
    fn deeper<E: de::Error>(&self) -> Result<Unknown, E> {
        match self.0.checked_sub(1) {
            Some(left) => Ok(Unknown(left)),
            None => Err(E::custom(format_args!(
                "an unknown field's value nests deeper than {MAX_UNKNOWN_DEPTH} levels"
            ))),
        }
    }
}

impl<'de> Visitor<'de> for Unknown {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        de::DeserializeSeed::deserialize(self, d)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let inner = self.deeper()?;
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(Unknown(inner.0))? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let inner = self.deeper()?;
        let mut out = serde_json::Map::new();
        while let Some(Key(k)) = map.next_key()? {
            let v = map.next_value_seed(Unknown(inner.0))?;
            if out.insert(k.to_string(), v).is_some() {
                return Err(de::Error::custom(format_args!(
                    "duplicate field `{}`",
                    crate::escape::escape(&k)
                )));
            }
        }
        Ok(Value::Object(out))
    }
}

/// The `apiVersion`/`kind` pair a document carries around a manifest body.
#[derive(Default)]
pub(crate) struct Envelope {
    pub api_version: Option<ApiVersion>,
    pub kind: Option<Kind>,
}

impl Envelope {
    /// An error unless both halves were read (they are checked as they are read).
    pub fn require<E: de::Error>(&self) -> Result<(), E> {
        match (self.api_version, self.kind) {
            (Some(_), Some(_)) => Ok(()),
            (None, _) => Err(E::custom(format_args!(
                "missing field `apiVersion` (expected `{API_VERSION}`): this is not a miggate GpuManifest"
            ))),
            (_, None) => Err(E::custom(format_args!(
                "missing field `kind` (expected `{KIND}`): this is not a miggate GpuManifest"
            ))),
        }
    }
}

/// Generates `Deserialize` for a manifest mapping whose fields are listed with their keys.
/// Every field is optional (`Default`); `apiVersion` and `kind` are read into `envelope` when
/// one is given and are unknown fields otherwise.
macro_rules! mapping {
    ($ty:ident, $expecting:literal, { $($key:literal => $field:ident),* $(,)? }) => {
        impl $ty {
            fn read_map<'de, A: MapAccess<'de>>(
                mut map: A,
                mut envelope: Option<&mut Envelope>,
            ) -> Result<$ty, A::Error> {
                const KEYS: &[&str] = &[$($key),*];
                // The names a mapping holding the envelope knows: a suggestion may be either.
                const ENVELOPED: &[&str] = &[$($key,)* "apiVersion", "kind"];
                let mut out = $ty::default();
                let mut seen = [false; KEYS.len()];
                while let Some(Key(key)) = map.next_key()? {
                    let at = KEYS.iter().position(|k| *k == key);
                    if let Some(i) = at {
                        if std::mem::replace(&mut seen[i], true) {
                            return Err(de::Error::duplicate_field(KEYS[i]));
                        }
                    }
                    match (&*key, envelope.as_deref_mut()) {
                        $(($key, _) => out.$field = map.next_value()?,)*
                        ("apiVersion", Some(env)) => {
                            if env.api_version.replace(map.next_value()?).is_some() {
                                return Err(de::Error::duplicate_field("apiVersion"));
                            }
                        }
                        ("kind", Some(env)) => {
                            if env.kind.replace(map.next_value()?).is_some() {
                                return Err(de::Error::duplicate_field("kind"));
                            }
                        }
                        (_, envelope) => match crate::validation::current() {
                            FieldValidation::Strict => {
                                let known: &[&str] = if envelope.is_some() { ENVELOPED } else { KEYS };
                                crate::validation::refuse(&key, known);
                                return Err(de::Error::custom(format_args!(
                                    "unknown field `{}`",
                                    crate::escape::escape(&key)
                                )));
                            }
                            FieldValidation::Warn => {
                                let value = map.next_value_seed(Unknown(MAX_UNKNOWN_DEPTH))?;
                                out.unknown.insert(key.into_owned(), value)?;
                            }
                            // Read within the same depth bound as a kept one, then dropped.
                            FieldValidation::Ignore => {
                                map.next_value_seed(Unknown(MAX_UNKNOWN_DEPTH))?;
                            }
                        },
                    }
                }
                Ok(out)
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<$ty, A::Error> {
                        $ty::read(map)
                    }
                }
                d.deserialize_map(V)
            }
        }
    };
}

mapping!(GpuManifest, "a GpuManifest mapping", {
    "capturedAt" => captured_at,
    "capturedBy" => captured_by,
    "warnings" => warnings,
    "host" => host,
    "pod" => pod,
    "nvidia" => nvidia,
});
mapping!(CapturedBy, "a capturedBy mapping", {
    "tool" => tool,
    "version" => version,
    "backend" => backend,
});
mapping!(Host, "a host mapping", {
    "nodeName" => node_name,
    "kernelVersion" => kernel_version,
    "cpuArch" => cpu_arch,
});
mapping!(Pod, "a pod mapping", {
    "image" => image,
    "imageDigest" => image_digest,
    "cpuLimit" => cpu_limit,
    "memoryLimit" => memory_limit,
    "mounts" => mounts,
    "gpuRequests" => gpu_requests,
    "resourceClaims" => resource_claims,
});
mapping!(Nvidia, "an nvidia mapping", {
    "driverVersion" => driver_version,
    "cudaDriverVersion" => cuda_driver_version,
    "migStrategy" => mig_strategy,
    "gpus" => gpus,
    "devices" => devices,
});
mapping!(Gpu, "a GPU mapping", {
    "index" => index,
    "uuid" => uuid,
    "productName" => product_name,
    "pciBusId" => pci_bus_id,
    "memoryMiB" => memory_mib,
    "computeCapability" => compute_capability,
    "migMode" => mig_mode,
});
mapping!(Device, "a device mapping", {
    "uuid" => uuid,
    "parentUuid" => parent_uuid,
    "productName" => product_name,
    "migProfile" => mig_profile,
    "gpuInstanceId" => gpu_instance_id,
    "computeInstanceId" => compute_instance_id,
    "memoryMiB" => memory_mib,
});

macro_rules! plain_read {
    ($($ty:ident),*) => {$(
        impl $ty {
            fn read<'de, A: MapAccess<'de>>(map: A) -> Result<$ty, A::Error> {
                $ty::read_map(map, None)
            }
        }
    )*};
}
plain_read!(CapturedBy, Host, Pod, Nvidia, Gpu, Device);

impl GpuManifest {
    /// A body read on its own (a resource's `spec.manifest`): an envelope is not needed, and
    /// when one is there it must be miggate's.
    fn read<'de, A: MapAccess<'de>>(map: A) -> Result<GpuManifest, A::Error> {
        let mut envelope = Envelope::default();
        GpuManifest::read_map(map, Some(&mut envelope))
    }
}

/// A whole manifest document: the envelope is required.
pub(crate) struct Document(pub GpuManifest);

impl<'de> Deserialize<'de> for Document {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Document;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a GpuManifest (a mapping with apiVersion and kind)")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Document, A::Error> {
                let mut envelope = Envelope::default();
                let body = GpuManifest::read_map(map, Some(&mut envelope))?;
                envelope.require()?;
                Ok(Document(body))
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn plain_serde_keeps_unknown_fields_and_writes_them_back() {
        let value = serde_json::json!({
            "nvidia": {"driverversion": "580.82.07", "devices": [{"uuid": "GPU-1", "migprofile": "1g.10gb"}]},
            "extra": {"a": [1, 2]},
        });
        let m: GpuManifest = serde_json::from_value(value.clone()).unwrap();
        let paths: Vec<String> = m
            .unknown_fields()
            .iter()
            .map(|f| crate::render_path(&f.path))
            .collect();
        assert_eq!(
            paths,
            ["extra", "nvidia.driverversion", "nvidia.devices[0].migprofile"]
        );
        assert_eq!(serde_json::to_value(&m).unwrap(), value);
    }

    #[test]
    fn a_body_accepts_only_miggates_envelope() {
        let ok: GpuManifest =
            serde_json::from_str(r#"{"apiVersion": "miggate.io/v1alpha1", "kind": "GpuManifest"}"#).unwrap();
        assert!(ok.unknown_fields().is_empty());
        let err = serde_json::from_str::<GpuManifest>(r#"{"apiVersion": "v1", "kind": "Pod"}"#).unwrap_err();
        assert!(err.to_string().contains("not a miggate GpuManifest"), "{err}");
    }

    #[test]
    fn repeated_keys_are_errors_known_or_not() {
        for text in [
            r#"{"host": {}, "host": {}}"#,
            r#"{"odd": 1, "odd": 2}"#,
            r#"{"kind": "GpuManifest", "kind": "GpuManifest"}"#,
        ] {
            let err = serde_json::from_str::<GpuManifest>(text).unwrap_err();
            assert!(err.to_string().contains("duplicate field"), "{text}: {err}");
        }
    }
}
