//! Known nvidia-smi failure messages: the one classifier every caller asks.
//!
//! nvidia-smi prints its failures as prose on stdout, often with exit status 0 or a status that
//! differs between releases. A parser that only looked for its table would read `No devices
//! were found` as "an empty listing", which a capture would then record as "this node has no
//! GPU". Every parser here therefore asks [`classify`] first, and a caller that ran a command
//! (a capture's query, boot recovery's reset) asks [`Failure::of`] about what it printed.
//!
//! Matching is on lower-cased text, so `In use by another client` and `in use by another
//! process` read the same wherever they are asked about.

use crate::error::Error;

/// What kind of failure nvidia-smi reported, for a caller that decides what to do next (a
/// reset in use is escalated, one not supported is not) rather than reporting it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// The kernel driver cannot be reached (not loaded, or a library/driver mismatch).
    DriverUnreachable,
    /// The driver sees no GPU.
    NoDevices,
    /// A GPU cannot be opened (fallen off the bus, or being reset).
    DeviceHandle,
    /// The caller lacks the privileges (MIG listings in a container).
    InsufficientPermissions,
    /// Another client or process holds the GPU or instance.
    InUseByAnotherClient,
    /// The operation is not supported here (`Resetting GPU … is not supported.` in a VM).
    NotSupported,
    /// What the operation was asked about does not exist (`… : Not Found` destroying instances
    /// that are not there).
    NotFound,
}

/// One recognised failure: a phrase nvidia-smi prints and what it means.
struct Known {
    /// Lower-case text looked for anywhere in the output.
    phrase: &'static str,
    /// What it means.
    kind: Failure,
}

/// Checked in this order: the first phrase found wins. A driver that cannot be reached explains
/// every other symptom, so it comes first; the NVML initialisation fallback comes after the
/// specific causes so that `Failed to initialize NVML: Insufficient Permissions` reads as a
/// permission problem. The operation outcomes (not supported, not found) come last: they describe
/// the one operation asked for, and any cause above explains them.
const KNOWN: &[Known] = &[
    Known {
        phrase: "communicate with the nvidia driver",
        kind: Failure::DriverUnreachable,
    },
    Known {
        phrase: "no devices were found",
        kind: Failure::NoDevices,
    },
    Known {
        phrase: "unable to determine the device handle",
        kind: Failure::DeviceHandle,
    },
    Known {
        phrase: "insufficient permissions",
        kind: Failure::InsufficientPermissions,
    },
    // `In use by another client` (MIG instance and reset paths) and `is currently in use by
    // another process` (`--gpu-reset`, R450): the same fact, another holder of the GPU.
    Known {
        phrase: "in use by another client",
        kind: Failure::InUseByAnotherClient,
    },
    Known {
        phrase: "in use by another process",
        kind: Failure::InUseByAnotherClient,
    },
    // `Failed to initialize NVML: Driver/library version mismatch` and friends: nvidia-smi
    // cannot talk to the kernel driver it was built for.
    Known {
        phrase: "failed to initialize nvml",
        kind: Failure::DriverUnreachable,
    },
    Known {
        phrase: "is not supported",
        kind: Failure::NotSupported,
    },
    Known {
        phrase: "not found",
        kind: Failure::NotFound,
    },
];

impl Failure {
    /// The kind of the first known failure message in `output`; `None` when it carries none.
    ///
    /// This looks at text only. A command that printed `Warning: MIG mode is in pending disable
    /// state …: In use by another client` and then `All done.` still matches; whether that is a
    /// failure is the caller's call, made from the exit status.
    pub fn of(output: &str) -> Option<Failure> {
        let lower = output.to_lowercase();
        KNOWN.iter().find(|k| lower.contains(k.phrase)).map(|k| k.kind)
    }

    /// The typed error for this failure, keeping `output` unchanged inside it; `None` for the
    /// outcomes of one operation (not supported, not found), which a listing's parser does not
    /// read as a failure of nvidia-smi as a whole.
    fn error(self, output: String) -> Option<Error> {
        Some(match self {
            Failure::DriverUnreachable => Error::DriverUnreachable { output },
            Failure::NoDevices => Error::NoDevices { output },
            Failure::DeviceHandle => Error::DeviceHandle { output },
            Failure::InsufficientPermissions => Error::InsufficientPermissions { output },
            Failure::InUseByAnotherClient => Error::InUseByAnotherClient { output },
            Failure::NotSupported | Failure::NotFound => return None,
        })
    }
}

/// The typed error for a known nvidia-smi failure message in `output`, with the output kept
/// unchanged inside it; `None` when the text carries none of them (or only the outcome of one
/// operation, see [`Failure::of`]).
pub fn classify(output: &str) -> Option<Error> {
    Failure::of(output)?.error(output.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind a listing reads as a failure is an error; the operation outcomes are not, so
    /// a listing that mentions them is still parsed.
    #[test]
    fn operation_outcomes_are_kinds_not_errors() {
        for (text, kind, is_error) in [
            ("No devices were found", Failure::NoDevices, true),
            (
                "Resetting GPU 00000000:00:03.0 is not supported.",
                Failure::NotSupported,
                false,
            ),
            (
                "Unable to destroy compute instance: Not Found",
                Failure::NotFound,
                false,
            ),
            (
                "GPU 00000000:01:00.0 is currently in use by another process.",
                Failure::InUseByAnotherClient,
                true,
            ),
        ] {
            assert_eq!(Failure::of(text), Some(kind), "{text}");
            assert_eq!(classify(text).is_some(), is_error, "{text}");
        }
    }

    /// A cause explains an operation's outcome: a reset that is not supported because the
    /// driver cannot be reached is a driver problem.
    #[test]
    fn a_cause_wins_over_an_outcome() {
        let text = "Resetting GPU is not supported.\nNVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.";
        assert_eq!(Failure::of(text), Some(Failure::DriverUnreachable));
    }
}
