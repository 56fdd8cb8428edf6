//! miggate's admission webhook: refuses a GPU checkpoint restore at pod creation when the
//! checkpoint cannot run where the pod asks to run, before a node spends minutes in CRIU.
//!
//! A pod annotated `miggate.io/restore-from: <checkpoint>` is compared with that checkpoint's
//! manifest through `miggate-compat`'s checks: its restore container's limits, mounts, image
//! and GPU requests always; the node's inventory too once the pod names a node. A refusal names
//! every failing check with both values; unknown facts become warnings. Admission is the early
//! refusal: the node agent's exact check stays the final gate.
//!
//! This crate is the server: it carries an admission review's bytes to `miggate-admission`'s
//! decision and the answer back, over TLS, under caps a flood cannot exhaust. What the decision
//! reads comes from a `miggate-store` store, which it opens from [`Config::store`].
//!
//! Parts: [`server`] (the routers), [`body`] (reading a body under the deadline, a minimum
//! rate and a memory budget), [`handshakes`] (the places of connections in their TLS
//! handshake), [`established`] (the caps on established connections), [`connections`] (the
//! handshake between the two), `http1` (hyper's connection builder with its header-read
//! timeout, a write timeout, the age bound and the stop), [`tls`] (rustls with reloads),
//! [`metrics`], and [`serve`], which runs them all.

pub mod body;
pub mod connections;
mod error;
pub mod established;
pub mod handshakes;
mod http1;
mod log_gate;
pub mod metrics;
mod run;
pub mod server;
pub mod store;
pub mod tls;

pub use error::{Error, TlsProblem};
pub use run::{Bound, Config, ManagedTls, Settings, Tls, serve};
