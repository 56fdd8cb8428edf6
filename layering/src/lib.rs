//! The workspace's layering, one home for its checks, all in this crate's tests:
//!
//! - `tests/crate_layers.rs`: the crates stand in the layers `docs/architecture.md` draws, each
//!   using only crates below it (read from `cargo metadata`), and the crates that decide link no
//!   async runtime, HTTP, TLS or Kubernetes client (read from `cargo tree`);
//! - `tests/module_graph.rs`: no module circle in any workspace crate.
//!
//! It has no code of its own and depends on no workspace crate, so it is in no one's way.
