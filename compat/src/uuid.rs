//! GPU and MIG UUIDs in the forms nvidia-smi prints, checked where they are read.
//!
//! A UUID ends up in cuda-checkpoint's `--device-map` (`src=dst,…`), so a UUID that could carry
//! a `,` or `=` would smuggle a pair of its own into the map. Only three forms are read: a whole
//! GPU's `GPU-<id>`, a MIG slice's `MIG-<id>`, and the legacy `MIG-GPU-<id>/<gi>/<ci>` of drivers
//! before R470, where `<id>` is ASCII letters, digits and `-`. Anything else is an error when a
//! manifest is read or a capture is parsed, so it never reaches a check or a map.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::Error;
use crate::escape::escape;

/// The longest UUID read; real ones are 40 bytes (legacy MIG ones about 50).
pub const MAX_UUID_BYTES: usize = 128;

/// A whole GPU's UUID, `GPU-<id>`: what a slice names as its parent.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GpuUuid(Box<str>);

/// Which of the printed forms a [`DeviceUuid`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UuidForm {
    /// `GPU-<id>`: a whole GPU.
    Gpu,
    /// `MIG-<id>`: a MIG slice (R470 and later).
    Mig,
    /// `MIG-GPU-<id>/<gi>/<ci>`: a MIG slice named by its parent and instance ids (before R470);
    /// cuda-checkpoint does not accept it.
    LegacyMig {
        /// `<gi>`: unique on its parent GPU only, so the parent's id is needed to name the slice.
        gpu_instance: u32,
        /// `<ci>`: unique within its GPU instance only.
        compute_instance: u32,
    },
}

/// A device's UUID in one of the forms nvidia-smi prints.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeviceUuid {
    text: Box<str>,
    form: UuidForm,
}

fn bad(text: &str, why: &'static str) -> Error {
    Error::InvalidUuid {
        uuid: escape(text).into_owned(),
        why,
    }
}

/// Checks the `<id>` after a prefix.
fn check_id<'a>(whole: &str, id: &'a str) -> Result<&'a str, Error> {
    if id.is_empty() {
        return Err(bad(whole, "nothing follows the prefix"));
    }
    if !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return Err(bad(
            whole,
            "only ASCII letters, digits and `-` may follow the prefix",
        ));
    }
    Ok(id)
}

fn check_len(text: &str) -> Result<(), Error> {
    if text.len() > MAX_UUID_BYTES {
        return Err(bad(text, "it is longer than any GPU or MIG UUID"));
    }
    Ok(())
}

impl GpuUuid {
    /// The UUID as nvidia-smi prints it (`GPU-` and the id): the form device maps take.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for GpuUuid {
    type Err = Error;
    fn from_str(text: &str) -> Result<Self, Error> {
        check_len(text)?;
        let id = text
            .strip_prefix("GPU-")
            .ok_or_else(|| bad(text, "a GPU UUID starts with `GPU-`"))?;
        check_id(text, id)?;
        Ok(GpuUuid(text.into()))
    }
}

impl DeviceUuid {
    /// The UUID as it was read, in whichever [`UuidForm`] nvidia-smi printed it.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Which form it is.
    pub fn form(&self) -> UuidForm {
        self.form
    }

    /// Whether it names a MIG slice (either MIG form).
    pub fn is_mig(&self) -> bool {
        !matches!(self.form, UuidForm::Gpu)
    }

    /// The parent GPU's UUID text and the GPU instance id, for a legacy MIG UUID.
    pub fn legacy_gpu_instance(&self) -> Option<(&str, u32)> {
        match self.form {
            UuidForm::LegacyMig { gpu_instance, .. } => {
                let parent = self.text.strip_prefix("MIG-")?.split('/').next()?;
                Some((parent, gpu_instance))
            }
            _ => None,
        }
    }

    /// The UUID as cuda-checkpoint takes it in a device map; `None` for the legacy form.
    pub fn mappable(&self) -> Option<&str> {
        (!matches!(self.form, UuidForm::LegacyMig { .. })).then_some(&self.text)
    }
}

impl FromStr for DeviceUuid {
    type Err = Error;
    fn from_str(text: &str) -> Result<Self, Error> {
        check_len(text)?;
        let form = if let Some(id) = text.strip_prefix("GPU-") {
            check_id(text, id)?;
            UuidForm::Gpu
        } else if let Some(rest) = text.strip_prefix("MIG-GPU-")
            && rest.contains('/')
        {
            let mut parts = rest.split('/');
            let (Some(id), Some(gi), Some(ci), None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err(bad(text, "a legacy MIG UUID is `MIG-GPU-<id>/<gi>/<ci>`"));
            };
            check_id(text, id)?;
            let number = |s: &str| {
                s.bytes()
                    .all(|b| b.is_ascii_digit())
                    .then(|| s.parse::<u32>().ok())
                    .flatten()
            };
            let (Some(gpu_instance), Some(compute_instance)) = (number(gi), number(ci)) else {
                return Err(bad(
                    text,
                    "a legacy MIG UUID ends in `/<gi>/<ci>`, two instance ids",
                ));
            };
            UuidForm::LegacyMig {
                gpu_instance,
                compute_instance,
            }
        } else if let Some(id) = text.strip_prefix("MIG-") {
            check_id(text, id)?;
            UuidForm::Mig
        } else {
            return Err(bad(text, "a device UUID starts with `GPU-` or `MIG-`"));
        };
        Ok(DeviceUuid {
            text: text.into(),
            form,
        })
    }
}

macro_rules! text_serde {
    ($ty:ident, $expecting:literal, $pattern:literal) => {
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::ops::Deref for $ty {
            type Target = str;
            fn deref(&self) -> &str {
                self.as_str()
            }
        }

        impl PartialEq<str> for $ty {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $ty {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl AsRef<str> for $ty {
            fn as_ref(&self) -> &str {
                self.as_str()
            }
        }

        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl Visitor<'_> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$ty, E> {
                        v.parse().map_err(E::custom)
                    }
                }
                d.deserialize_str(V)
            }
        }

        impl JsonSchema for $ty {
            fn schema_name() -> Cow<'static, str> {
                stringify!($ty).into()
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!({
                    "type": "string",
                    "maxLength": MAX_UUID_BYTES,
                    "pattern": $pattern,
                    "description": $expecting,
                })
            }
        }
    };
}

text_serde!(
    GpuUuid,
    "a GPU UUID as nvidia-smi prints it (`GPU-<id>`)",
    "^GPU-[A-Za-z0-9-]+$"
);
text_serde!(
    DeviceUuid,
    "a device UUID as nvidia-smi prints it (`GPU-<id>`, `MIG-<id>` or `MIG-GPU-<id>/<gi>/<ci>`)",
    "^(GPU-[A-Za-z0-9-]+|MIG-[A-Za-z0-9-]+|MIG-GPU-[A-Za-z0-9-]+/[0-9]+/[0-9]+)$"
);

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("GPU-c08d91cb-e324-655c-71ba-7570956445bc", UuidForm::Gpu)]
    #[case("MIG-c788539f-c1ea-5a36-8b4d-9b07d024b1bb", UuidForm::Mig)]
    #[case("GPU-1", UuidForm::Gpu)]
    #[case(
        "MIG-GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f/7/0",
        UuidForm::LegacyMig { gpu_instance: 7, compute_instance: 0 }
    )]
    // A MIG id that happens to start with `GPU-` but has no instance ids is the modern form.
    #[case("MIG-GPU-abc", UuidForm::Mig)]
    fn printed_forms_read(#[case] text: &str, #[case] form: UuidForm) {
        let u: DeviceUuid = text.parse().unwrap();
        assert_eq!(u.form(), form);
        assert_eq!(u.as_str(), text);
    }

    #[rstest]
    #[case("GPU-2,GPU-9=GPU-7", "only ASCII letters")]
    #[case("GPU-", "nothing follows")]
    #[case("GPU-a\0b", "only ASCII letters")]
    #[case("GPU-a\u{fffd}", "only ASCII letters")]
    #[case(" GPU-1", "starts with")]
    #[case("0000:18:00.0", "starts with")]
    #[case("MIG-GPU-x/a/0", "two instance ids")]
    #[case("MIG-GPU-x/1/2/3", "legacy MIG UUID is")]
    #[case("MIG-GPU-x/99999999999/0", "two instance ids")]
    #[case("MIG-GPU-x,y/1/0", "only ASCII letters")]
    fn other_text_is_refused(#[case] text: &str, #[case] why: &str) {
        let err = text.parse::<DeviceUuid>().unwrap_err().to_string();
        assert!(err.contains(why), "{err}");
        assert!(!err.contains('\0'), "the message escapes the text: {err:?}");
    }

    #[test]
    fn length_is_bounded_and_parents_are_gpus() {
        let long = format!("GPU-{}", "a".repeat(200));
        assert!(long.parse::<DeviceUuid>().is_err());
        assert!("MIG-1".parse::<GpuUuid>().is_err());
        assert_eq!("GPU-1".parse::<GpuUuid>().unwrap().as_str(), "GPU-1");
    }

    #[test]
    fn legacy_ids_name_their_parent_and_are_not_mappable() {
        let u: DeviceUuid = "MIG-GPU-5c89852c/7/0".parse().unwrap();
        assert_eq!(u.legacy_gpu_instance(), Some(("GPU-5c89852c", 7)));
        assert_eq!(u.mappable(), None);
        assert_eq!("MIG-1".parse::<DeviceUuid>().unwrap().mappable(), Some("MIG-1"));
    }

    #[test]
    fn serde_reads_and_checks() {
        let u: DeviceUuid = serde_json::from_str("\"MIG-1\"").unwrap();
        assert_eq!(serde_json::to_string(&u).unwrap(), "\"MIG-1\"");
        let err = serde_json::from_str::<DeviceUuid>("\"GPU-1=GPU-2\"").unwrap_err();
        assert!(err.to_string().contains("only ASCII letters"), "{err}");
    }
}
