//! What kind of device a manifest entry is, and the class it is paired and counted by.
//!
//! nvidia-smi names a MIG slice after its parent card, so the product name alone cannot tell a
//! whole H100 from a `1g.10gb` of one. The kind comes from the UUID form and the MIG fields.

use crate::manifest::Device;
use crate::profile::MigProfile;

/// Whether a device is a whole GPU, a MIG slice, or cannot be told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeviceKind {
    /// A whole GPU: a `GPU-` UUID and no MIG fields.
    Whole,
    /// A MIG slice: a `MIG-` UUID (either form), a profile, or a parent.
    Slice,
    /// Neither could be established (no UUID, or one of another form).
    Unknown,
}

impl DeviceKind {
    /// The name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceKind::Whole => "whole",
            DeviceKind::Slice => "slice",
            DeviceKind::Unknown => "unknown",
        }
    }
}

/// A slice's shape: the profile when it was recorded. Absent never means whole GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SliceShape<'a> {
    /// The recorded profile.
    Known(&'a MigProfile),
    /// A slice recorded without its profile (an older capture).
    Unknown,
}

/// The parts of a legacy `MIG-GPU-<parent>/<gi>/<ci>` UUID (drivers before R470).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyMigUuid<'a> {
    /// The parent GPU's `GPU-…` UUID.
    pub parent: &'a str,
    /// The GPU instance id.
    pub gpu_instance: u32,
    /// The compute instance id.
    pub compute_instance: u32,
}

/// Splits a legacy MIG UUID; `None` for any other form.
pub fn parse_legacy_mig_uuid(uuid: &str) -> Option<LegacyMigUuid<'_>> {
    let rest = uuid.strip_prefix("MIG-")?;
    if !rest.starts_with("GPU-") {
        return None;
    }
    let mut parts = rest.rsplitn(3, '/');
    let ci = parts.next()?.parse().ok()?;
    let gi = parts.next()?.parse().ok()?;
    let parent = parts.next()?;
    Some(LegacyMigUuid {
        parent,
        gpu_instance: gi,
        compute_instance: ci,
    })
}

impl Device {
    /// The device's kind, as the manifest contract defines it.
    pub fn kind(&self) -> DeviceKind {
        let uuid = self.uuid.as_deref().map(str::trim).unwrap_or("");
        if uuid.starts_with("MIG-") || self.mig_profile.is_some() || self.parent_uuid.is_some() {
            DeviceKind::Slice
        } else if uuid.starts_with("GPU-") {
            DeviceKind::Whole
        } else {
            DeviceKind::Unknown
        }
    }

    /// A slice's shape; `None` when the device is not a slice.
    pub fn slice_shape(&self) -> Option<SliceShape<'_>> {
        let shape = match &self.mig_profile {
            Some(p) => SliceShape::Known(p),
            None => SliceShape::Unknown,
        };
        (self.kind() == DeviceKind::Slice).then_some(shape)
    }

    /// The product name, trimmed, or `None` when unknown or blank.
    pub fn model(&self) -> Option<&str> {
        self.product_name
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
    }

    /// The GPU instance a slice lives in, as (parent GPU, GPU instance id), when both are known.
    /// Compute instances of one GPU instance share its memory, so they are compared together.
    pub fn gpu_instance(&self) -> Option<(&str, u32)> {
        let uuid = self.uuid.as_deref().unwrap_or("");
        if let Some(legacy) = parse_legacy_mig_uuid(uuid) {
            return Some((legacy.parent, legacy.gpu_instance));
        }
        Some((self.parent_uuid.as_deref()?, self.gpu_instance_id?))
    }

    /// Whether the UUID is one cuda-checkpoint can be given in a device map.
    pub fn mappable_uuid(&self) -> Option<&str> {
        let uuid = self.uuid.as_deref()?.trim();
        let ok =
            (uuid.starts_with("GPU-") || uuid.starts_with("MIG-")) && parse_legacy_mig_uuid(uuid).is_none();
        ok.then_some(uuid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn dev(uuid: Option<&str>, profile: Option<&str>, parent: Option<&str>) -> Device {
        Device {
            uuid: uuid.map(String::from),
            mig_profile: profile.map(|p| p.parse().unwrap()),
            parent_uuid: parent.map(String::from),
            ..Device::default()
        }
    }

    #[rstest]
    #[case(dev(Some("GPU-1"), None, None), DeviceKind::Whole)]
    #[case(
        dev(Some("MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde"), None, None),
        DeviceKind::Slice
    )]
    #[case(
        dev(Some("MIG-GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f/7/0"), None, None),
        DeviceKind::Slice
    )]
    #[case(dev(Some("GPU-1"), Some("1g.10gb"), None), DeviceKind::Slice)]
    #[case(dev(Some("GPU-1"), None, Some("GPU-0")), DeviceKind::Slice)]
    #[case(dev(None, Some("3g.40gb"), None), DeviceKind::Slice)]
    #[case(dev(None, None, None), DeviceKind::Unknown)]
    #[case(dev(Some("0000:18:00.0"), None, None), DeviceKind::Unknown)]
    fn kinds_follow_the_contract(#[case] d: Device, #[case] want: DeviceKind) {
        assert_eq!(d.kind(), want);
    }

    #[test]
    fn a_slice_without_profile_is_unknown_shape_not_whole() {
        let d = dev(Some("MIG-abc"), None, None);
        assert_eq!(d.slice_shape(), Some(SliceShape::Unknown));
        assert_eq!(dev(Some("GPU-1"), None, None).slice_shape(), None);
    }

    #[test]
    fn legacy_uuids_name_parent_and_instances() {
        let l = parse_legacy_mig_uuid("MIG-GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f/7/0").unwrap();
        assert_eq!(l.parent, "GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f");
        assert_eq!((l.gpu_instance, l.compute_instance), (7, 0));
        assert!(parse_legacy_mig_uuid("MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde").is_none());
        assert!(parse_legacy_mig_uuid("MIG-GPU-x/a/0").is_none());
        let d = dev(
            Some("MIG-GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f/7/0"),
            None,
            None,
        );
        assert_eq!(
            d.gpu_instance(),
            Some(("GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f", 7))
        );
        assert_eq!(d.mappable_uuid(), None);
    }
}
