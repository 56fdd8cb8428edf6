//! What kind of device a manifest entry is, and the class it is paired and counted by.
//!
//! nvidia-smi names a MIG slice after its parent card, so the product name alone cannot tell a
//! whole H100 from a `1g.10gb` of one. The kind comes from the UUID form and the MIG fields.

pub use crate::device_kind::DeviceKind;
use crate::manifest::Device;
use crate::profile::MigProfile;
use crate::uuid::DeviceUuid;

/// A slice's shape: the profile when it was recorded. Absent never means whole GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SliceShape<'a> {
    /// The profile the manifest records for the slice (`1g.10gb`, say).
    Known(&'a MigProfile),
    /// A slice recorded without its profile (an older capture).
    Unknown,
}

impl Device {
    /// The device's kind, as the manifest contract defines it.
    pub fn kind(&self) -> DeviceKind {
        let mig_uuid = self.uuid.as_ref().is_some_and(DeviceUuid::is_mig);
        if mig_uuid || self.mig_profile.is_some() || self.parent_uuid.is_some() {
            DeviceKind::Slice
        } else if self.uuid.is_some() {
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
        let name = self.product_name.as_deref()?;
        // Checks ask this of every device many times over; a name that starts and ends with a
        // printable ASCII byte (every name nvidia-smi prints) has nothing to trim, and any
        // Unicode white space would start or end with a byte of 0x80 or more.
        let clean = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_graphic());
        let bytes = name.as_bytes();
        let name = if clean(bytes.first()) && clean(bytes.last()) {
            name
        } else {
            name.trim()
        };
        (!name.is_empty()).then_some(name)
    }

    /// The GPU instance a slice lives in, as (parent GPU, GPU instance id), when both are known.
    /// Compute instances of one GPU instance share its memory, so they are compared together.
    pub fn gpu_instance(&self) -> Option<(&str, u32)> {
        if let Some(legacy) = self.uuid.as_ref().and_then(DeviceUuid::legacy_gpu_instance) {
            return Some(legacy);
        }
        Some((self.parent_uuid.as_ref()?.as_str(), self.gpu_instance_id?))
    }

    /// The UUID as cuda-checkpoint takes it in a device map; `None` without a UUID or with a
    /// legacy `MIG-GPU-…` one.
    pub fn mappable_uuid(&self) -> Option<&str> {
        self.uuid.as_ref()?.mappable()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn dev(uuid: Option<&str>, profile: Option<&str>, parent: Option<&str>) -> Device {
        Device {
            uuid: uuid.map(|u| u.parse().unwrap()),
            mig_profile: profile.map(|p| p.parse().unwrap()),
            parent_uuid: parent.map(|u| u.parse().unwrap()),
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
