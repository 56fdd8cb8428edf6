//! miggate's core: the GPU manifest model and the named restore-compatibility checks.
//!
//! A GPU checkpoint restored onto a different GPU shape fails late, inside CRIU or the CUDA
//! runtime, with an error that names neither side. This crate compares what a checkpoint was
//! captured on with a restore target before any expensive work starts, and says which property
//! differs with both values.
//!
//! ```
//! use miggate_compat::{evaluate, from_str, Options};
//!
//! let source = from_str(r#"{"apiVersion": "miggate.io/v1alpha1", "kind": "GpuManifest",
//!     "nvidia": {"devices": [{"uuid": "MIG-1", "productName": "NVIDIA H100 80GB HBM3", "migProfile": "3g.40gb"}]}}"#)?;
//! let target = from_str(r#"{"apiVersion": "miggate.io/v1alpha1", "kind": "GpuManifest",
//!     "nvidia": {"devices": [{"uuid": "GPU-2", "productName": "NVIDIA H100 80GB HBM3"}]}}"#)?;
//! let report = evaluate(&source, &target, &Options::default());
//! assert!(!report.compatible);
//! assert_eq!(report.reason, "mig-partitioning: source slice x1, target whole x1");
//! # Ok::<(), miggate_compat::Error>(())
//! ```
//!
//! No I/O, no clock and no Kubernetes here: the crate is pure so every caller (the CLI, the
//! admission webhook, a node agent, a unit test) reaches the same verdict on the same facts.

mod checks;
mod device;
mod device_map;
mod error;
pub mod escape;
mod fields;
pub use fields::MAX_UNKNOWN_DEPTH;
mod manifest;
mod matching;
mod multiset;
mod peer;
mod placement;
mod profile;
mod quantity;
mod read;
mod report;
mod schema;
mod stored;
mod text;
mod uuid;
mod vocab;

pub use checks::{
    DEFAULT_MIN_DRIVER, DEFAULT_MIN_KERNEL, Options, Target, evaluate, evaluate_target, parse_min_kernel,
    parse_skip, reduce_digest,
};
pub use device::{DeviceKind, SliceShape};
pub use error::Error;
pub use manifest::{
    API_VERSION, ApiVersion, CapturedBy, Device, Gpu, GpuManifest, Host, KIND, Kind, MigMode, MigStrategy,
    Nvidia, PathSegment, Pod, UnknownField, UnknownFields, render_path,
};
pub use placement::{Placement, place};
pub use profile::MigProfile;
pub use quantity::Quantity;
pub use read::{MAX_MANIFEST_BYTES, MAX_YAML_DEPTH, from_slice, from_str};
pub use report::{CheckResult, Report, Text};
pub use schema::{manifest_body_schema, manifest_schema, structural_problems};
pub use stored::{Stored, StoredKind, read_stored};
pub use text::{VersionText, kernel_major_minor, versions_equal};
pub use uuid::{DeviceUuid, GpuUuid, MAX_UUID_BYTES, UuidForm};
pub use vocab::{CheckName, Mode, Outcome, Scope, TargetScope};
