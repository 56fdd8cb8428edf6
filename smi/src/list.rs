//! `nvidia-smi -L`: the GPUs a process sees and the MIG slices under each.
//!
//! `-L` is the only nvidia-smi listing that names MIG slices with their profiles, so it is what
//! tells a container holding a `3g.40gb` from one holding the whole card. A slice is joined to
//! its GPU by nesting (the `GPU n:` line above it), never by UUID: containers re-parent slices
//! under `GPU 0`, legacy UUIDs embed the parent and newer ones do not, and pasted output loses
//! UUIDs altogether.
//!
//! Rules the recorded corpus forced (see `testdata/nvidia-smi/SOURCES.md`):
//! - lines are split on white space, not columns (profile names up to 14 characters overflow
//!   the 12-character column; indentation is 0, 1, 2 or 4 spaces, or lost);
//! - a `(UUID: …)` part may be missing (stripped by tools such as PyTorch's `collect_env`);
//! - concatenated outputs repeat a `GPU 0:` header: repeated GPUs are merged and repeated MIG
//!   UUIDs dropped, each with a warning;
//! - MIG lines with no GPU line above them are kept as slices with an unknown parent, never
//!   turned into whole GPUs.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use miggate_compat::{DeviceUuid, GpuUuid, MigProfile, UuidForm};
use serde::Serialize;

use crate::error::Error;
use crate::failure;
use crate::text::{nothing_parsed, number, numbered_lines};
use crate::warning::Warning;

/// The command this parser reads, as named in errors and warnings.
pub const COMMAND: &str = crate::commands::LIST;

const EXPECTED: &str = "`GPU <n>: <name> (UUID: GPU-…)` or `MIG <profile> Device <n>: (UUID: MIG-…)` lines";

/// A parsed `nvidia-smi -L` listing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Listing {
    /// GPUs in the order listed, each with the MIG slices nested under it; a GPU listed twice
    /// (concatenated outputs) appears once.
    pub gpus: Vec<ListedGpu>,
    /// MIG slices with no GPU line above them: their parent is unknown.
    pub orphans: Vec<ListedSlice>,
    /// What was skipped or guessed, each naming the line; serialized as its words.
    pub warnings: Vec<Warning>,
}

/// A `GPU <index>: <name> (UUID: GPU-…)` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListedGpu {
    /// The index nvidia-smi printed (inside a container, the container's own numbering).
    pub index: u32,
    /// The product name; `None` when the line had none.
    pub name: Option<String>,
    /// The `GPU-…` UUID; `None` when it was stripped.
    pub uuid: Option<GpuUuid>,
    /// The 1-based line it was read from (the first, when it was listed again).
    pub line: usize,
    /// The MIG lines nested under it, in listed order.
    pub slices: Vec<ListedSlice>,
}

/// A `MIG <profile> Device <n>: (UUID: MIG-…)` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListedSlice {
    /// The profile; `None` when missing or not of the form nvidia-smi prints.
    pub profile: Option<MigProfile>,
    /// The profile text when it could not be read as a profile, kept for people.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreadable_profile: Option<String>,
    /// The `Device <n>` number: per parent GPU, not a GPU instance id.
    pub device: Option<u32>,
    /// The `MIG-…` UUID (either form); `None` when it was stripped.
    pub uuid: Option<DeviceUuid>,
    /// The GPU instance id, when the UUID is the legacy `MIG-GPU-<parent>/<gi>/<ci>` form.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_instance_id: Option<u32>,
    /// The compute instance id, from a legacy UUID as above.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute_instance_id: Option<u32>,
    /// The parent `GPU-…` UUID embedded in a legacy UUID.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub legacy_parent: Option<GpuUuid>,
    /// The 1-based line it was read from.
    pub line: usize,
}

/// Reads `nvidia-smi -L` output.
///
/// Lines that are neither GPU nor MIG lines are skipped with a warning. Known failure messages
/// become their typed errors (see [`failure::classify`]); a UUID that is not in a form
/// nvidia-smi prints is an [`Error::InvalidUuid`] naming the line (it is never recorded, and a
/// listing that prints one cannot be trusted); output in which nothing parses is an
/// [`Error::Parse`] naming its first line.
///
/// Linear in the size of the text: repeated GPUs and MIG UUIDs are found through hash maps.
pub fn parse(text: &str) -> Result<Listing, Error> {
    if let Some(err) = failure::classify(text) {
        return Err(err);
    }
    let mut b = Builder::default();
    // Index into `b.out.gpus` of the GPU the next MIG line nests under.
    let mut current: Option<usize> = None;
    for (n, raw) in numbered_lines(text) {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(gpu) = gpu_line(line, n, &mut b.out.warnings)? {
            current = Some(b.add_gpu(gpu));
        } else if let Some(slice) = mig_line(line, n, &mut b.out.warnings)? {
            b.add_slice(current, slice);
        } else {
            b.out.warnings.push(Warning::ListLineSkipped {
                line: n,
                text: line.to_string(),
            });
        }
    }
    let out = b.out;
    if out.gpus.is_empty() && out.orphans.is_empty() {
        return Err(nothing_parsed(COMMAND, text, EXPECTED));
    }
    Ok(out)
}

/// The listing being built, with the maps that find a repeated GPU or MIG UUID in constant time.
#[derive(Default)]
struct Builder {
    out: Listing,
    /// Position in `out.gpus` of each GPU UUID.
    by_uuid: HashMap<GpuUuid, usize>,
    /// Position in `out.gpus` of each GPU without a UUID, by index and name.
    by_index_and_name: HashMap<(u32, Option<String>), usize>,
    /// The line of the first GPU listed with each index.
    first_with_index: HashMap<u32, usize>,
    /// The line each MIG UUID was first listed at.
    slice_lines: HashMap<DeviceUuid, usize>,
}

impl Builder {
    /// Adds a GPU line, merging it into an earlier one that is the same GPU; returns its position.
    fn add_gpu(&mut self, gpu: ListedGpu) -> usize {
        let out = &mut self.out;
        let at = out.gpus.len();
        let same = match &gpu.uuid {
            Some(uuid) => match self.by_uuid.entry(uuid.clone()) {
                Entry::Occupied(e) => Some(*e.get()),
                Entry::Vacant(e) => {
                    e.insert(at);
                    None
                }
            },
            None => match self.by_index_and_name.entry((gpu.index, gpu.name.clone())) {
                Entry::Occupied(e) => Some(*e.get()),
                Entry::Vacant(e) => {
                    e.insert(at);
                    None
                }
            },
        };
        if let Some(i) = same {
            out.warnings.push(Warning::ListGpuAgain {
                line: gpu.line,
                index: gpu.index,
                first: out.gpus.get(i).map_or(0, |g| g.line),
                uuid: gpu.uuid,
            });
            return i;
        }
        match self.first_with_index.entry(gpu.index) {
            Entry::Occupied(e) => out.warnings.push(Warning::ListGpuIndexAgain {
                line: gpu.line,
                index: gpu.index,
                first: *e.get(),
            }),
            Entry::Vacant(e) => {
                e.insert(gpu.line);
            }
        }
        out.gpus.push(gpu);
        at
    }

    /// Adds a MIG line under the GPU above it, or as an orphan; drops a repeated MIG UUID.
    fn add_slice(&mut self, current: Option<usize>, slice: ListedSlice) {
        let out = &mut self.out;
        if let Some(uuid) = &slice.uuid {
            match self.slice_lines.entry(uuid.clone()) {
                Entry::Occupied(first) => {
                    out.warnings.push(Warning::ListSliceAgain {
                        line: slice.line,
                        uuid: uuid.clone(),
                        first: *first.get(),
                    });
                    return;
                }
                Entry::Vacant(e) => {
                    e.insert(slice.line);
                }
            }
        }
        let Some(gpu) = current.and_then(|i| out.gpus.get_mut(i)) else {
            out.warnings.push(Warning::ListOrphanSlice { line: slice.line });
            out.orphans.push(slice);
            return;
        };
        if let (Some(parent), Some(uuid)) = (&slice.legacy_parent, &gpu.uuid)
            && parent != uuid
        {
            out.warnings.push(Warning::ListParentMismatch {
                line: slice.line,
                parent: parent.clone(),
                listed_under: uuid.clone(),
            });
        }
        gpu.slices.push(slice);
    }
}

/// Reads `GPU <index>: <name> (UUID: GPU-…)`; `Ok(None)` when the line is not a GPU line.
fn gpu_line(line: &str, n: usize, warnings: &mut Vec<Warning>) -> Result<Option<ListedGpu>, Error> {
    let Some(rest) = line.strip_prefix("GPU") else {
        return Ok(None);
    };
    if !rest.starts_with(char::is_whitespace) {
        return Ok(None);
    }
    let rest = rest.trim_start();
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let Some(index) = rest.get(..digits).and_then(number) else {
        return Ok(None);
    };
    let Some(body) = rest.get(digits..).and_then(|r| r.trim_start().strip_prefix(':')) else {
        return Ok(None);
    };
    // `GPU 00000000:01:00.0: …` (reset and MIG-mode messages) is a PCI bus id, not an index.
    if !(body.is_empty() || body.starts_with(char::is_whitespace)) {
        return Ok(None);
    }
    let (name, uuid) = match split_uuid(body) {
        Some((name, uuid)) => (name, Some(read_uuid::<GpuUuid>(uuid, n, warnings)?)),
        None => {
            warnings.push(Warning::ListGpuWithoutUuid { line: n, index });
            (body.trim(), None)
        }
    };
    Ok(Some(ListedGpu {
        index,
        name: (!name.is_empty()).then(|| name.to_string()),
        uuid,
        line: n,
        slices: Vec::new(),
    }))
}

/// Reads `MIG <profile> Device <n>: (UUID: MIG-…)`; `Ok(None)` when the line is not a MIG line.
fn mig_line(line: &str, n: usize, warnings: &mut Vec<Warning>) -> Result<Option<ListedSlice>, Error> {
    let Some(rest) = line.strip_prefix("MIG") else {
        return Ok(None);
    };
    if !rest.starts_with(char::is_whitespace) {
        return Ok(None);
    }
    let (profile_text, device, tail) = match rest.find("Device") {
        Some(at) => {
            let after = rest[at + "Device".len()..].trim_start();
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            let device = number(&after[..digits]);
            let tail = after[digits..].trim_start();
            let tail = tail.strip_prefix(':').unwrap_or(tail);
            // A profile too long for its column may run into `Device`: split on the keyword.
            (rest[..at].trim(), device, tail)
        }
        None => {
            // No `Device <n>:`: still a MIG line if it carries a UUID.
            let Some(at) = rest.rfind("(UUID:") else {
                return Ok(None);
            };
            warnings.push(Warning::ListSliceWithoutDevice { line: n });
            (rest[..at].trim(), None, &rest[at..])
        }
    };
    let uuid = slice_uuid(tail, n, warnings)?;
    let (profile, unreadable_profile) = slice_profile(profile_text, n, warnings);
    let legacy = uuid.as_ref().and_then(|u| match u.form() {
        UuidForm::LegacyMig {
            gpu_instance,
            compute_instance,
        } => Some((
            u.legacy_gpu_instance()
                .and_then(|(parent, _)| parent.parse::<GpuUuid>().ok()),
            gpu_instance,
            compute_instance,
        )),
        _ => None,
    });
    Ok(Some(ListedSlice {
        profile,
        unreadable_profile,
        device,
        gpu_instance_id: legacy.as_ref().map(|l| l.1),
        compute_instance_id: legacy.as_ref().map(|l| l.2),
        legacy_parent: legacy.and_then(|l| l.0),
        uuid,
        line: n,
    }))
}

/// A MIG line's UUID, from what follows its `Device <n>:`; `None`, with a warning, when the
/// line has none. An error when it is not a UUID or not a slice's.
fn slice_uuid(tail: &str, n: usize, warnings: &mut Vec<Warning>) -> Result<Option<DeviceUuid>, Error> {
    let Some((_, uuid)) = split_uuid(tail) else {
        warnings.push(Warning::ListSliceWithoutUuid { line: n });
        return Ok(None);
    };
    let uuid = read_uuid::<DeviceUuid>(uuid, n, warnings)?;
    if !uuid.is_mig() {
        return Err(invalid_uuid(
            n,
            miggate_compat::Error::InvalidUuid {
                uuid: uuid.to_string(),
                why: "a MIG line's UUID starts with `MIG-`",
            },
        ));
    }
    Ok(Some(uuid))
}

/// A MIG line's profile, or the text that is not one (kept, with a warning: the slice's
/// shape is unknown).
fn slice_profile(text: &str, n: usize, warnings: &mut Vec<Warning>) -> (Option<MigProfile>, Option<String>) {
    if text.is_empty() {
        warnings.push(Warning::ListSliceWithoutProfile { line: n });
        return (None, None);
    }
    match text.parse::<MigProfile>() {
        Ok(p) => (Some(p), None),
        Err(miggate_compat::Error::InvalidProfile { profile, why }) => {
            warnings.push(Warning::ListProfileUnreadable {
                line: n,
                profile,
                why,
            });
            (None, Some(text.to_string()))
        }
        // The profile reader has no other error today; were it to have one, the slice's shape
        // is unknown all the same, and the warning quotes the text with the error's words.
        Err(e) => {
            warnings.push(Warning::ListProfileUnreadable {
                line: n,
                profile: text.to_string(),
                why: e.to_string(),
            });
            (None, Some(text.to_string()))
        }
    }
}

/// Splits `<head> (UUID: <uuid>)` at the last `(UUID:`; the UUID runs to the next `)` (or the
/// line end, if the bracket was cut off).
fn split_uuid(text: &str) -> Option<(&str, &str)> {
    let at = text.rfind("(UUID:")?;
    let inner = &text[at + "(UUID:".len()..];
    let inner = inner.split(')').next().unwrap_or(inner);
    Some((text[..at].trim(), inner.trim()))
}

/// Reads a UUID in a form nvidia-smi prints. White space inside one (a hand-edited
/// `MIG- 1234…`) is removed with a warning; anything else that is not such a UUID (a NUL, a
/// U+FFFD, a `,` or `=`, the wrong prefix) is an error naming the line.
fn read_uuid<U>(uuid: &str, n: usize, warnings: &mut Vec<Warning>) -> Result<U, Error>
where
    U: std::str::FromStr<Err = miggate_compat::Error>,
{
    let mut uuid = uuid.to_string();
    if uuid.contains(char::is_whitespace) {
        uuid.retain(|c| !c.is_whitespace());
        warnings.push(Warning::ListUuidSpaced {
            line: n,
            uuid: uuid.clone(),
        });
    }
    uuid.parse::<U>().map_err(|e| invalid_uuid(n, e))
}

fn invalid_uuid(n: usize, error: miggate_compat::Error) -> Error {
    Error::InvalidUuid {
        at: format!("`{COMMAND}` line {n}"),
        error,
    }
}
