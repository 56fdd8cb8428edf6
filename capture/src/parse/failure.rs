//! Known nvidia-smi failure messages, mapped to typed errors.
//!
//! nvidia-smi prints its failures as prose on stdout, often with exit status 0 or a status that
//! differs between releases. A parser that only looked for its table would read `No devices
//! were found` as "an empty listing", which a capture would then record as "this node has no
//! GPU". Every parser here therefore asks [`classify`] first, and the runner can ask it about
//! any output a command printed when it failed.

use crate::Error;

/// One recognised failure: a phrase nvidia-smi prints and the error it becomes.
struct Known {
    /// Lower-case text looked for anywhere in the output.
    phrase: &'static str,
    /// Builds the error, given the output unchanged.
    error: fn(String) -> Error,
}

/// Checked in this order: the first phrase found wins. A driver that cannot be reached explains
/// every other symptom, so it comes first; the NVML initialisation fallback comes last so that
/// `Failed to initialize NVML: Insufficient Permissions` reads as a permission problem.
const KNOWN: &[Known] = &[
    Known {
        phrase: "communicate with the nvidia driver",
        error: |output| Error::DriverUnreachable { output },
    },
    Known {
        phrase: "no devices were found",
        error: |output| Error::NoDevices { output },
    },
    Known {
        phrase: "unable to determine the device handle",
        error: |output| Error::DeviceHandle { output },
    },
    Known {
        phrase: "insufficient permissions",
        error: |output| Error::InsufficientPermissions { output },
    },
    // `In use by another client` (MIG instance and reset paths) and `is currently in use by
    // another process` (`--gpu-reset`, R450): the same fact, another holder of the GPU.
    Known {
        phrase: "in use by another client",
        error: |output| Error::InUseByAnotherClient { output },
    },
    Known {
        phrase: "in use by another process",
        error: |output| Error::InUseByAnotherClient { output },
    },
    // `Failed to initialize NVML: Driver/library version mismatch` and friends: nvidia-smi
    // cannot talk to the kernel driver it was built for.
    Known {
        phrase: "failed to initialize nvml",
        error: |output| Error::DriverUnreachable { output },
    },
];

/// The typed error for a known nvidia-smi failure message in `output`, with the output kept
/// unchanged inside it; `None` when the text carries none of them.
///
/// This looks at text only. A command that printed `Warning: MIG mode is in pending disable
/// state …: In use by another client` and then `All done.` still matches; whether that is a
/// failure is the caller's call, made from the exit status.
pub fn classify(output: &str) -> Option<Error> {
    let lower = output.to_lowercase();
    KNOWN
        .iter()
        .find(|k| lower.contains(k.phrase))
        .map(|k| (k.error)(output.to_string()))
}
