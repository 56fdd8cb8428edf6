//! The exported C functions, with nvml.h's signatures and structs.

use std::ffi::{c_char, c_int, c_uint, c_ulonglong};
use std::sync::atomic::Ordering;

use crate::scenarios::SCENARIO;
use crate::state::*;
use crate::*;

const MIB: u64 = 1024 * 1024;

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
            current,
            pending,
            max,
            ..
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
pub unsafe extern "C" fn nvmlDeviceGetPersistenceMode(
    device: nvmlDevice_t,
    mode: *mut c_uint,
) -> nvmlReturn_t {
    let Some(Target::Gpu(_)) = target(device) else {
        return ERROR_INVALID_ARGUMENT;
    };
    unsafe { put(state(&PERSISTENCE, gpu_index(device), 0), mode) }
}
