//! miggate's admission webhook: refuses a GPU checkpoint restore at pod creation when the
//! checkpoint cannot run where the pod asks to run, before a node spends minutes in CRIU.
//!
//! A pod annotated `miggate.io/restore-from: <checkpoint>` is compared with that checkpoint's
//! manifest through `miggate-compat`'s checks: its restore container's limits, mounts, image
//! and GPU requests always; the node's inventory too once the pod names a node. A refusal names
//! every failing check with both values; unknown facts become warnings. Admission is the early
//! refusal: the node agent's exact check stays the final gate.
//!
//! A `pods/binding` of a restore pod (known from the pod cache: a Binding has no annotations)
//! gets the node checks in offer mode against the chosen node's inventory.
//!
//! Parts: [`decide`] (pure: a request and a store's [`lookup::Lookup`] in, a response out),
//! [`store`] (checkpoints and nodes from a directory, in memory, reloaded on change),
//! [`kube_store`] (watch caches over the API server; pods read through `watched_pod`, which
//! keeps only what a restore pod's binding reads), [`server`] (the routers), [`body`]
//! (reading a body under the deadline, a minimum rate and a memory budget), [`handshakes`]
//! (the places of connections in their TLS handshake), [`established`] (the caps on
//! established connections), [`connections`] (the handshake between the two), `http1` (hyper's connection builder with
//! its header-read timeout, a write timeout, the age bound and the stop), [`tls`] (rustls with
//! reloads), [`metrics`], and [`serve`], which runs them all.

pub mod allocation;
pub mod body;
mod cache_status;
pub mod cluster;
pub mod connections;
pub mod decide;
pub mod device_map;
mod error;
pub mod established;
pub mod freshness;
pub mod handshakes;
mod http1;
pub mod kube_store;
mod log_gate;
pub mod lookup;
pub mod metrics;
mod outcome;
mod patch;
mod pod;
mod refusal;
pub mod resolve;
mod resource;
pub mod restore_annotations;
pub mod review;
mod run;
pub mod server;
pub mod steer;
pub mod steer_claim;
pub mod store;
pub mod summary;
mod text;
pub mod tls;
mod watched_pod;

pub use error::{Error, TlsProblem};
pub use run::{Bound, Config, ManagedTls, StoreConfig, Tls, serve};
