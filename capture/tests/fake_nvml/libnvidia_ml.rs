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

// The exports are C functions whose safety contract is nvml.h's, not a Rust doc section.
#![allow(
    non_snake_case,
    non_camel_case_types,
    dead_code,
    unexpected_cfgs,
    clippy::missing_safety_doc
)]

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};
use std::sync::atomic::{AtomicU32, Ordering};

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

const MIB: u64 = 1024 * 1024;

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

const H100: &str = "NVIDIA H100 80GB HBM3";
const H100_MIB: u64 = 81559;

const fn whole(uuid: &'static str, bus: &'static str, mig: Mig) -> Gpu {
    Gpu {
        uuid: Ok(uuid),
        name: H100,
        bus_id: Ok((bus, 0, 0)),
        memory_mib: Ok(H100_MIB),
        cc: Ok((9, 0)),
        mig,
        handle: Ok(()),
        set_mig: Ok(SUCCESS),
        set_pm: SUCCESS,
    }
}

const fn mig(uuid: &'static str, name: &'static str, gi: c_uint, ci: c_uint, memory_mib: u64) -> Slot {
    Slot::Mig(MigDev {
        uuid,
        name,
        gi,
        ci,
        memory_mib,
    })
}

const MIG_OFF: Mig = Mig::Mode {
    current: 0,
    pending: 0,
    max: 0,
    slots: &[],
};

const fn mig_on(slots: &'static [Slot]) -> Mig {
    Mig::Mode {
        current: 1,
        pending: 1,
        max: 7,
        slots,
    }
}

const fn ok(gpus: &'static [Gpu]) -> Scenario {
    Scenario {
        init: SUCCESS,
        driver: "580.82.07",
        cuda: 13000,
        count: Ok(gpus.len() as c_uint),
        gpus,
    }
}

/// GPU0: MIG on with 3g.40gb + 2x 1g.10gb + 1g.10gb+me; GPU1: MIG off.
const H100_MIXED: &[Gpu] = &[
    whole(
        "GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f",
        "00000000:18:00.0",
        mig_on(&[
            mig(
                "MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde",
                "NVIDIA H100 80GB HBM3 MIG 3g.40gb",
                2,
                0,
                40192,
            ),
            mig(
                "MIG-b4b2228d-6933-5839-bc0e-41ab9edb61c6",
                "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
                9,
                0,
                9984,
            ),
            mig(
                "MIG-c71dc464-b9f9-5611-9d29-d601a47cffd6",
                "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
                10,
                0,
                9984,
            ),
            mig(
                "MIG-0f03f623-f28d-5831-bc51-f450dad99b8c",
                "NVIDIA H100 80GB HBM3 MIG 1g.10gb+me",
                13,
                0,
                9984,
            ),
        ]),
    ),
    whole(
        "GPU-c08d91cb-e324-655c-71ba-7570956445bc",
        "00000000:2A:00.0",
        MIG_OFF,
    ),
];

#[cfg(any(scenario = "h100_mixed", scenario = "no_name"))]
static SCENARIO: Scenario = ok(H100_MIXED);

/// A GPU UUID with a U+FFFD inside (what a lossy decode of a corrupt UUID gives).
#[cfg(scenario = "bad_gpu_uuid")]
static SCENARIO: Scenario = ok(&[whole(
    "GPU-5c89852c-d268-\u{fffd}-1b07-005d5ae1dc3f",
    "00000000:18:00.0",
    MIG_OFF,
)]);

/// A MIG device UUID with a right-to-left override inside.
#[cfg(scenario = "bad_mig_uuid")]
static SCENARIO: Scenario = ok(&[whole(
    "GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f",
    "00000000:18:00.0",
    mig_on(&[mig(
        "MIG-7089d0f3-\u{202e}293f-58c9",
        "NVIDIA H100 80GB HBM3 MIG 3g.40gb",
        2,
        0,
        40192,
    )]),
)]);

#[cfg(scenario = "mig_no_instances")]
static SCENARIO: Scenario = ok(&[whole(
    "GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f",
    "00000000:18:00.0",
    mig_on(&[]),
)]);

/// Positions 0 and 3 filled out of 7; the others are empty (NOT_FOUND or INVALID_ARGUMENT) or
/// not this process's (NO_PERMISSION).
#[cfg(scenario = "mig_gaps")]
static SCENARIO: Scenario = ok(&[whole(
    "GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f",
    "00000000:18:00.0",
    mig_on(&[
        mig(
            "MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde",
            "NVIDIA H100 80GB HBM3 MIG 1g.20gb",
            3,
            0,
            19968,
        ),
        Slot::Empty(ERROR_NOT_FOUND),
        Slot::Empty(ERROR_INVALID_ARGUMENT),
        mig(
            "MIG-b4b2228d-6933-5839-bc0e-41ab9edb61c6",
            "NVIDIA H100 80GB HBM3 MIG 2g.20gb",
            5,
            0,
            19968,
        ),
        Slot::Empty(ERROR_NOT_FOUND),
        // Another container's slice.
        Slot::Empty(ERROR_NO_PERMISSION),
    ]),
)]);

/// GPU0: MIG on, off after reset (still sliced); GPU1: MIG off, on after reset (still whole);
/// GPU2: not MIG-capable.
#[cfg(scenario = "pending")]
static SCENARIO: Scenario = ok(&[
    whole(
        "GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f",
        "00000000:18:00.0",
        Mig::Mode {
            current: 1,
            pending: 0,
            max: 7,
            slots: &[mig(
                "MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde",
                "NVIDIA H100 80GB HBM3 MIG 7g.80gb",
                0,
                0,
                80896,
            )],
        },
    ),
    whole(
        "GPU-c08d91cb-e324-655c-71ba-7570956445bc",
        "00000000:2A:00.0",
        Mig::Mode {
            current: 0,
            pending: 1,
            max: 0,
            slots: &[],
        },
    ),
    Gpu {
        uuid: Ok("GPU-6109dd5c-d378-24ee-f344-79b537574ea6"),
        name: "NVIDIA L4",
        bus_id: Ok(("00000000:AB:00.0", 0, 0xab)),
        memory_mib: Ok(23034),
        cc: Ok((8, 9)),
        mig: Mig::Fails(ERROR_NOT_SUPPORTED),
        handle: Ok(()),
        set_mig: Err(ERROR_NOT_SUPPORTED),
        set_pm: SUCCESS,
    },
]);

/// The MIG guide's H100 example: three compute instances in one 3g GPU instance, two 1g.
#[cfg(scenario = "compute_instances")]
static SCENARIO: Scenario = ok(&[whole(
    "GPU-c08d91cb-e324-655c-71ba-7570956445bc",
    "00000000:18:00.0",
    mig_on(&[
        mig(
            "MIG-c788539f-c1ea-5a36-8b4d-9b07d024b1bb",
            "NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb",
            2,
            0,
            40192,
        ),
        mig(
            "MIG-405bbda1-6b05-535f-9702-f95e8cd170ce",
            "NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb",
            2,
            1,
            40192,
        ),
        mig(
            "MIG-df7e5a27-eeea-51a0-9055-b36d5a552879",
            "NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb",
            2,
            2,
            40192,
        ),
        mig(
            "MIG-b4b2228d-6933-5839-bc0e-41ab9edb61c6",
            "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
            9,
            0,
            9984,
        ),
        mig(
            "MIG-c71dc464-b9f9-5611-9d29-d601a47cffd6",
            "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
            10,
            0,
            9984,
        ),
    ]),
)]);

/// Name forms seen or plausible across drivers, one that holds no profile, a legacy 4-digit
/// PCI domain; the instance-id symbols are missing (see the cfgs on their exports).
#[cfg(scenario = "odd_names")]
static SCENARIO: Scenario = ok(&[Gpu {
    bus_id: Ok(("0000:9a:00.0", 0, 0x9a)),
    ..whole(
        "GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f",
        "",
        mig_on(&[
            mig(
                "MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde",
                "MIG 1g.10gb",
                1,
                0,
                9984,
            ),
            mig(
                "MIG-b4b2228d-6933-5839-bc0e-41ab9edb61c6",
                "NVIDIA H100 80GB HBM3 1g.10gb+me",
                2,
                0,
                9984,
            ),
            mig(
                "MIG-c71dc464-b9f9-5611-9d29-d601a47cffd6",
                " NVIDIA H100 80GB HBM3 MIG  2g.20gb ",
                3,
                0,
                19968,
            ),
            mig(
                "MIG-0f03f623-f28d-5831-bc51-f450dad99b8c",
                "NVIDIA H100 80GB HBM3",
                4,
                0,
                9984,
            ),
            mig(
                "MIG-405bbda1-6b05-535f-9702-f95e8cd170ce",
                "NVIDIA H100 80GB HBM3 MIG mystery",
                5,
                0,
                9984,
            ),
        ]),
    )
}]);

/// GPU0's MIG walk hits a lost device at position 1; GPU1 is fine.
#[cfg(scenario = "mig_walk_fails")]
static SCENARIO: Scenario = ok(&[
    whole(
        "GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f",
        "00000000:18:00.0",
        mig_on(&[
            mig(
                "MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde",
                "NVIDIA H100 80GB HBM3 MIG 3g.40gb",
                2,
                0,
                40192,
            ),
            Slot::Empty(ERROR_GPU_IS_LOST),
        ]),
    ),
    whole(
        "GPU-c08d91cb-e324-655c-71ba-7570956445bc",
        "00000000:2A:00.0",
        MIG_OFF,
    ),
]);

/// GPU0 answers only its name: every other per-GPU call fails.
#[cfg(scenario = "gpu_facts_fail")]
static SCENARIO: Scenario = Scenario {
    cuda: 12020,
    ..ok(&[
        Gpu {
            uuid: Err(ERROR_UNKNOWN),
            name: H100,
            bus_id: Err(ERROR_GPU_IS_LOST),
            memory_mib: Err(ERROR_UNKNOWN),
            cc: Err(ERROR_UNKNOWN),
            mig: Mig::Fails(ERROR_UNKNOWN),
            handle: Ok(()),
            set_mig: Err(ERROR_UNKNOWN),
            set_pm: ERROR_UNKNOWN,
        },
        whole(
            "GPU-c08d91cb-e324-655c-71ba-7570956445bc",
            "00000000:2A:00.0",
            MIG_OFF,
        ),
    ])
};

#[cfg(any(scenario = "init_fails", scenario = "no_init"))]
static SCENARIO: Scenario = Scenario {
    init: ERROR_DRIVER_NOT_LOADED,
    ..ok(&[])
};

#[cfg(scenario = "count_fails")]
static SCENARIO: Scenario = Scenario {
    count: Err(ERROR_UNKNOWN),
    ..ok(H100_MIXED)
};

#[cfg(scenario = "handle_fails")]
static SCENARIO: Scenario = ok(&[
    whole(
        "GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f",
        "00000000:18:00.0",
        MIG_OFF,
    ),
    Gpu {
        handle: Err(ERROR_GPU_IS_LOST),
        ..whole(
            "GPU-c08d91cb-e324-655c-71ba-7570956445bc",
            "00000000:2A:00.0",
            MIG_OFF,
        )
    },
]);

/// Boot recovery's NVML control (`recovery/tests/nvml_control.rs`, the `recover` CLI tests):
/// GPU0 an H200, MIG off, whose mode changes at once (Hopper); GPU1 MIG off, whose mode stays
/// pending (an Ampere held by another client); GPU2 an L4, not MIG-capable, where persistence
/// needs root. One library per scenario name, so tests that change state do not meet.
#[cfg(any(
    scenario = "control_list",
    scenario = "control_set",
    scenario = "control_pm"
))]
static SCENARIO: Scenario = ok(&[
    Gpu {
        name: "NVIDIA H200",
        ..whole(
            "GPU-b2acda36-db78-a209-f9ef-d07b4336c449",
            "00000000:18:00.0",
            MIG_OFF,
        )
    },
    Gpu {
        name: "NVIDIA A100-SXM4-80GB",
        set_mig: Ok(ERROR_IN_USE),
        ..whole(
            "GPU-c08d91cb-e324-655c-71ba-7570956445bc",
            "0000:2a:00.0",
            MIG_OFF,
        )
    },
    Gpu {
        uuid: Ok("GPU-6109dd5c-d378-24ee-f344-79b537574ea6"),
        name: "NVIDIA L4",
        bus_id: Ok(("00000000:AB:00.0", 0, 0xab)),
        memory_mib: Ok(23034),
        cc: Ok((8, 9)),
        mig: Mig::Fails(ERROR_NOT_SUPPORTED),
        handle: Ok(()),
        set_mig: Err(ERROR_NOT_SUPPORTED),
        set_pm: ERROR_NO_PERMISSION,
    },
]);

/// The `recover` end to end: the stand-in tree's H200 with MIG on (its instances come from the
/// stand-in nvidia-smi).
#[cfg(scenario = "recover_e2e")]
static SCENARIO: Scenario = ok(&[Gpu {
    name: "NVIDIA H200",
    ..whole(
        "GPU-b2acda36-db78-a209-f9ef-d07b4336c449",
        "00000000:18:00.0",
        Mig::Mode {
            current: 1,
            pending: 1,
            max: 7,
            slots: &[],
        },
    )
}]);

// ---- state ----------------------------------------------------------------------------------

/// Per GPU index, the MIG mode (current, pending) and persistence set through the setters;
/// `UNSET` means "as the scenario declares".
const UNSET: u32 = u32::MAX;
const GPUS: usize = 8;
#[allow(clippy::declare_interior_mutable_const)]
const UNSET_CELL: AtomicU32 = AtomicU32::new(UNSET);
static MIG_CURRENT: [AtomicU32; GPUS] = [UNSET_CELL; GPUS];
static MIG_PENDING: [AtomicU32; GPUS] = [UNSET_CELL; GPUS];
static PERSISTENCE: [AtomicU32; GPUS] = [UNSET_CELL; GPUS];

fn state(cell: &[AtomicU32; GPUS], gpu: usize, declared: c_uint) -> c_uint {
    match cell.get(gpu).map(|c| c.load(Ordering::SeqCst)) {
        Some(UNSET) | None => declared,
        Some(v) => v,
    }
}

/// A GPU's MIG mode `(current, pending)` now.
fn mig_mode(gpu: usize, current: c_uint, pending: c_uint) -> (c_uint, c_uint) {
    (
        state(&MIG_CURRENT, gpu, current),
        state(&MIG_PENDING, gpu, pending),
    )
}

/// The GPU index of a GPU handle.
fn gpu_index(handle: nvmlDevice_t) -> usize {
    ((handle as usize) >> 8).wrapping_sub(1)
}

// ---- handles --------------------------------------------------------------------------------

/// A handle is `(gpu + 1) << 8 | position + 1` for a MIG device, `(gpu + 1) << 8` for a GPU.
fn gpu_handle(gpu: usize) -> nvmlDevice_t {
    ((gpu + 1) << 8) as nvmlDevice_t
}

fn mig_handle(gpu: usize, position: usize) -> nvmlDevice_t {
    (((gpu + 1) << 8) | (position + 1)) as nvmlDevice_t
}

enum Target {
    Gpu(&'static Gpu),
    Mig(&'static Gpu, &'static MigDev),
}

fn target(handle: nvmlDevice_t) -> Option<Target> {
    let raw = handle as usize;
    let gpu = SCENARIO.gpus.get((raw >> 8).checked_sub(1)?)?;
    match raw & 0xff {
        0 => Some(Target::Gpu(gpu)),
        p => match &gpu.mig {
            Mig::Mode { slots, .. } => match slots.get(p - 1)? {
                Slot::Mig(m) => Some(Target::Mig(gpu, m)),
                Slot::Empty(_) => None,
            },
            Mig::Fails(_) => None,
        },
    }
}

// ---- helpers --------------------------------------------------------------------------------

unsafe fn put_str(text: &str, buf: *mut c_char, len: c_uint) -> nvmlReturn_t {
    if buf.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    let bytes = text.as_bytes();
    if bytes.len() + 1 > len as usize {
        return ERROR_INSUFFICIENT_SIZE;
    }
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
        *buf.add(bytes.len()) = 0;
    }
    SUCCESS
}

unsafe fn put<T>(value: T, out: *mut T) -> nvmlReturn_t {
    if out.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    unsafe { out.write(value) };
    SUCCESS
}

// ---- exports --------------------------------------------------------------------------------

// `no_init` lacks its init function: loading must fail before anything else is called.
#[cfg(not(scenario = "no_init"))]
#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit_v2() -> nvmlReturn_t {
    SCENARIO.init
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlShutdown() -> nvmlReturn_t {
    SUCCESS
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlErrorString(_result: nvmlReturn_t) -> *const c_char {
    c"fake NVML error".as_ptr()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(buf: *mut c_char, len: c_uint) -> nvmlReturn_t {
    unsafe { put_str(SCENARIO.driver, buf, len) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion_v2(version: *mut c_int) -> nvmlReturn_t {
    unsafe { put(SCENARIO.cuda, version) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion(version: *mut c_int) -> nvmlReturn_t {
    unsafe { put(SCENARIO.cuda, version) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> nvmlReturn_t {
    match SCENARIO.count {
        Ok(n) => unsafe { put(n, count) },
        Err(code) => code,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    let Some(gpu) = SCENARIO.gpus.get(index as usize) else {
        return ERROR_INVALID_ARGUMENT;
    };
    match gpu.handle {
        Ok(()) => unsafe { put(gpu_handle(index as usize), device) },
        Err(code) => code,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUUID(
    device: nvmlDevice_t,
    buf: *mut c_char,
    len: c_uint,
) -> nvmlReturn_t {
    match target(device) {
        Some(Target::Gpu(g)) => match g.uuid {
            Ok(uuid) => unsafe { put_str(uuid, buf, len) },
            Err(code) => code,
        },
        Some(Target::Mig(_, m)) => unsafe { put_str(m.uuid, buf, len) },
        None => ERROR_INVALID_ARGUMENT,
    }
}

#[cfg(not(scenario = "no_name"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetName(
    device: nvmlDevice_t,
    buf: *mut c_char,
    len: c_uint,
) -> nvmlReturn_t {
    match target(device) {
        Some(Target::Gpu(g)) => unsafe { put_str(g.name, buf, len) },
        Some(Target::Mig(_, m)) => unsafe { put_str(m.name, buf, len) },
        None => ERROR_INVALID_ARGUMENT,
    }
}

/// nvml.h `nvmlPciInfo_t` (v3).
#[repr(C)]
pub struct nvmlPciInfo_t {
    busIdLegacy: [c_char; 16],
    domain: c_uint,
    bus: c_uint,
    device: c_uint,
    pciDeviceId: c_uint,
    pciSubSystemId: c_uint,
    busId: [c_char; 32],
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(
    device: nvmlDevice_t,
    pci: *mut nvmlPciInfo_t,
) -> nvmlReturn_t {
    let Some(Target::Gpu(g)) = target(device) else {
        return ERROR_INVALID_ARGUMENT;
    };
    let (text, domain, bus) = match g.bus_id {
        Ok(b) => b,
        Err(code) => return code,
    };
    if pci.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    let mut info = nvmlPciInfo_t {
        busIdLegacy: [0; 16],
        domain,
        bus,
        device: 0,
        pciDeviceId: 0x2330_10de,
        pciSubSystemId: 0x16c1_10de,
        busId: [0; 32],
    };
    unsafe {
        put_str(text, info.busId.as_mut_ptr(), 32);
        pci.write(info);
    }
    SUCCESS
}

/// nvml.h `nvmlMemory_v2_t`.
#[repr(C)]
pub struct nvmlMemory_v2_t {
    version: c_uint,
    total: c_ulonglong,
    reserved: c_ulonglong,
    free: c_ulonglong,
    used: c_ulonglong,
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: nvmlDevice_t,
    memory: *mut nvmlMemory_v2_t,
) -> nvmlReturn_t {
    let mib = match target(device) {
        Some(Target::Gpu(g)) => match g.memory_mib {
            Ok(m) => m,
            Err(code) => return code,
        },
        Some(Target::Mig(_, m)) => m.memory_mib,
        None => return ERROR_INVALID_ARGUMENT,
    };
    if memory.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    // The caller must say which struct version it passes (NVML_STRUCT_VERSION(Memory, 2)).
    let expected = (std::mem::size_of::<nvmlMemory_v2_t>() | (2 << 24)) as c_uint;
    if unsafe { (*memory).version } != expected {
        return ERROR_INVALID_ARGUMENT;
    }
    let total = mib * MIB;
    let reserved = 512 * MIB;
    unsafe {
        memory.write(nvmlMemory_v2_t {
            version: expected,
            total,
            reserved,
            free: total - reserved,
            used: 0,
        });
    }
    SUCCESS
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCudaComputeCapability(
    device: nvmlDevice_t,
    major: *mut c_int,
    minor: *mut c_int,
) -> nvmlReturn_t {
    let (ma, mi) = match target(device) {
        Some(Target::Gpu(g)) | Some(Target::Mig(g, _)) => match g.cc {
            Ok(cc) => cc,
            Err(code) => return code,
        },
        None => return ERROR_INVALID_ARGUMENT,
    };
    unsafe {
        let rc = put(ma, major);
        if rc != SUCCESS {
            return rc;
        }
        put(mi, minor)
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: nvmlDevice_t,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> nvmlReturn_t {
    let Some(Target::Gpu(g)) = target(device) else {
        return ERROR_INVALID_ARGUMENT;
    };
    match g.mig {
        Mig::Fails(code) => code,
        Mig::Mode {
            current: c,
            pending: p,
            ..
        } => unsafe {
            let (c, p) = mig_mode(gpu_index(device), c, p);
            let rc = put(c, current);
            if rc != SUCCESS {
                return rc;
            }
            put(p, pending)
        },
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxMigDeviceCount(
    device: nvmlDevice_t,
    count: *mut c_uint,
) -> nvmlReturn_t {
    let Some(Target::Gpu(g)) = target(device) else {
        return ERROR_INVALID_ARGUMENT;
    };
    match g.mig {
        Mig::Fails(code) => code,
        // NVML: "Returns zero if MIG is not supported or enabled".
        Mig::Mode {
            current, pending, max, ..
        } => {
            let (current, _) = mig_mode(gpu_index(device), current, pending);
            unsafe { put(if current == 1 { max } else { 0 }, count) }
        }
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: nvmlDevice_t,
    index: c_uint,
    mig_device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    let raw = device as usize;
    let Some(Target::Gpu(g)) = target(device) else {
        return ERROR_INVALID_ARGUMENT;
    };
    let gpu = (raw >> 8) - 1;
    match &g.mig {
        Mig::Fails(code) => *code,
        Mig::Mode {
            current,
            pending,
            max,
            slots,
        } => {
            let (current, _) = mig_mode(gpu, *current, *pending);
            if current != 1 {
                return ERROR_NOT_SUPPORTED;
            }
            if index >= *max {
                return ERROR_INVALID_ARGUMENT;
            }
            match slots.get(index as usize) {
                Some(Slot::Mig(_)) => unsafe { put(mig_handle(gpu, index as usize), mig_device) },
                Some(Slot::Empty(code)) => *code,
                None => ERROR_NOT_FOUND,
            }
        }
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
    mig_device: nvmlDevice_t,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    match target(mig_device) {
        Some(Target::Mig(..)) => unsafe { put(((mig_device as usize) & !0xff) as nvmlDevice_t, device) },
        _ => ERROR_INVALID_ARGUMENT,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceIsMigDeviceHandle(
    device: nvmlDevice_t,
    is_mig: *mut c_uint,
) -> nvmlReturn_t {
    match target(device) {
        Some(Target::Gpu(_)) => unsafe { put(0, is_mig) },
        Some(Target::Mig(..)) => unsafe { put(1, is_mig) },
        None => ERROR_INVALID_ARGUMENT,
    }
}

#[cfg(not(scenario = "odd_names"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceId(device: nvmlDevice_t, id: *mut c_uint) -> nvmlReturn_t {
    match target(device) {
        Some(Target::Mig(_, m)) => unsafe { put(m.gi, id) },
        Some(Target::Gpu(_)) => ERROR_NOT_SUPPORTED,
        None => ERROR_INVALID_ARGUMENT,
    }
}

#[cfg(not(scenario = "odd_names"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeInstanceId(
    device: nvmlDevice_t,
    id: *mut c_uint,
) -> nvmlReturn_t {
    match target(device) {
        Some(Target::Mig(_, m)) => unsafe { put(m.ci, id) },
        Some(Target::Gpu(_)) => ERROR_NOT_SUPPORTED,
        None => ERROR_INVALID_ARGUMENT,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceSetMigMode(
    device: nvmlDevice_t,
    mode: c_uint,
    activation: *mut nvmlReturn_t,
) -> nvmlReturn_t {
    let Some(Target::Gpu(g)) = target(device) else {
        return ERROR_INVALID_ARGUMENT;
    };
    if mode > 1 {
        return ERROR_INVALID_ARGUMENT;
    }
    let gpu = gpu_index(device);
    let status = match (&g.mig, g.set_mig) {
        (Mig::Fails(code), _) => return *code,
        (_, Err(code)) => return code,
        (Mig::Mode { .. }, Ok(status)) => status,
    };
    if gpu >= GPUS || activation.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    MIG_PENDING[gpu].store(mode, Ordering::SeqCst);
    if status == SUCCESS {
        MIG_CURRENT[gpu].store(mode, Ordering::SeqCst);
    }
    unsafe { put(status, activation) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceSetPersistenceMode(device: nvmlDevice_t, mode: c_uint) -> nvmlReturn_t {
    let Some(Target::Gpu(g)) = target(device) else {
        return ERROR_INVALID_ARGUMENT;
    };
    let gpu = gpu_index(device);
    if mode > 1 || gpu >= GPUS {
        return ERROR_INVALID_ARGUMENT;
    }
    if g.set_pm != SUCCESS {
        return g.set_pm;
    }
    PERSISTENCE[gpu].store(mode, Ordering::SeqCst);
    SUCCESS
}

/// Persistence starts off (`NVML_FEATURE_DISABLED`) unless set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPersistenceMode(device: nvmlDevice_t, mode: *mut c_uint) -> nvmlReturn_t {
    let Some(Target::Gpu(_)) = target(device) else {
        return ERROR_INVALID_ARGUMENT;
    };
    unsafe { put(state(&PERSISTENCE, gpu_index(device), 0), mode) }
}
