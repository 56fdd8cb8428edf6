//! A fake `libnvidia-ml.so.1` for miggate's NVML tests, so the NVML backend is tested on
//! machines without a GPU.
//!
//! `capture/tests/nvml.rs` compiles this file with
//! `rustc --crate-type cdylib --cfg 'scenario="<name>"'`, one library per scenario in its own
//! directory, and loads it through `nvml::read(Some(path))`. The scenario picks the topology
//! (a `static SCENARIO`) and which symbols exist at all (`#[cfg(not(...))]` on an export), so
//! tests of different scenarios can run in parallel in one process.
//!
//! Signatures and struct layouts follow nvml.h as bound by nvml-wrapper-sys 0.10
//! (`src/bindings.rs`): handles are opaque pointers, strings are NUL-terminated into a
//! caller-given buffer of a given length, every call returns an `nvmlReturn_t`.
//! Handles encode (GPU index, MIG position). The only state is what the setters change
//! (`nvmlDeviceSetMigMode`, `nvmlDeviceSetPersistenceMode`), per GPU in statics: it lives as
//! long as the library stays loaded in one process, so it is tested in-process, one scenario
//! (one library) per test that changes it.
//!
//! The topologies are in `scenarios.rs`, the setters' state and the handles in `state.rs`,
//! the C functions in `exports.rs`: `rustc` finds them beside this file.

// The exports are C functions whose safety contract is nvml.h's, not a Rust doc section.
#![allow(
    non_snake_case,
    non_camel_case_types,
    dead_code,
    unexpected_cfgs,
    clippy::missing_safety_doc
)]

mod exports;
mod scenarios;
mod state;

use std::ffi::{c_int, c_uint, c_void};

type nvmlReturn_t = c_uint;
type nvmlDevice_t = *mut c_void;

const SUCCESS: nvmlReturn_t = 0;
const ERROR_INVALID_ARGUMENT: nvmlReturn_t = 2;
const ERROR_NOT_SUPPORTED: nvmlReturn_t = 3;
const ERROR_NO_PERMISSION: nvmlReturn_t = 4;
const ERROR_NOT_FOUND: nvmlReturn_t = 6;
const ERROR_INSUFFICIENT_SIZE: nvmlReturn_t = 7;
const ERROR_DRIVER_NOT_LOADED: nvmlReturn_t = 9;
const ERROR_GPU_IS_LOST: nvmlReturn_t = 15;
const ERROR_RESET_REQUIRED: nvmlReturn_t = 16;
const ERROR_IN_USE: nvmlReturn_t = 19;
const ERROR_UNKNOWN: nvmlReturn_t = 999;

struct Scenario {
    /// What `nvmlInit_v2` returns.
    init: nvmlReturn_t,
    driver: &'static str,
    /// `nvmlSystemGetCudaDriverVersion_v2`, e.g. 13000 for 13.0.
    cuda: c_int,
    /// `Err(code)` makes `nvmlDeviceGetCount_v2` fail.
    count: Result<c_uint, nvmlReturn_t>,
    gpus: &'static [Gpu],
}

struct Gpu {
    /// Every property is a `Result`: `Err(code)` makes its call fail with that code.
    uuid: Result<&'static str, nvmlReturn_t>,
    name: &'static str,
    bus_id: Result<(&'static str, c_uint, c_uint), nvmlReturn_t>,
    memory_mib: Result<u64, nvmlReturn_t>,
    cc: Result<(c_int, c_int), nvmlReturn_t>,
    mig: Mig,
    /// `Err(code)` makes `nvmlDeviceGetHandleByIndex_v2` fail for this GPU.
    handle: Result<(), nvmlReturn_t>,
    /// `nvmlDeviceSetMigMode`: `Ok(status)` is the activation status it reports (SUCCESS: the
    /// mode is in force at once; anything else: only the pending mode changes), `Err(code)`
    /// its return code.
    set_mig: Result<nvmlReturn_t, nvmlReturn_t>,
    /// What `nvmlDeviceSetPersistenceMode` returns.
    set_pm: nvmlReturn_t,
}

enum Mig {
    /// `nvmlDeviceGetMigMode` returns this error.
    Fails(nvmlReturn_t),
    Mode {
        current: c_uint,
        pending: c_uint,
        /// `nvmlDeviceGetMaxMigDeviceCount`.
        max: c_uint,
        /// By MIG device position; positions past the end (below `max`) are empty.
        slots: &'static [Slot],
    },
}

enum Slot {
    /// `nvmlDeviceGetMigDeviceHandleByIndex` returns this code (empty: NOT_FOUND).
    Empty(nvmlReturn_t),
    Mig(MigDev),
}

struct MigDev {
    uuid: &'static str,
    name: &'static str,
    gi: c_uint,
    ci: c_uint,
    memory_mib: u64,
}
