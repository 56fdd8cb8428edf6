//! `miggate where`: which nodes of a store can take a checkpoint.

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use miggate_compat::escape::escape;
use miggate_compat::{GpuManifest, Mode, NodeFit, ReadOptions, Warning, rank_nodes_listed};
use miggate_crds::StoredKind;
use miggate_store::file_store::{Problem, read_node_files};
use miggate_wire::store::NODES_DIR;
use serde::Serialize;

use crate::flags::check::CheckOutput;
use crate::flags::place::WhereArgs;
use crate::input::{closed_pipe_is_fine, stdout_is_closed};

/// Ranks the store's nodes for the checkpoint and prints them; the exit code says whether any
/// node fits.
pub fn run(args: &WhereArgs) -> anyhow::Result<ExitCode> {
    if stdout_is_closed() {
        bail!("standard output is closed: the answer would be lost (use >/dev/null to discard it)");
    }
    let options = args.policy.options(Mode::Offer);
    let read = args.read.options();
    let checkpoint = match &args.namespace {
        Some(ns) => {
            crate::cluster_read::named_checkpoint(&args.cluster, ns, &args.checkpoint.to_string_lossy())?.0
        }
        None => read_checkpoint(&args.checkpoint, read)?,
    };
    let (nodes, problems, names) = match &args.store {
        Some(store) => {
            let (nodes, problems) = read_nodes(store, read)?;
            (nodes, problems, DraNames::new())
        }
        None => cluster_nodes(&args.cluster, &checkpoint)?,
    };
    let placements = rank_nodes_listed(
        &checkpoint,
        nodes.iter().map(|(n, m, listed)| (n.as_str(), m, *listed)),
        &options,
    );
    let claimed: Vec<Option<Vec<String>>> = placements.iter().map(|p| claim_devices(p, &names)).collect();
    let fits = placements.iter().filter(|p| p.fits()).count();
    let mut out = anstream::stdout().lock();
    let written = match args.output {
        CheckOutput::Json => {
            crate::check::write_json(&mut out, &answer(&checkpoint, &placements, &claimed, &problems))
        }
        CheckOutput::Yaml => {
            crate::check::write_yaml(&mut out, &answer(&checkpoint, &placements, &claimed, &problems))
        }
        CheckOutput::Table => write_text(&mut out, &checkpoint, &placements, &claimed, &problems, false),
        CheckOutput::Wide => write_text(&mut out, &checkpoint, &placements, &claimed, &problems, true),
    };
    closed_pipe_is_fine(written.and_then(|()| out.flush())).context("cannot write the answer")?;
    Ok(if fits > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The checkpoint: any manifest document, a GpuCheckpoint object, or a peer artifact.
pub(crate) fn read_checkpoint(path: &Path, options: ReadOptions) -> anyhow::Result<GpuManifest> {
    let stored = crate::input::read_manifest(path, "checkpoint", options)?;
    if stored.kind == StoredKind::Node {
        bail!(
            "checkpoint {}: it is a GpuNode (a node's inventory), not a checkpoint",
            escape(&path.display().to_string())
        );
    }
    Ok(stored.manifest)
}

/// A node's name, its inventory, and whether that lists every slice exactly (GFD's counts).
type Named = (String, GpuManifest, bool);

/// Each DRA node's device names by UUID (see `cluster_read::NodeView`), by node name.
type DraNames = std::collections::HashMap<String, std::collections::HashMap<String, String>>;

/// The cluster's nodes, each judged by what its inventory can supply this checkpoint (as the
/// webhook judges it); a node whose sources are present but unreadable as a problem naming
/// why. Nodes no source knows anything GPU about (CPU nodes) are left out.
fn cluster_nodes(
    flags: &crate::flags::cluster::ClusterFlags,
    checkpoint: &GpuManifest,
) -> anyhow::Result<(Vec<Named>, Vec<Problem>, DraNames)> {
    let mut nodes = Vec::new();
    let mut problems = Vec::new();
    let mut names = DraNames::new();
    for (name, inventory, dra) in crate::cluster_read::nodes(flags)? {
        if !dra.is_empty() {
            names.insert(name.clone(), dra);
        }
        match inventory {
            Ok(inv) => nodes.push((name, inv.manifest_for(checkpoint).into_owned(), inv.slices_listed)),
            Err(why) if !why.passed_over.is_empty() => problems.push(Problem {
                file: format!("node {}", escape(&name)),
                // The reasons escape what they quote already.
                error: why
                    .passed_over
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
            }),
            Err(_) => {}
        }
    }
    Ok((nodes, problems, names))
}

/// On a node with NVIDIA DRA slices, the devices a fitting placement takes, named as the
/// slices name them (`pool/device`): the devices a claim from `miggate claim` would be
/// allocated. `None` off DRA, or where a device has no slice name (DynamicMIG's partitions
/// are made on demand).
fn claim_devices(p: &NodeFit<'_>, names: &DraNames) -> Option<Vec<String>> {
    let names = names.get(p.node)?;
    p.devices
        .as_ref()?
        .iter()
        .map(|uuid| names.get(uuid).cloned())
        .collect()
}

/// Every node file of the store, read as the webhook's file store reads it
/// ([`miggate_store::file_store::read_node_files`]); unusable ones as problems. A missing or
/// unreadable `nodes/` directory is an error: a typo in `--store` must not read as "no node
/// fits".
fn read_nodes(root: &Path, options: ReadOptions) -> anyhow::Result<(Vec<Named>, Vec<Problem>)> {
    let shown = escape(&root.join(NODES_DIR).display().to_string()).into_owned();
    let files = read_node_files(root, options)
        .with_context(|| format!("cannot read the store's node directory {shown}"))?;
    let nodes = files
        .nodes
        .into_iter()
        .map(|(name, m)| (name, m, false))
        .collect();
    Ok((nodes, files.problems))
}

/// What a fitting node would give the checkpoint, or why a node refuses, in one cell.
fn detail(p: &NodeFit<'_>) -> String {
    if let Some(r) = p.first_refusal() {
        let (s, t) = r
            .mismatches
            .first()
            .map_or((r.source.as_ref(), r.target.as_ref()), |(s, t)| {
                (s.as_str(), t.as_str())
            });
        return format!("{}: source {}, target {}", r.check, escape(s), escape(t));
    }
    let uses = match &p.devices {
        Some(d) if d.is_empty() => "no GPU".to_string(),
        Some(d) => d.join(", "),
        None => match p.report.result(miggate_compat::CheckName::GPU_COUNT) {
            Some(r) if r.source == "1" => "1 device, no device map".to_string(),
            Some(r) => format!("{} devices, no device map", escape(&r.source)),
            None => "no device map".to_string(),
        },
    };
    match p.spare {
        Some(n) => format!("{uses} (spare {n})"),
        None => uses,
    }
}

/// `-o wide`'s cell: every refusal in the reason format, or the fit with its device map.
fn detail_wide(p: &NodeFit<'_>) -> String {
    if p.first_refusal().is_some() {
        return escape(&p.report.reason).into_owned();
    }
    match p.report.device_map.as_deref() {
        Some("") => format!("{}; device map: every device maps to itself", detail(p)),
        Some(map) => format!("{}; device map: {}", detail(p), escape(map)),
        None => detail(p),
    }
}

fn write_text(
    out: &mut impl Write,
    checkpoint: &GpuManifest,
    placements: &[NodeFit<'_>],
    claimed: &[Option<Vec<String>>],
    problems: &[Problem],
    wide: bool,
) -> io::Result<()> {
    let width = placements
        .iter()
        .map(|p| escape(p.node).chars().count())
        .max()
        .unwrap_or(0)
        .max(4);
    writeln!(out, "{:<width$}  {:<7}  DETAIL", "NODE", "VERDICT")?;
    for (p, claim) in placements.iter().zip(claimed) {
        let verdict = if p.fits() { "fits" } else { "refused" };
        let detail = if wide { detail_wide(p) } else { detail(p) };
        writeln!(out, "{:<width$}  {verdict:<7}  {detail}", escape(p.node))?;
        if let Some(devices) = claim.as_ref().filter(|d| !d.is_empty()) {
            let devices: Vec<String> = devices.iter().map(|d| escape(d).into_owned()).collect();
            writeln!(
                out,
                "{:<width$}  {:<7}  claim takes: {}",
                "",
                "",
                devices.join(", ")
            )?;
        }
    }
    let fits = placements.iter().filter(|p| p.fits()).count();
    match placements.len() {
        1 => writeln!(out, "\n{fits} of 1 node fits")?,
        n => writeln!(out, "\n{fits} of {n} nodes fit")?,
    }
    for w in &checkpoint.warnings {
        writeln!(out, "warning: checkpoint: {}", escape(&w.to_string()))?;
    }
    for p in problems {
        writeln!(out, "warning: {}: {}", p.file, p.error)?;
    }
    Ok(())
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Answer<'a> {
    schema_version: u32,
    fits: usize,
    nodes: Vec<NodeAnswer<'a>>,
    problems: &'a [Problem],
    /// Each written as its words.
    warnings: &'a [Warning],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeAnswer<'a> {
    node: &'a str,
    compatible: bool,
    spare: Option<usize>,
    devices: Option<&'a [String]>,
    /// On a DRA node, the devices a claim would take, as its slices name them.
    claim_devices: Option<&'a [String]>,
    refusal: Option<Refusal<'a>>,
    reason: &'a str,
    device_map: Option<&'a str>,
}

#[derive(Serialize)]
struct Refusal<'a> {
    check: &'a str,
    source: &'a str,
    target: &'a str,
}

fn answer<'a>(
    checkpoint: &'a GpuManifest,
    placements: &'a [NodeFit<'_>],
    claimed: &'a [Option<Vec<String>>],
    problems: &'a [Problem],
) -> Answer<'a> {
    Answer {
        schema_version: 1,
        fits: placements.iter().filter(|p| p.fits()).count(),
        nodes: placements
            .iter()
            .zip(claimed)
            .map(|(p, claim)| NodeAnswer {
                node: p.node,
                compatible: p.fits(),
                spare: p.spare,
                devices: p.devices.as_deref(),
                claim_devices: claim.as_deref(),
                refusal: p.first_refusal().map(|r| Refusal {
                    check: r.check.as_str(),
                    source: r.source.as_ref(),
                    target: r.target.as_ref(),
                }),
                reason: &p.report.reason,
                device_map: p.report.device_map.as_deref(),
            })
            .collect(),
        problems,
        warnings: &checkpoint.warnings,
    }
}
