//! Every warning this crate writes, as one enum: the words live in [`Warning`]'s `Display`, and
//! the readers and checks name what they saw, kept typed until the warning is shown or written.
//!
//! A warning is written as its words wherever it leaves the program: in a manifest's and a
//! report's `warnings` (JSON, YAML, `-o json`), in the webhook's answers, on a terminal. Read
//! back from a file, it is its words again ([`Warning::Recorded`]): the on-disk manifest and the
//! report carry text, a contract that typing the warnings here does not change.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::escape::escape;
use crate::field_path::{PathSegment, render_path};
use crate::profile::MigProfile;

pub use crate::no_device_map::{NoDeviceMap, TooVariedToPair};

/// One warning of a manifest or a report.
///
/// Two warnings are equal when they say the same words, whatever their variant: a typed warning
/// and the same words read back from a file ([`Warning::Recorded`]) are the same warning, as
/// they were when warnings were text. A warning also equals the text it says (`w == "…"`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Warning {
    /// A warning as a file or a resource recorded it: a manifest's `warnings` read from YAML or
    /// JSON (a checkpoint's manifest, a `GpuNode`'s `spec.manifest`), or a report's read back.
    /// Those documents carry words, not variants, and a manifest may have been written by
    /// another program (an older miggate, a checkpoint agent of someone else's): the words are
    /// kept as they are. Outside text: escape it before a terminal shows it (a report does).
    Recorded(String),
    /// A warning a program above this crate adds, in its own words: `miggate-capture`'s
    /// warnings in the manifest it writes (its typed warnings are not a type this crate can
    /// name), `miggate check`'s notes on a node's inventory.
    Added(String),

    /// The document was the Go peer's checkpoint `manifest.yaml`, translated.
    PeerManifest,
    /// The peer's `k8s.imageId` holds no content digest, so it was kept as is.
    PeerImageIdWithoutDigest {
        /// The image id, as the peer recorded it.
        image_id: String,
    },
    /// The peer's `cudaRestore.sourceGpuUuids`: devices with a UUID and nothing else.
    PeerGpuUuidsOnly,
    /// The document was the peer's `PodSnapshotContent` `status.source` (`node`, `pod`,
    /// `devices`), translated.
    PeerSource,
    /// The peer's `status.source` records a pod but no mounts.
    PeerSourceWithoutMounts,
    /// Another vendor's block under the peer's `status.source.devices`, not read.
    PeerOtherVendorDevices {
        /// The block's key, as the peer wrote it.
        vendor: String,
    },
    /// The peer's `status.source` lists devices without UUIDs.
    PeerDevicesWithoutUuids,
    /// The document was the peer's vendor-keyed `status.source` (`type`, `nvidia`), translated.
    PeerHardwareSource,
    /// The peer's vendor-keyed `status.source` names a vendor other than NVIDIA.
    PeerOtherVendorType {
        /// The `type`, as the peer wrote it.
        vendor: String,
    },
    /// The peer's vendor-keyed `status.source` lists GPUs by UUID only.
    PeerGpusByUuidOnly,
    /// Parts the peer's `status.source` does not record, unknown and not compared.
    PeerUnrecorded {
        /// The parts, in words (`node (kernel, architecture)`), in the order found; never empty.
        missing: Vec<&'static str>,
    },

    /// A field no type knows, kept (see [`GpuManifest::unknown_fields`](crate::GpuManifest::unknown_fields)).
    UnknownField {
        /// Its path from the document root.
        path: Vec<PathSegment>,
    },
    /// A field no type knows in a pod's facts given on their own (a restore pod's, with no
    /// manifest around them).
    UnknownPodField {
        /// The field's key under `pod`.
        key: String,
    },
    /// A device's MIG profile that nvidia-smi is not known to print: read as opaque, compared
    /// as text.
    UnrecognisedProfile {
        /// The device's place in `nvidia.devices`.
        index: usize,
        /// The profile.
        profile: MigProfile,
    },

    /// A warning one side's manifest carries ([`GpuManifest::warnings`](crate::GpuManifest::warnings)),
    /// as a report repeats it: after its side, escaped (a manifest's words may be anyone's).
    Carried {
        /// Whose manifest.
        side: Side,
        /// The manifest's warning.
        warning: Box<Warning>,
    },
    /// What reading one side's facts found ([`GpuManifest::read_warnings`](crate::GpuManifest::read_warnings),
    /// a lone pod's unknown fields), as a report says it: after its side. These warnings quote
    /// what they name escaped already.
    Read {
        /// Whose facts.
        side: Side,
        /// What was found.
        warning: Box<Warning>,
    },
    /// The target is compatible, but no device map can be built.
    NoDeviceMap(NoDeviceMap),
}

/// Which side of a comparison a warning is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The checkpoint's.
    Source,
    /// The restore target's.
    Target,
}

impl Side {
    /// `source` or `target`, as reports name the side.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Source => "source",
            Side::Target => "target",
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::Recorded(text) | Warning::Added(text) => f.write_str(text),
            Warning::PeerManifest => f.write_str(
                "read as the Go peer's checkpoint manifest.yaml and translated (createdAt → capturedAt, \
                 k8s.sourceNode → host.nodeName, k8s.image/imageId/cpuLimit/memoryLimit → pod.*, \
                 criuDump.extMnt → pod.mounts, cudaRestore → nvidia; see docs/interop.md); what it does \
                 not record (parents, instance ids, memory, MIG strategy, GPU requests) is unknown",
            ),
            Warning::PeerImageIdWithoutDigest { image_id } => write!(
                f,
                "k8s.imageId `{}` holds no content digest: kept as is, so image-digest cannot compare it",
                escape(image_id)
            ),
            Warning::PeerGpuUuidsOnly => f.write_str(
                "cudaRestore.sourceGpuUuids: written before the peer recorded sourceGpus, so each \
                 device has a UUID only (model and MIG profile unknown)",
            ),
            Warning::PeerSource => f.write_str(
                "read as the Go peer's PodSnapshotContent status.source and translated (node → host, \
                 pod.memory/cpu → pod.memoryLimit/cpuLimit, devices.nvidia.instances → nvidia.devices; \
                 see docs/interop.md)",
            ),
            Warning::PeerSourceWithoutMounts => {
                f.write_str("status.source records no mounts: pod.mounts is unknown")
            }
            Warning::PeerOtherVendorDevices { vendor } => write!(
                f,
                "devices.{}: not read (miggate compares NVIDIA devices only)",
                escape(vendor)
            ),
            Warning::PeerDevicesWithoutUuids => f.write_str(
                "status.source records no device UUIDs: devices are classed by migProfile (a device \
                 without one is of unknown kind), and no device map can be built from it",
            ),
            Warning::PeerHardwareSource => f.write_str(
                "read as the Go peer's PodSnapshotContent status.source (type/nvidia shape) and translated \
                 (nvidia.node → host.nodeName, nvidia.hardware.gpus → nvidia.devices; see docs/interop.md)",
            ),
            Warning::PeerOtherVendorType { vendor } => write!(
                f,
                "status.source type {}: not read (miggate compares NVIDIA devices only)",
                escape(vendor)
            ),
            Warning::PeerGpusByUuidOnly => f.write_str(
                "status.source records GPUs by UUID only: their model and MIG profile are unknown",
            ),
            Warning::PeerUnrecorded { missing } => {
                f.write_str("status.source records no ")?;
                for (i, part) in missing.iter().enumerate() {
                    f.write_str(if i == 0 { "" } else { ", no " })?;
                    f.write_str(part)?;
                }
                let they = if missing.len() == 1 { "it is" } else { "they are" };
                write!(f, ": {they} unknown, not compared")
            }
            Warning::UnknownField { path } => write!(
                f,
                "unknown field `{}` kept but not read by any check (a typo?)",
                escape(&render_path(path))
            ),
            Warning::UnknownPodField { key } => write!(
                f,
                "unknown field `pod.{}` kept but not read by any check (a typo?)",
                escape(key)
            ),
            Warning::UnrecognisedProfile { index, profile } => write!(
                f,
                "nvidia.devices[{index}].migProfile: `{}` is not a MIG profile nvidia-smi is known to print; compared as text",
                escape(profile.as_str())
            ),
            Warning::Carried { side, warning } => {
                write!(f, "{side}: {}", escape(&warning.to_string()))
            }
            Warning::Read { side, warning } => write!(f, "{side}: {warning}"),
            Warning::NoDeviceMap(why) => write!(f, "no device map: {why}"),
        }
    }
}

impl Warning {
    /// Whether the warning says `text`, word for word: rendered piece by piece against it, so
    /// nothing is allocated.
    pub fn says(&self, text: &str) -> bool {
        if let Warning::Recorded(own) | Warning::Added(own) = self {
            return own == text;
        }
        displays_as(self, text)
    }
}

/// Whether `shown` displays as `text`, word for word: rendered piece by piece against it, so
/// nothing is allocated. Every crate's typed warnings compare with their words through it.
pub fn displays_as(shown: &(impl fmt::Display + ?Sized), text: &str) -> bool {
    let mut rest = Against { rest: text };
    fmt::Write::write_fmt(&mut rest, format_args!("{shown}")).is_ok() && rest.rest.is_empty()
}

/// A [`fmt::Write`] that consumes the text it is compared with, and fails at the first piece
/// that differs.
struct Against<'a> {
    rest: &'a str,
}

impl fmt::Write for Against<'_> {
    fn write_str(&mut self, piece: &str) -> fmt::Result {
        match self.rest.strip_prefix(piece) {
            Some(rest) => {
                self.rest = rest;
                Ok(())
            }
            None => Err(fmt::Error),
        }
    }
}

impl PartialEq for Warning {
    fn eq(&self, other: &Warning) -> bool {
        match other {
            Warning::Recorded(text) | Warning::Added(text) => self.says(text),
            _ => self.says(&other.to_string()),
        }
    }
}

impl Eq for Warning {}

impl PartialEq<str> for Warning {
    fn eq(&self, other: &str) -> bool {
        self.says(other)
    }
}

impl PartialEq<&str> for Warning {
    fn eq(&self, other: &&str) -> bool {
        self.says(other)
    }
}

impl PartialEq<String> for Warning {
    fn eq(&self, other: &String) -> bool {
        self.says(other)
    }
}

impl From<NoDeviceMap> for Warning {
    fn from(why: NoDeviceMap) -> Self {
        Warning::NoDeviceMap(why)
    }
}

/// Written as its words: a manifest's and a report's `warnings` are lists of strings.
impl Serialize for Warning {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Read as its words, [`Warning::Recorded`]: a document carries no variants.
impl<'de> Deserialize<'de> for Warning {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Warning::Recorded)
    }
}

/// A string, as the manifest's and the report's schemas have always said.
impl schemars::JsonSchema for Warning {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        String::schema_name()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        String::json_schema(generator)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_equals_its_words_read_back() {
        let typed = Warning::PeerOtherVendorType { vendor: "Amd".into() };
        let words = "status.source type Amd: not read (miggate compares NVIDIA devices only)";
        assert_eq!(typed.to_string(), words);
        assert_eq!(typed, Warning::Recorded(words.into()));
        assert_eq!(Warning::Recorded(words.into()), typed);
        assert_eq!(typed, words);
        assert_ne!(typed, "status.source type Amd");
        assert_ne!(typed, format!("{words}!"));
        let back: Warning = serde_json::from_value(serde_json::to_value(&typed).unwrap()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), words);
        assert!(matches!(back, Warning::Recorded(_)));
    }

    #[test]
    fn the_unrecorded_parts_are_listed() {
        let one = Warning::PeerUnrecorded {
            missing: vec!["GPUs"],
        };
        assert_eq!(
            one.to_string(),
            "status.source records no GPUs: it is unknown, not compared"
        );
        let two = Warning::PeerUnrecorded {
            missing: vec!["pod (image, digest, limits)", "driver"],
        };
        assert_eq!(
            two.to_string(),
            "status.source records no pod (image, digest, limits), no driver: they are unknown, not compared"
        );
    }

    #[test]
    fn carried_warnings_are_escaped_and_read_ones_are_not_again() {
        let carried = Warning::Carried {
            side: Side::Source,
            warning: Box::new(Warning::Recorded("evil\u{1b}[2J".into())),
        };
        assert_eq!(carried.to_string(), "source: evil\\u{1b}[2J");
        let read = Warning::Read {
            side: Side::Target,
            warning: Box::new(Warning::UnknownPodField {
                key: "odd\nkey".into(),
            }),
        };
        assert_eq!(
            read.to_string(),
            "target: unknown field `pod.odd\\nkey` kept but not read by any check (a typo?)"
        );
    }
}
