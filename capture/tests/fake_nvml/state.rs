//! The state the setters change, per GPU, and the handles the exports hand out and read back.

use std::ffi::c_uint;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::scenarios::SCENARIO;
use crate::*;

/// Per GPU index, the MIG mode (current, pending) and persistence set through the setters;
/// `UNSET` means "as the scenario declares".
const UNSET: u32 = u32::MAX;
pub(crate) const GPUS: usize = 8;
#[allow(clippy::declare_interior_mutable_const)]
const UNSET_CELL: AtomicU32 = AtomicU32::new(UNSET);
pub(crate) static MIG_CURRENT: [AtomicU32; GPUS] = [UNSET_CELL; GPUS];
pub(crate) static MIG_PENDING: [AtomicU32; GPUS] = [UNSET_CELL; GPUS];
pub(crate) static PERSISTENCE: [AtomicU32; GPUS] = [UNSET_CELL; GPUS];

pub(crate) fn state(cell: &[AtomicU32; GPUS], gpu: usize, declared: c_uint) -> c_uint {
    match cell.get(gpu).map(|c| c.load(Ordering::SeqCst)) {
        Some(UNSET) | None => declared,
        Some(v) => v,
    }
}

/// A GPU's MIG mode `(current, pending)` now.
pub(crate) fn mig_mode(gpu: usize, current: c_uint, pending: c_uint) -> (c_uint, c_uint) {
    (
        state(&MIG_CURRENT, gpu, current),
        state(&MIG_PENDING, gpu, pending),
    )
}

/// The GPU index of a GPU handle.
pub(crate) fn gpu_index(handle: nvmlDevice_t) -> usize {
    ((handle as usize) >> 8).wrapping_sub(1)
}

// ---- handles --------------------------------------------------------------------------------

/// A handle is `(gpu + 1) << 8 | position + 1` for a MIG device, `(gpu + 1) << 8` for a GPU.
pub(crate) fn gpu_handle(gpu: usize) -> nvmlDevice_t {
    ((gpu + 1) << 8) as nvmlDevice_t
}

pub(crate) fn mig_handle(gpu: usize, position: usize) -> nvmlDevice_t {
    (((gpu + 1) << 8) | (position + 1)) as nvmlDevice_t
}

pub(crate) enum Target {
    Gpu(&'static Gpu),
    Mig(&'static Gpu, &'static MigDev),
}

pub(crate) fn target(handle: nvmlDevice_t) -> Option<Target> {
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
