#![doc = include_str!("../README.md")]

mod build;
mod checks;
mod device;
mod device_kind;
mod device_map;
mod error;
pub mod escape;
mod field_path;
mod fields;
pub use fields::MAX_UNKNOWN_DEPTH;
mod manifest;
mod matching;
mod multiset;
mod no_device_map;
mod parse_words;
mod peer;
mod profile;
mod quantity;
mod ranking;
mod read;
mod report;
mod schema;
#[cfg(feature = "testing")]
pub mod testing;
mod text;
mod uuid;
mod validation;
mod vocab;
pub mod warning;

pub use build::{GpuBuilder, H100_NAME, ManifestBuilder, PodBuilder};
pub use checks::{
    DEFAULT_MIN_DRIVER, DEFAULT_MIN_KERNEL, DriverFloor, Options, Target, evaluate, evaluate_target,
    parse_min_driver, parse_min_kernel, parse_skip, reduce_digest,
};
pub use device::{DeviceKind, SliceShape};
pub use error::Error;
pub use field_path::{PathSegment, render_path};
pub use manifest::{
    API_VERSION, ApiVersion, CapturedBy, Device, Gpu, GpuManifest, Host, KIND, Kind, MigMode, MigStrategy,
    Nvidia, Pod, UnknownField, UnknownFields, UnknownMigStrategy,
};
pub use profile::MigProfile;
pub use quantity::Quantity;
pub use ranking::{NodeFit, rank_nodes, rank_nodes_listed};
pub use read::{
    MAX_MANIFEST_BYTES, MAX_YAML_DEPTH, from_slice, from_slice_with, from_snapshot_source, from_str,
    from_str_with, read_document,
};
pub use report::{CheckResult, Report, Text};
pub use schema::{manifest_body_schema, manifest_schema, structural_problems};
pub use text::{VersionText, kernel_major_minor, versions_equal};
pub use uuid::{DeviceUuid, GpuUuid, MAX_UUID_BYTES, UuidForm};
pub use validation::{FieldValidation, ReadOptions};
pub use vocab::{CheckName, Mode, Outcome, Scope, TargetScope};
pub use warning::Warning;
