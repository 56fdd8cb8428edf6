//! miggate's admission decision, without I/O: an admission review in, a response out.
//!
//! A pod annotated `miggate.io/restore-from: <checkpoint>` (or NVIDIA Snapshot's
//! `nvidia.com/restore-from`) is compared with that checkpoint's manifest through
//! `miggate-compat`'s checks: its restore container's limits, mounts, image and GPU requests
//! always; the node's inventory too once the pod names a node. A refusal names every failing
//! check with both values; unknown facts become warnings. A `pods/binding` of a restore pod gets
//! the node checks in offer mode against the chosen node's inventory.
//!
//! Everything a decision reads comes through one trait, [`lookup::Lookup`]; the file store and
//! the watch caches (`miggate-store`) answer it, and the server (`miggate-webhook`) carries the
//! bytes. This crate has no async runtime, HTTP, TLS or Kubernetes client, so a decision is a
//! function call, tested and benchmarked as one.
//!
//! Parts: [`review`] (the request, read once), [`restore_annotations`] (the one reader of the
//! restore annotations), [`decide`] (the verdict), [`selector`] (`--restore-pod-selector`,
//! read once), [`resolve`] (what a pod restores from),
//! [`allocation`] (what DRA allocated), [`steer`] and [`steer_claim`] (steering a pod to nodes
//! that fit), [`device_map`] and [`summary`] (the annotations written at binding).

pub mod allocation;
pub mod decide;
pub mod device_map;
pub mod lookup;
pub mod outcome;
mod patch;
mod pod;
mod refusal;
pub mod resolve;
pub mod restore_annotations;
pub mod review;
pub mod selector;
pub mod steer;
pub mod steer_claim;
pub mod summary;
mod text;
