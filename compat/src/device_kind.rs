//! A device's kind, a leaf: the manifest records which kinds a source could not count, and the
//! device module tells a device's kind from its fields.

/// Whether a device is a whole GPU, a MIG slice, or cannot be told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeviceKind {
    /// A whole GPU: a `GPU-` UUID and no MIG fields.
    Whole,
    /// A MIG slice: a `MIG-` UUID (either form), a profile, or a parent.
    Slice,
    /// Neither could be established: no UUID and no MIG fields.
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
