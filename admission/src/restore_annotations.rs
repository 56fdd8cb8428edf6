//! The annotations a restore pod is read by, matched by key here and nowhere else: miggate's
//! (`miggate.io/restore-from`, `skip-checks`, `steer`, `steered`) and the Go peer's
//! (`nvidia.com/restore-from`, `restore-container-map`, `snapshot-skip-compat-check`).
//!
//! Three readers hold them: the review (a pod's CREATE, read in place from the body or through
//! kube's types), the pod watch (a pod as its cache keeps it) and the lookup (a restore pod a
//! binding reads). Each keeps the values in its own form (text borrowed from a body, a value
//! bounded by the watch, an owned string in the cache), so [`RestoreAnnotations`] is generic
//! over the value; which key fills which field is decided once, by [`Key::of`] and
//! [`RestoreAnnotations::slot`]. A binding reads what the watch kept, so the two readers
//! parting on a key would judge one pod two ways.
//!
//! The review also learns, in the same pass, whether an object carries
//! `miggate.io/device-map` ([`ObjectAnnotations`]): only miggate writes it into a Binding, so
//! the binding mutation removes one it finds there.

use std::fmt;
use std::marker::PhantomData;

use miggate_wire::annotations::DEVICE_MAP;
use miggate_wire::{annotations, peer};
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};

/// An annotation a restore is read by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// `miggate.io/restore-from`.
    RestoreFrom,
    /// `miggate.io/skip-checks`.
    SkipChecks,
    /// `miggate.io/steer`.
    Steer,
    /// `miggate.io/steered` (only its presence is read).
    Steered,
    /// `nvidia.com/restore-from`.
    PeerRestoreFrom,
    /// `nvidia.com/restore-container-map`.
    PeerContainerMap,
    /// `nvidia.com/snapshot-skip-compat-check`.
    PeerSkip,
}

impl Key {
    /// Every key, in the order of [`RestoreAnnotations`]' fields.
    pub const ALL: [Key; 7] = [
        Key::RestoreFrom,
        Key::SkipChecks,
        Key::Steer,
        Key::Steered,
        Key::PeerRestoreFrom,
        Key::PeerContainerMap,
        Key::PeerSkip,
    ];

    /// The annotation's name, as `miggate_wire` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Key::RestoreFrom => annotations::RESTORE_FROM,
            Key::SkipChecks => annotations::SKIP_CHECKS,
            Key::Steer => annotations::STEER,
            Key::Steered => annotations::STEERED,
            Key::PeerRestoreFrom => peer::RESTORE_FROM,
            Key::PeerContainerMap => peer::RESTORE_CONTAINER_MAP,
            Key::PeerSkip => peer::SKIP_COMPAT_CHECK,
        }
    }

    /// Which key an annotation's name is; `None` for any other annotation.
    pub fn of(name: &str) -> Option<Key> {
        Some(match name {
            annotations::RESTORE_FROM => Key::RestoreFrom,
            annotations::SKIP_CHECKS => Key::SkipChecks,
            annotations::STEER => Key::Steer,
            annotations::STEERED => Key::Steered,
            peer::RESTORE_FROM => Key::PeerRestoreFrom,
            peer::RESTORE_CONTAINER_MAP => Key::PeerContainerMap,
            peer::SKIP_COMPAT_CHECK => Key::PeerSkip,
            _ => return None,
        })
    }
}

/// A pod's restore annotations, each value of type `V` as its reader keeps it; every other
/// annotation is skipped unread. A key given twice keeps its last value, as a map would.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreAnnotations<V> {
    /// `miggate.io/restore-from`: the `GpuCheckpoint` the pod restores.
    pub restore_from: Option<V>,
    /// `miggate.io/skip-checks`: the checks it waives.
    pub skip_checks: Option<V>,
    /// `miggate.io/steer` (steering is asked with `"true"`).
    pub steer: Option<V>,
    /// Whether `miggate.io/steered` is present (the pod was steered already).
    pub steered: bool,
    /// `nvidia.com/restore-from`: the `PodSnapshot` the pod restores.
    pub peer_restore_from: Option<V>,
    /// `nvidia.com/restore-container-map`.
    pub peer_container_map: Option<V>,
    /// `nvidia.com/snapshot-skip-compat-check`.
    pub peer_skip: Option<V>,
}

impl<V> Default for RestoreAnnotations<V> {
    fn default() -> Self {
        RestoreAnnotations {
            restore_from: None,
            skip_checks: None,
            steer: None,
            steered: false,
            peer_restore_from: None,
            peer_container_map: None,
            peer_skip: None,
        }
    }
}

impl<V> RestoreAnnotations<V> {
    /// The field a key's value goes to; `None` for [`Key::Steered`], whose value is not read.
    pub fn slot(&mut self, key: Key) -> Option<&mut Option<V>> {
        Some(match key {
            Key::RestoreFrom => &mut self.restore_from,
            Key::SkipChecks => &mut self.skip_checks,
            Key::Steer => &mut self.steer,
            Key::Steered => return None,
            Key::PeerRestoreFrom => &mut self.peer_restore_from,
            Key::PeerContainerMap => &mut self.peer_container_map,
            Key::PeerSkip => &mut self.peer_skip,
        })
    }

    /// The restore annotations among `(name, value)` pairs (a pod's annotation map, say).
    pub fn from_pairs<'k>(pairs: impl IntoIterator<Item = (&'k str, V)>) -> Self {
        let mut out = RestoreAnnotations::default();
        for (name, value) in pairs {
            match Key::of(name) {
                Some(Key::Steered) => out.steered = true,
                Some(key) => {
                    if let Some(slot) = out.slot(key) {
                        *slot = Some(value);
                    }
                }
                None => {}
            }
        }
        out
    }

    /// Whether the pod names a checkpoint to restore: miggate's `GpuCheckpoint` or the peer's
    /// `PodSnapshot`.
    pub fn is_restore(&self) -> bool {
        self.restore_from.is_some() || self.peer_restore_from.is_some()
    }

    /// The same annotations, each value given by `f`.
    pub fn map<W>(self, mut f: impl FnMut(V) -> W) -> RestoreAnnotations<W> {
        RestoreAnnotations {
            restore_from: self.restore_from.map(&mut f),
            skip_checks: self.skip_checks.map(&mut f),
            steer: self.steer.map(&mut f),
            steered: self.steered,
            peer_restore_from: self.peer_restore_from.map(&mut f),
            peer_container_map: self.peer_container_map.map(&mut f),
            peer_skip: self.peer_skip.map(&mut f),
        }
    }

    /// The values borrowed as text.
    pub fn as_deref(&self) -> RestoreAnnotations<&str>
    where
        V: AsRef<str>,
    {
        RestoreAnnotations {
            restore_from: self.restore_from.as_ref().map(AsRef::as_ref),
            skip_checks: self.skip_checks.as_ref().map(AsRef::as_ref),
            steer: self.steer.as_ref().map(AsRef::as_ref),
            steered: self.steered,
            peer_restore_from: self.peer_restore_from.as_ref().map(AsRef::as_ref),
            peer_container_map: self.peer_container_map.as_ref().map(AsRef::as_ref),
            peer_skip: self.peer_skip.as_ref().map(AsRef::as_ref),
        }
    }
}

/// An object's annotations as the review reads them: the restore annotations, and whether
/// `miggate.io/device-map` is present (its value is never read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectAnnotations<V> {
    /// The restore annotations.
    pub restore: RestoreAnnotations<V>,
    /// Whether `miggate.io/device-map` is present.
    pub device_map: bool,
}

/// What an annotation's name is to a reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Name {
    /// A restore annotation.
    Restore(Key),
    /// `miggate.io/device-map`.
    DeviceMap,
    /// Any other.
    Other,
}

/// A key read in place (never allocated, escaped or not): serde hands it over borrowed, from
/// the input or its scratch buffer.
struct KeyOf(Name);

impl<'de> Deserialize<'de> for KeyOf {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = KeyOf;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an annotation name")
            }

            fn visit_str<E: de::Error>(self, name: &str) -> Result<KeyOf, E> {
                Ok(KeyOf(match Key::of(name) {
                    Some(key) => Name::Restore(key),
                    None if name == DEVICE_MAP => Name::DeviceMap,
                    None => Name::Other,
                }))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for RestoreAnnotations<V> {
    /// A map of annotations (or `null`, no annotations, as k8s-openapi reads it): a restore
    /// annotation's value is read as `V` (an error where it is not a string, as for
    /// k8s-openapi), `miggate.io/steered`'s and every other annotation's value is skipped,
    /// whatever its shape.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        ObjectAnnotations::deserialize(deserializer).map(|a| a.restore)
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for ObjectAnnotations<V> {
    /// As [`RestoreAnnotations`] reads them, noting `miggate.io/device-map` on the way.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MapVisitor<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for MapVisitor<V> {
            type Value = ObjectAnnotations<V>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of annotations")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = RestoreAnnotations::default();
                let mut device_map = false;
                while let Some(KeyOf(name)) = map.next_key::<KeyOf>()? {
                    let key = match name {
                        Name::Restore(key) => Some(key),
                        Name::DeviceMap | Name::Other => None,
                    };
                    match key.and_then(|k| out.slot(k)) {
                        Some(slot) => *slot = Some(map.next_value::<V>()?),
                        None => {
                            map.next_value::<IgnoredAny>()?;
                            out.steered |= key == Some(Key::Steered);
                            device_map |= name == Name::DeviceMap;
                        }
                    }
                }
                Ok(ObjectAnnotations {
                    restore: out,
                    device_map,
                })
            }

            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(ObjectAnnotations::default())
            }

            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(ObjectAnnotations::default())
            }

            fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
                deserializer.deserialize_map(self)
            }
        }
        deserializer.deserialize_option(MapVisitor(PhantomData))
    }
}

impl<V> Default for ObjectAnnotations<V> {
    fn default() -> Self {
        ObjectAnnotations {
            restore: RestoreAnnotations::default(),
            device_map: false,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_its_name_and_back() {
        for key in Key::ALL {
            assert_eq!(Key::of(key.name()), Some(key), "{}", key.name());
        }
        assert_eq!(Key::of("miggate.io/device-map"), None);
        assert_eq!(Key::of("nvidia.com/restore-from-snapshot"), None);
    }

    #[test]
    fn each_key_fills_its_own_field() {
        for key in Key::ALL {
            let a = RestoreAnnotations::from_pairs([(key.name(), key.name())]);
            let fields = [
                a.restore_from,
                a.skip_checks,
                a.steer,
                a.steered.then_some(annotations::STEERED),
                a.peer_restore_from,
                a.peer_container_map,
                a.peer_skip,
            ];
            let filled: Vec<_> = Key::ALL
                .into_iter()
                .zip(fields)
                .filter_map(|(k, v)| v.map(|_| k))
                .collect();
            assert_eq!(filled, [key]);
        }
    }

    #[test]
    fn null_a_map_and_a_repeated_key_read_as_a_map_would() {
        let none: RestoreAnnotations<String> = serde_json::from_str("null").unwrap();
        assert_eq!(none, RestoreAnnotations::default());
        let a: RestoreAnnotations<String> = serde_json::from_str(
            r#"{"miggate.io/restore-from": "a", "x": [1], "miggate.io/steered": {"y": null},
                "miggate.io/restore-from": "b\u0031"}"#,
        )
        .unwrap();
        assert_eq!(a.restore_from.as_deref(), Some("b1"));
        assert!(a.steered);
        assert!(serde_json::from_str::<RestoreAnnotations<String>>(r#"{"miggate.io/steer": 1}"#).is_err());
    }

    #[test]
    fn the_device_map_is_noted_whatever_its_value() {
        for (json, device_map) in [
            (
                r#"{"miggate.io/device-map": "a=b", "miggate.io/restore-from": "c"}"#,
                true,
            ),
            (r#"{"miggate.io/device-map": {"x": 1}}"#, true),
            (r#"{"miggate.io/device-map-x": "a=b"}"#, false),
            ("null", false),
        ] {
            let a: ObjectAnnotations<String> = serde_json::from_str(json).unwrap();
            assert_eq!(a.device_map, device_map, "{json}");
        }
        let a: ObjectAnnotations<String> =
            serde_json::from_str(r#"{"miggate.io/device-map": "a=b", "miggate.io/restore-from": "c"}"#)
                .unwrap();
        assert_eq!(a.restore.restore_from.as_deref(), Some("c"));
    }
}
