//! Every warning a capture writes, as one enum: the words live in [`Warning`]'s `Display`, and
//! the backends name what they saw, kept typed until the warning is shown or written.
//!
//! A capture's warnings end in a manifest, which carries words (`miggate-compat` cannot name this
//! crate's types): [`capture`](crate::capture()) renders each into the manifest's `warnings` as
//! the last step. [`NvidiaFacts`](crate::NvidiaFacts) keeps them typed, and serializes them as
//! their words.

use std::fmt;
use std::process::ExitStatus;
use std::sync::Arc;

use miggate_compat::escape::escape;
use miggate_compat::{DeviceUuid, GpuUuid};
use miggate_smi::{RunError, Stream, list, query};
use serde::{Serialize, Serializer};

/// What a capture could not read cleanly.
///
/// Two warnings are equal when they say the same words: some carry the errors they report,
/// which compare no other way. A warning also equals the text it says (`w == "…"`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Warning {
    /// A warning of nvidia-smi's parsers (`-L`, `--query-gpu`), passed on.
    Smi(miggate_smi::Warning),

    /// `--query-gpu` printed a GPU's row twice (concatenated outputs); the repeat was dropped.
    QueryGpuAgain {
        /// The repeat's line.
        line: usize,
        /// The GPU's UUID.
        uuid: GpuUuid,
    },
    /// A GPU `-L` lists has no `--query-gpu` row: its MIG mode is unknown.
    WithoutQueryRow(SmiGpu),
    /// `-L` could not be read and the GPU's MIG mode is unknown: its devices are unknown.
    MigModeUnknownWithoutListing(SmiGpu),
    /// `-L` could not be read and the GPU has MIG on: its devices are unknown.
    MigOnWithoutListing(SmiGpu),
    /// The GPU reports MIG off, but `-L` lists slices under it: kept as slices.
    MigOffWithSlices(SmiGpu),
    /// The GPU has MIG on and `-L` does not list it: its devices are unknown.
    MigOnNotListed(SmiGpu),
    /// `-L` does not list the GPU and its MIG mode is unknown: the devices are unknown.
    MigModeUnknownNotListed(SmiGpu),
    /// `-L` does not list the GPU, whose MIG mode is off: taken as a whole GPU.
    NotListedTakenWhole(SmiGpu),
    /// Neither `-L` nor `--query-gpu` listed a GPU: the devices are unknown.
    NoGpuListed,
    /// `--query-gpu` rows report different driver versions; the first is recorded.
    DriverVersionsDiffer {
        /// The first row's, recorded.
        first: String,
        /// The first that differs from it.
        other: String,
    },

    /// A command's stream was still held open after it exited; what was read until then is used.
    HeldOpen {
        /// The command line (outside text: quoted escaped).
        command: String,
        /// The stream.
        stream: Stream,
        /// How many bytes of an unfinished last line were dropped.
        dropped: usize,
    },
    /// `nvidia-smi -L` printed what cannot be read: the slices of MIG-enabled GPUs are unknown.
    ListingUnreadable(Arc<miggate_smi::Error>),
    /// `nvidia-smi -L` could not be run.
    ListingNotRun(Arc<RunError>),
    /// `nvidia-smi -L` failed.
    ListingFailed(CommandFailure),
    /// `nvidia-smi --version` could not be run: the CUDA version is unknown.
    VersionNotRun(Arc<RunError>),
    /// `nvidia-smi --version` failed: the CUDA version is unknown.
    VersionFailed(CommandFailure),
    /// `nvidia-smi mig -lci` could not be run: the slices' instance ids are unknown.
    InstanceIdsNotRun(Arc<RunError>),
    /// `nvidia-smi mig -lci` failed: the slices' instance ids are unknown.
    InstanceIdsFailed(CommandFailure),
    /// `nvidia-smi mig -lci` printed what cannot be read: the slices' instance ids are unknown.
    InstanceIdsUnreadable(Arc<miggate_smi::Error>),
    /// A GPU's compute instances (`mig -lci`) do not line up with its slices (`-L`): their
    /// instance ids are unknown.
    InstancesMisaligned {
        /// The GPU's index.
        index: u32,
        /// How many compute instances `mig -lci` lists on it.
        instances: usize,
        /// How many slices `-L` lists under it.
        devices: usize,
    },

    /// NVML could not be used, so nvidia-smi was read instead.
    NvmlUnavailable {
        /// The loader's or NVML's message, as [`Error::NvmlUnavailable`](crate::Error::NvmlUnavailable) has it.
        message: String,
    },
    /// The NVML library does not export a function: its fact is unknown on every device (said
    /// once).
    NvmlNotExported {
        /// The fact (`the product name`).
        what: &'static str,
        /// The function (`nvmlDeviceGetName`).
        call: &'static str,
    },
    /// An NVML call failed: its fact is unknown.
    NvmlUnreadable {
        /// What was read.
        at: NvmlSubject,
        /// The fact.
        what: &'static str,
        /// The function.
        call: &'static str,
        /// NVML's error, as a sentence, escaped.
        why: String,
    },
    /// A GPU's MIG mode could not be read: its devices are unknown.
    NvmlMigModeUnreadable {
        /// The GPU.
        at: NvmlSubject,
        /// NVML's error, as a sentence, escaped.
        why: String,
    },
    /// How many MIG devices a GPU can hold could not be read: its devices are unknown.
    NvmlMigCountUnreadable {
        /// The GPU.
        at: NvmlSubject,
        /// NVML's error, as a sentence, escaped.
        why: String,
    },
    /// A MIG device this process may not use (another container's): left out.
    NvmlMigDeviceDenied {
        /// The GPU.
        at: NvmlSubject,
        /// The MIG device's position on it.
        position: u32,
    },
    /// A MIG device could not be read: the GPU's devices are unknown.
    NvmlMigDeviceUnreadable {
        /// The GPU.
        at: NvmlSubject,
        /// The MIG device's position on it.
        position: u32,
        /// NVML's error, as a sentence, escaped.
        why: String,
    },
    /// A MIG device's name does not end in a MIG profile: its profile is unknown.
    NvmlProfileNotInName {
        /// The MIG device.
        at: NvmlSubject,
        /// Its name, as NVML gave it.
        name: String,
        /// The text taken as its profile.
        profile: String,
        /// Why that text is not a profile.
        why: String,
    },
    /// A MIG device's name could not be read: its profile is unknown.
    NvmlNameUnreadable {
        /// The MIG device.
        at: NvmlSubject,
        /// NVML's error, as a sentence, escaped.
        why: String,
    },

    /// The last warning a manifest carries when there were more than it keeps.
    MoreLeftOut(usize),
}

/// A GPU as the nvidia-smi backend's warnings name it: `GPU <index> (<uuid>)`, with `?` and
/// `UUID unknown` for what neither command said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmiGpu {
    /// Its index.
    pub index: Option<u32>,
    /// Its UUID (a checked one: nothing in it needs escaping).
    pub uuid: Option<GpuUuid>,
}

impl fmt::Display for SmiGpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GPU ")?;
        match self.index {
            Some(i) => write!(f, "{i}")?,
            None => f.write_str("?")?,
        }
        let uuid = self.uuid.as_ref().map_or("UUID unknown", GpuUuid::as_str);
        write!(f, " ({uuid})")
    }
}

/// What an NVML warning is about: the library itself, a GPU, or a MIG device, each with its
/// UUID once that was read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NvmlSubject {
    /// The library and the driver (`NVML`).
    Library,
    /// A GPU (`GPU 0 (GPU-…)`).
    Gpu {
        /// Its index.
        index: u32,
        /// Its UUID, when read.
        uuid: Option<GpuUuid>,
    },
    /// A MIG device (`GPU 0 MIG device 1 (MIG-…)`).
    MigDevice {
        /// Its GPU's index.
        gpu: u32,
        /// Its position among the GPU's MIG devices.
        position: u32,
        /// Its UUID, when read.
        uuid: Option<DeviceUuid>,
    },
}

impl fmt::Display for NvmlSubject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NvmlSubject::Library => f.write_str("NVML"),
            NvmlSubject::Gpu { index, uuid } => {
                write!(f, "GPU {index}")?;
                match uuid {
                    Some(u) => write!(f, " ({u})"),
                    None => Ok(()),
                }
            }
            NvmlSubject::MigDevice { gpu, position, uuid } => {
                write!(f, "GPU {gpu} MIG device {position}")?;
                match uuid {
                    Some(u) => write!(f, " ({u})"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// A command that ran and failed: what it printed (both streams), and how it exited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandFailure {
    /// Its output, stdout then stderr (outside text: quoted escaped).
    pub output: String,
    /// How it exited.
    pub status: ExitStatus,
}

/// What it said, quoted; its exit status when it said nothing.
impl fmt::Display for CommandFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let said = self.output.trim();
        if said.is_empty() {
            write!(f, "exit {}", self.status)
        } else {
            write!(f, "`{}`", escape(said))
        }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.fmt_joined(f) {
            Some(written) => written,
            None => self.fmt_run(f),
        }
    }
}

impl Warning {
    /// The words of a parser's warning, or of one from joining `-L` with `--query-gpu`;
    /// `None` for the others.
    fn fmt_joined(&self, f: &mut fmt::Formatter<'_>) -> Option<fmt::Result> {
        let (list, query) = (list::COMMAND, query::COMMAND);
        Some(match self {
            Warning::Smi(w) => fmt::Display::fmt(w, f),
            Warning::QueryGpuAgain { line, uuid } => {
                write!(f, "{query} line {line}: GPU {uuid} listed again; dropped")
            }
            Warning::WithoutQueryRow(gpu) => write!(
                f,
                "{gpu} is listed by {list} but has no {query} row: its MIG mode is unknown"
            ),
            Warning::MigModeUnknownWithoutListing(gpu) => write!(
                f,
                "{gpu} has an unknown MIG mode and {list} could not be read: its slices, and so the devices, are unknown"
            ),
            Warning::MigOnWithoutListing(gpu) => write!(
                f,
                "{gpu} has MIG enabled and {list} could not be read: its slices, and so the devices, are unknown"
            ),
            Warning::MigOffWithSlices(gpu) => write!(
                f,
                "{gpu} reports MIG off but {list} lists MIG devices under it; kept as slices"
            ),
            Warning::MigOnNotListed(gpu) => write!(
                f,
                "{gpu} has MIG enabled but is not in {list}: its slices, and so the devices, are unknown"
            ),
            Warning::MigModeUnknownNotListed(gpu) => write!(
                f,
                "{gpu} is not in {list} and its MIG mode is unknown: the devices are unknown"
            ),
            Warning::NotListedTakenWhole(gpu) => {
                write!(f, "{gpu} is not in {list}; taken as a whole GPU")
            }
            Warning::NoGpuListed => write!(
                f,
                "neither {list} nor {query} listed a GPU: the devices are unknown"
            ),
            Warning::DriverVersionsDiffer { first, other } => {
                let (first, other) = (escape(first), escape(other));
                write!(
                    f,
                    "{query} reports driver versions `{first}` and `{other}`; recorded `{first}`"
                )
            }
            _ => return None,
        })
    }

    /// The words of a warning from running nvidia-smi or reading NVML (every one
    /// [`Warning::fmt_joined`] leaves; each of its variants named, so a new one is placed).
    fn fmt_run(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = list::COMMAND;
        match self {
            Warning::HeldOpen {
                command,
                stream,
                dropped,
            } => {
                write!(
                    f,
                    "`{}`: {stream} was still held open 2 s after the command exited (a process it started left its process group); what was read until then is used",
                    escape(command)
                )?;
                if *dropped > 0 {
                    write!(f, "; {dropped} bytes of an unfinished last line were dropped")?;
                }
                Ok(())
            }
            Warning::ListingUnreadable(e) => write!(f, "{list}: {e}"),
            Warning::ListingNotRun(e) => write!(f, "{list}: {e}"),
            Warning::ListingFailed(failure) => write!(f, "{list} failed: {failure}"),
            Warning::VersionNotRun(e) => write!(f, "nvidia-smi --version: {e}"),
            Warning::VersionFailed(failure) => write!(f, "nvidia-smi --version failed: {failure}"),
            Warning::InstanceIdsNotRun(e) => {
                write!(f, "nvidia-smi mig -lci: instance ids not read: {e}")
            }
            Warning::InstanceIdsFailed(failure) => {
                write!(f, "nvidia-smi mig -lci: instance ids not read: {failure}")
            }
            Warning::InstanceIdsUnreadable(e) => write!(f, "instance ids not read: {e}"),
            Warning::InstancesMisaligned {
                index,
                instances,
                devices,
            } => write!(
                f,
                "GPU {index}: `mig -lci` lists {instances} compute instances that do not line up with the {devices} MIG devices of `-L`; instance ids left unknown"
            ),
            Warning::NvmlUnavailable { message } => {
                write!(f, "NVML is not available ({message}); read through nvidia-smi")
            }
            Warning::NvmlNotExported { what, call } => write!(
                f,
                "NVML: {what} is unknown: this library does not export {call} (driver too old?)"
            ),
            Warning::NvmlUnreadable { at, what, call, why } => {
                write!(f, "{at}: cannot read {what} ({call}: {why})")
            }
            Warning::NvmlMigModeUnreadable { at, why } => write!(
                f,
                "{at}: cannot read the MIG mode (nvmlDeviceGetMigMode: {why}); the device list is unknown"
            ),
            Warning::NvmlMigCountUnreadable { at, why } => write!(
                f,
                "{at}: cannot read how many MIG devices it can hold (nvmlDeviceGetMaxMigDeviceCount: {why}); the device list is unknown"
            ),
            Warning::NvmlMigDeviceDenied { at, position } => write!(
                f,
                "{at}: MIG device {position} is not accessible to this process (no permission); left out"
            ),
            Warning::NvmlMigDeviceUnreadable { at, position, why } => write!(
                f,
                "{at}: cannot read MIG device {position} (nvmlDeviceGetMigDeviceHandleByIndex: {why}); the device list is unknown"
            ),
            // The parenthesis holds the words of `miggate_compat::Error::InvalidProfile`.
            Warning::NvmlProfileNotInName {
                at,
                name,
                profile,
                why,
            } => write!(
                f,
                "{at}: MIG profile unknown: its name `{}` does not end in a profile (`{profile}` is not a MIG profile: {why})",
                escape(name)
            ),
            Warning::NvmlNameUnreadable { at, why } => write!(
                f,
                "{at}: MIG profile unknown: cannot read its name (nvmlDeviceGetName: {why})"
            ),
            Warning::MoreLeftOut(n) => write!(f, "{n} more warnings left out"),
            Warning::Smi(_)
            | Warning::QueryGpuAgain { .. }
            | Warning::WithoutQueryRow(_)
            | Warning::MigModeUnknownWithoutListing(_)
            | Warning::MigOnWithoutListing(_)
            | Warning::MigOffWithSlices(_)
            | Warning::MigOnNotListed(_)
            | Warning::MigModeUnknownNotListed(_)
            | Warning::NotListedTakenWhole(_)
            | Warning::NoGpuListed
            | Warning::DriverVersionsDiffer { .. } => Ok(()),
        }
    }
}

impl From<miggate_smi::Warning> for Warning {
    fn from(w: miggate_smi::Warning) -> Self {
        Warning::Smi(w)
    }
}

impl Warning {
    /// Whether the warning says `text`, word for word: rendered piece by piece against it, so
    /// nothing is allocated.
    pub fn says(&self, text: &str) -> bool {
        miggate_compat::warning::displays_as(self, text)
    }
}

impl PartialEq for Warning {
    fn eq(&self, other: &Warning) -> bool {
        self.says(&other.to_string())
    }
}

impl Eq for Warning {}

impl PartialEq<str> for Warning {
    fn eq(&self, other: &str) -> bool {
        self.says(other)
    }
}

impl PartialEq<&str> for Warning {
    fn eq(&self, other: &&str) -> bool {
        self.says(other)
    }
}

impl PartialEq<String> for Warning {
    fn eq(&self, other: &String) -> bool {
        self.says(other)
    }
}

/// Written as its words: [`NvidiaFacts`](crate::NvidiaFacts)' `warnings` serialize as a list
/// of strings.
impl Serialize for Warning {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The profile warning repeats the words of the error it was read from.
    #[test]
    fn a_name_without_a_profile_says_what_the_reader_said() {
        let error = "HBM3".parse::<miggate_compat::MigProfile>().unwrap_err();
        let miggate_compat::Error::InvalidProfile { profile, why } = &error else {
            panic!("not a profile error: {error}");
        };
        let w = Warning::NvmlProfileNotInName {
            at: NvmlSubject::Library,
            name: "NVIDIA H100 80GB HBM3".into(),
            profile: profile.clone(),
            why: why.clone(),
        };
        assert_eq!(
            w.to_string(),
            format!(
                "NVML: MIG profile unknown: its name `NVIDIA H100 80GB HBM3` does not end in a profile ({error})"
            )
        );
    }

    #[test]
    fn gpus_are_named_with_what_is_known() {
        let uuid: GpuUuid = "GPU-1".parse().unwrap();
        let named = |index, uuid| SmiGpu { index, uuid }.to_string();
        assert_eq!(named(Some(0), Some(uuid.clone())), "GPU 0 (GPU-1)");
        assert_eq!(named(None, None), "GPU ? (UUID unknown)");
        assert_eq!(
            NvmlSubject::MigDevice {
                gpu: 1,
                position: 2,
                uuid: None
            }
            .to_string(),
            "GPU 1 MIG device 2"
        );
        assert_eq!(
            NvmlSubject::Gpu {
                index: 0,
                uuid: Some(uuid)
            }
            .to_string(),
            "GPU 0 (GPU-1)"
        );
    }
}
