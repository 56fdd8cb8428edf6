//! What an operator should know about an inventory, kept typed until a warning or a log line
//! writes it: each [`Note`] holds what its source saw, and its `Display` holds the words (one
//! home for them; the inventory tests and the webhook's snapshots hold the text).
//!
//! Outside text (a node's name, a label's value) is kept as read and quoted when shown.

use std::fmt;
use std::sync::Arc;

use miggate_crds::RecoveredReason;

use super::{DRA_DRIVER, MIG_CONFIG_STATE, Source, quote};
use crate::error::Error;

/// Why MIG is certainly off on every GPU of a node, as GFD's labels say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigOff {
    /// `nvidia.com/gpu.product` names a known part that cannot run MIG.
    Part,
    /// `nvidia.com/mig.capable=false`.
    NotCapable,
    /// mig-manager applied `all-disabled` (`nvidia.com/mig.config.state=success`).
    Disabled,
    /// A MIG-capable GPU under the single strategy whose product is plain, with no layout from
    /// mig-manager: GFD names a cut GPU `<model>-MIG-<profile>` under that strategy, so none
    /// is cut.
    Uncut,
}

impl MigOff {
    /// The labels that say so.
    pub fn labels(self) -> &'static str {
        match self {
            MigOff::Part => "nvidia.com/gpu.product names a part that cannot run MIG",
            MigOff::NotCapable => "nvidia.com/mig.capable=false",
            MigOff::Disabled => "nvidia.com/mig.config=all-disabled, nvidia.com/mig.config.state=success",
            MigOff::Uncut => {
                "nvidia.com/mig.capable=true, nvidia.com/mig.strategy=single, a nvidia.com/gpu.product without -MIG-<profile>, no nvidia.com/mig.config"
            }
        }
    }
}

/// A better source of a node's inventory, present but passed over, with why.
#[derive(Debug, Clone)]
pub enum PassedOver {
    /// A source that cannot be read: its [`Error::Inventory`], naming the source and node.
    Unreadable(Arc<Error>),
    /// A store's file about the node that cannot be used (the webhook's file store).
    StoreFile {
        /// The file, relative to the store's root.
        file: String,
        /// Why it cannot be used.
        why: Arc<dyn std::error::Error + Send + Sync>,
    },
}

impl fmt::Display for PassedOver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PassedOver::Unreadable(error) => error.fmt(f),
            PassedOver::StoreFile { file, why } => write!(
                f,
                "store file {} cannot be used: {why}",
                miggate_compat::escape::escape_within(file, 256)
            ),
        }
    }
}

/// Two reasons are the same when they say the same: the errors inside hold no identity.
impl PartialEq for PassedOver {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for PassedOver {}

/// One note on an inventory. Each names its source first (`GFD labels: …`), so a warning that
/// carries it says where the fact came from.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Note {
    /// A better source was passed over; `used` was read instead.
    PassedOver {
        /// Why it was passed over.
        why: PassedOver,
        /// The source read instead.
        used: Source,
    },
    /// mig-manager is changing the node's MIG layout, or failed to: every fact is unknown.
    Reconfiguring {
        /// The source that was read.
        source: Source,
        /// The node, when the source names it.
        node: Option<String>,
        /// mig-manager's `nvidia.com/mig.config.state`.
        state: String,
    },
    /// `Node.status.nodeInfo` has no kernel version.
    NoKernel(Source),

    /// The `GpuNode`'s capture could not read the devices.
    DevicesUnread {
        /// The `GpuNode`.
        node: String,
    },
    /// The `GpuNode`'s boot recovery has not finished (or failed).
    Recovering {
        /// The `GpuNode`.
        node: String,
        /// Its `Recovered` condition's reason.
        reason: RecoveredReason,
    },
    /// The `GpuNode` holds fields this version does not read.
    UnreadFields {
        /// The `GpuNode`.
        node: String,
        /// How many.
        count: usize,
    },

    /// The DRA driver's DynamicMIG: judged by what the GPUs' counters can supply.
    DynamicMig {
        /// The node.
        node: String,
        /// How many devices the counters could make.
        offered: usize,
    },
    /// The DRA pool read.
    Pool {
        /// How many slices the pool has at its newest generation.
        slices: usize,
        /// The pool's name.
        pool: String,
        /// Its newest generation.
        generation: i64,
    },
    /// Devices of the pool that are neither a GPU nor a MIG slice, left out.
    NotGpus(usize),

    /// GFD labels count per node: no UUIDs, no parent GPUs.
    CountsOnly,
    /// MIG slices and no mig-manager state: the layout is read as GFD counted it.
    NoMigManager,
    /// No `nvidia.com/gpu.product`: the model comes from a profile's own product label.
    ModelFromProfile {
        /// That label's key, without `nvidia.com/`.
        key: String,
    },
    /// No count and nothing to count from: the GPU checks are unknown.
    NoGpuCount,
    /// Single strategy without a count: the slices counted from the device plugin's capacity.
    SingleCounted {
        /// How many.
        count: usize,
        /// The profile the product label names.
        profile: String,
        /// `nvidia.com/gpu.product`.
        product: String,
    },
    /// Single strategy without a count or capacity: slices of one profile, how many unknown.
    SingleUncounted {
        /// The profile the product label names.
        profile: String,
        /// `nvidia.com/gpu.product`.
        product: String,
    },
    /// Mixed strategy without a count: the slices are exact and no GPU is whole.
    SlicesNoneWhole,
    /// Mixed strategy without a count: the slices are exact, the whole GPUs not known.
    SlicesWholeUnknown,
    /// MIG off without a count: whole GPUs counted from the device plugin's capacity.
    WholeCounted {
        /// Why MIG is off.
        off: MigOff,
        /// How many.
        count: usize,
    },
    /// MIG off without a count or capacity: whole GPUs, how many unknown.
    WholeUncounted {
        /// Why MIG is off.
        off: MigOff,
    },
    /// MIG off as read from a plain product under the single strategy, with a count: the
    /// GPUs counted are whole.
    WholeOff {
        /// Why MIG is off.
        off: MigOff,
    },
    /// Only the product is known: GPUs of a kind and number not known.
    ModelOnly {
        /// `nvidia.com/gpu.product`.
        product: String,
    },
    /// Cut and whole GPUs share the count: the whole ones are an upper bound.
    WholeAtMost(usize),
    /// A product label that names a vGPU: compared by that name.
    Vgpu {
        /// The label's value.
        label: String,
        /// The name the guest's `nvidia-smi` prints.
        product: String,
        /// The vGPU profile.
        profile: String,
    },
    /// A product label this version cannot map back to a model.
    UnknownProduct {
        /// The label's value.
        label: String,
    },
    /// A MIG profile label this version does not read.
    UnknownProfile {
        /// The profile as the label names it.
        text: String,
    },
}

impl Note {
    /// The source the note is about.
    pub fn source(&self) -> Source {
        match self {
            Note::PassedOver { used, .. } => *used,
            Note::Reconfiguring { source, .. } | Note::NoKernel(source) => *source,
            Note::DevicesUnread { .. } | Note::Recovering { .. } | Note::UnreadFields { .. } => {
                Source::GpuNode
            }
            Note::DynamicMig { .. } | Note::Pool { .. } | Note::NotGpus(_) => Source::ResourceSlice,
            // Listed, not a wildcard: a new note names its source here or does not compile.
            Note::CountsOnly
            | Note::NoMigManager
            | Note::ModelFromProfile { .. }
            | Note::NoGpuCount
            | Note::SingleCounted { .. }
            | Note::SingleUncounted { .. }
            | Note::SlicesNoneWhole
            | Note::SlicesWholeUnknown
            | Note::WholeCounted { .. }
            | Note::WholeUncounted { .. }
            | Note::WholeOff { .. }
            | Note::ModelOnly { .. }
            | Note::WholeAtMost(_)
            | Note::Vgpu { .. }
            | Note::UnknownProduct { .. }
            | Note::UnknownProfile { .. } => Source::GfdLabels,
        }
    }
}

/// GFD's note where no count is labelled and the slices are counted per profile.
const SLICES: &str = "GFD labels: no nvidia.com/gpu.count: the MIG slices are counted per profile (nvidia.com/mig-<profile>.count, mixed strategy)";

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Note::PassedOver { why, used } => write!(f, "{why}; used {used} instead"),
            Note::Reconfiguring { source, node, state } => {
                let pending = matches!(state.as_str(), "pending" | "rebooting");
                let node = node.as_deref().map(quote).unwrap_or_default();
                let state = quote(state);
                if pending {
                    write!(
                        f,
                        "{source}: node {node} is being reconfigured ({MIG_CONFIG_STATE}={state}): its GPU and host facts are unknown until mig-manager reports success"
                    )
                } else {
                    write!(
                        f,
                        "{source}: node {node} has {MIG_CONFIG_STATE}={state}, not success: mig-manager did not apply its MIG layout, so its GPU and host facts are unknown"
                    )
                }
            }
            Note::NoKernel(source) => {
                write!(
                    f,
                    "{source}: no Node.status.nodeInfo kernelVersion; kernel checks are unknown"
                )
            }
            Note::DevicesUnread { node } => write!(
                f,
                "GpuNode {}: the capture could not read the devices; GPU checks are unknown",
                quote(node)
            ),
            Note::Recovering { node, reason } => write!(
                f,
                "GpuNode {}: boot recovery is {reason}; the recorded layout may not be the node's yet",
                quote(node)
            ),
            Note::UnreadFields { node, count } => write!(
                f,
                "GpuNode {}: {count} field(s) this version does not read",
                quote(node)
            ),
            Note::DynamicMig { node, offered } => write!(
                f,
                "ResourceSlice: DynamicMIG: node {} partitions its GPUs on demand; judged by what each GPU's shared counters can supply ({offered} possible devices), not by slices that exist",
                quote(node)
            ),
            Note::Pool {
                slices,
                pool,
                generation,
            } => write!(
                f,
                "ResourceSlice: {slices} slice(s) of driver {DRA_DRIVER}, pool {} generation {generation}",
                quote(pool)
            ),
            Note::NotGpus(n) => write!(
                f,
                "ResourceSlice: {n} device(s) that are neither a GPU nor a MIG slice (vfio) left out"
            ),
            Note::CountsOnly
            | Note::NoMigManager
            | Note::ModelFromProfile { .. }
            | Note::NoGpuCount
            | Note::SingleCounted { .. }
            | Note::SingleUncounted { .. }
            | Note::SlicesNoneWhole
            | Note::SlicesWholeUnknown
            | Note::WholeCounted { .. }
            | Note::WholeUncounted { .. }
            | Note::WholeOff { .. }
            | Note::ModelOnly { .. }
            | Note::WholeAtMost(..)
            | Note::Vgpu { .. }
            | Note::UnknownProduct { .. }
            | Note::UnknownProfile { .. } => self.fmt_gfd(f),
        }
    }
}

impl Note {
    /// The words of a note GFD's labels give ([`Display`](fmt::Display) sends only those here).
    fn fmt_gfd(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Note::CountsOnly => f.write_str("GFD labels: counts per node only; device UUIDs and parent GPUs unknown"),
            Note::NoMigManager => f.write_str(
                "GFD labels: no mig-manager state (nvidia.com/mig.config.state): the MIG layout is read as GFD counted it",
            ),
            Note::ModelFromProfile { key } => write!(
                f,
                "GFD labels: no nvidia.com/gpu.product: the GPU model is read from nvidia.com/{}",
                quote(key)
            ),
            Note::NoGpuCount => f.write_str(
                "GFD labels: no nvidia.com/gpu.count: how many GPUs the node has is unknown, so the GPU checks are unknown",
            ),
            Note::SingleCounted {
                count,
                profile,
                product,
            } => write!(
                f,
                "GFD labels: no nvidia.com/gpu.count: {count} `{}` slices (nvidia.com/gpu.product `{}`) counted from the node's nvidia.com/gpu capacity over nvidia.com/gpu.replicas",
                quote(profile),
                quote(product)
            ),
            Note::SingleUncounted { profile, product } => write!(
                f,
                "GFD labels: no nvidia.com/gpu.count: every GPU is cut into `{}` slices (nvidia.com/gpu.product `{}`, single strategy), how many is unknown; no other profile and no whole GPU",
                quote(profile),
                quote(product)
            ),
            Note::SlicesNoneWhole => write!(f, "{SLICES}; no GPU is whole (nvidia.com/gpu.replicas=0)"),
            Note::SlicesWholeUnknown => write!(
                f,
                "{SLICES}; how many GPUs are whole is unknown, possibly none (no nvidia.com/gpu.replicas=0)"
            ),
            Note::WholeCounted { off, count } => write!(
                f,
                "GFD labels: no nvidia.com/gpu.count: MIG is off ({}); {count} whole GPUs counted from the node's nvidia.com/gpu capacity over nvidia.com/gpu.replicas",
                off.labels()
            ),
            Note::WholeUncounted { off } => write!(
                f,
                "GFD labels: no nvidia.com/gpu.count: MIG is off ({}), so the GPUs are whole; how many is unknown",
                off.labels()
            ),
            Note::WholeOff { off } => write!(
                f,
                "GFD labels: MIG is off ({}), so the GPUs counted are whole and none is cut",
                off.labels()
            ),
            Note::ModelOnly { product } => write!(
                f,
                "GFD labels: no nvidia.com/gpu.count: the GPUs are `{}` (nvidia.com/gpu.product); whether any is cut (MIG) and how many there are is unknown",
                quote(product)
            ),
            Note::WholeAtMost(most) => write!(
                f,
                "GFD labels: cut and whole GPUs share nvidia.com/gpu.count and the node's nvidia.com/gpu capacity does not say how many are whole; at most {most} counted"
            ),
            Note::Vgpu {
                label,
                product,
                profile,
            } => write!(
                f,
                "GFD labels: {} is a vGPU ({} of the {} profile); it is compared by that name, so only a checkpoint taken on the same vGPU profile fits",
                quote(label),
                quote(product),
                quote(profile)
            ),
            Note::UnknownProduct { label } => write!(
                f,
                "GFD labels: product {} is not a name miggate can map back; GPU model unknown",
                quote(label)
            ),
            Note::UnknownProfile { text } => write!(
                f,
                "GFD labels: MIG profile {} is not one miggate reads; its shape is unknown",
                quote(text)
            ),
            // Display writes every other note itself.
            _ => Ok(()),
        }
    }
}

/// Notes serialize as their text: snapshots and logs hold the words.
impl serde::Serialize for Note {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::error::GpuNodeProblem;

    /// One of each note, with outside text that must be escaped where it is quoted.
    fn every_note() -> Vec<Note> {
        let node = "gpu-node-7".to_string();
        let passed_over = PassedOver::Unreadable(Arc::new(Error::Inventory {
            origin: Source::GpuNode.as_str(),
            node: node.clone(),
            why: Box::new(
                GpuNodeProblem::OtherNode {
                    name: node.clone(),
                    captured_on: "gpu-node-1".into(),
                }
                .into(),
            ),
        }));
        vec![
            Note::PassedOver {
                why: passed_over,
                used: Source::GfdLabels,
            },
            Note::Reconfiguring {
                source: Source::GfdLabels,
                node: Some(node.clone()),
                state: "pending".into(),
            },
            Note::Reconfiguring {
                source: Source::ResourceSlice,
                node: None,
                state: "failed\x1b[2J".into(),
            },
            Note::NoKernel(Source::ResourceSlice),
            Note::DevicesUnread { node: node.clone() },
            Note::Recovering {
                node: node.clone(),
                reason: RecoveredReason::Recovering,
            },
            Note::UnreadFields {
                node: node.clone(),
                count: 2,
            },
            Note::DynamicMig {
                node: node.clone(),
                offered: 14,
            },
            Note::Pool {
                slices: 1,
                pool: node,
                generation: 3,
            },
            Note::NotGpus(2),
            Note::CountsOnly,
            Note::NoMigManager,
            Note::ModelFromProfile {
                key: "mig-1g.10gb.product".into(),
            },
            Note::NoGpuCount,
            Note::SingleCounted {
                count: 7,
                profile: "1g.10gb".into(),
                product: "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb".into(),
            },
            Note::SingleUncounted {
                profile: "1g.10gb".into(),
                product: "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb".into(),
            },
            Note::SlicesNoneWhole,
            Note::SlicesWholeUnknown,
            Note::WholeCounted {
                off: MigOff::NotCapable,
                count: 8,
            },
            Note::WholeUncounted {
                off: MigOff::Disabled,
            },
            Note::WholeOff { off: MigOff::Uncut },
            Note::ModelOnly {
                product: "NVIDIA-A100-SXM4-40GB".into(),
            },
            Note::WholeAtMost(3),
            Note::Vgpu {
                label: "GRID-A100-40C".into(),
                product: "GRID A100-40C".into(),
                profile: "40C".into(),
            },
            Note::UnknownProduct {
                label: "Tesla\u{202e}X".into(),
            },
            Note::UnknownProfile {
                text: "9g.999gb".into(),
            },
        ]
    }

    #[test]
    fn every_note_names_its_source_first() {
        for note in every_note() {
            let text = note.to_string();
            let first = match &note {
                Note::PassedOver { why, .. } => why.to_string(),
                _ => note.source().as_str().to_string(),
            };
            assert!(text.starts_with(first.split(' ').next().unwrap()), "{text}");
            assert!(!text.contains('\x1b') && !text.contains('\u{202e}'), "{text}");
        }
    }

    #[test]
    fn wording() {
        let texts: Vec<String> = every_note().iter().map(ToString::to_string).collect();
        insta::assert_yaml_snapshot!(texts);
    }
}
