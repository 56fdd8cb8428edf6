//! Source 1: the node's `GpuNode`, as `miggate publish` (or boot recovery) wrote it.

use miggate_crds::{GpuNode, RecoveredReason};

use super::{Inventory, MAX_NOTES, Note, Source, unreadable};
use crate::error::{Error, GpuNodeProblem};

/// The inventory a `GpuNode` holds: its `spec.manifest`, without any pod facts (a node
/// inventory has none).
///
/// Unreadable (an error, so [`best`](super::best) tries the next source) when it has no name,
/// or when its manifest says it was captured on another node: judging one node by another's
/// GPUs would be worse than not judging it. Devices the capture could not read stay unknown,
/// with a note; boot recovery that has not finished is noted too.
pub fn from_gpu_node(gpu_node: &GpuNode) -> Result<Option<Inventory>, Error> {
    let Some(name) = gpu_node.metadata.name.as_deref() else {
        return Err(unreadable(Source::GpuNode, "", GpuNodeProblem::Unnamed));
    };
    let mut manifest = gpu_node.spec.manifest.clone();
    if let Some(captured_on) = manifest.host.as_ref().and_then(|h| h.node_name.as_deref())
        && captured_on != name
    {
        return Err(unreadable(
            Source::GpuNode,
            name,
            GpuNodeProblem::OtherNode {
                name: name.to_string(),
                captured_on: captured_on.to_string(),
            },
        ));
    }
    manifest.pod = None;
    let mut notes = Vec::new();
    if manifest.devices().is_none() {
        notes.push(Note::DevicesUnread {
            node: name.to_string(),
        });
    }
    match gpu_node.recovered() {
        Some(RecoveredReason::Ready) | None => {}
        Some(reason) => notes.push(Note::Recovering {
            node: name.to_string(),
            reason,
        }),
    }
    let unknown = manifest.unknown_fields().len();
    if unknown > 0 {
        notes.push(Note::UnreadFields {
            node: name.to_string(),
            count: unknown,
        });
    }
    notes.truncate(MAX_NOTES);
    Ok(Some(Inventory {
        manifest: std::sync::Arc::new(manifest),
        source: Source::GpuNode,
        notes,
        passed_over: Vec::new(),
        slices_listed: false,
        supply: None,
    }))
}
