//! `miggate check`.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use miggate_compat::escape::{escape, is_hazard};
use miggate_compat::{Mode, Target, TargetScope, Warning, evaluate_target};
use miggate_crds::StoredKind;

use crate::flags::check::{CheckArgs, CheckOutput, ModeArg, ScopeArg};
use crate::input::{closed_pipe_is_fine, read_manifest, stdout_is_closed};

/// Compares the two manifests and prints the report; the exit code carries the verdict.
pub fn run(args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let options = args.policy.options(match args.mode {
        ModeArg::Exact => Mode::Exact,
        ModeArg::Offer => Mode::Offer,
    });
    if stdout_is_closed() {
        anyhow::bail!("standard output is closed: the report would be lost (use >/dev/null to discard it)");
    }
    if args.source.as_os_str() == "-" && args.target.as_ref().is_some_and(|t| t.as_os_str() == "-") {
        anyhow::bail!("source and target cannot both be `-`: standard input holds one manifest");
    }
    let read = args.read.options();
    let (source, source_name) = match &args.namespace {
        Some(ns) => {
            let (manifest, name) =
                crate::cluster_read::named_checkpoint(&args.cluster, ns, &args.source.to_string_lossy())?;
            (manifest, std::path::PathBuf::from(name))
        }
        None => {
            let stored = read_manifest(&args.source, "source", read)?;
            if stored.kind == StoredKind::Node {
                anyhow::bail!(
                    "source manifest {}: it is a GpuNode (a node's inventory), not a checkpoint",
                    escape(&args.source.display().to_string())
                );
            }
            (stored.manifest, args.source.clone())
        }
    };
    // A cluster node is judged as the webhook judges it: in offer mode, by what its inventory
    // can supply this checkpoint, a listed shortfall certain.
    let (target, slices_listed, options, said) = match (&args.target, &args.node) {
        (Some(path), _) => (
            read_manifest(path, "target", read)?.manifest,
            false,
            options,
            Vec::new(),
        ),
        (None, Some(node)) => {
            let (name, inventory) = crate::cluster_read::node(&args.cluster, node)?;
            // The reasons escape what they quote already.
            let inventory = inventory.map_err(|why| anyhow::anyhow!("node {} has {why}", escape(&name)))?;
            let judged = inventory.manifest_for(&source).into_owned();
            let said = node_warnings(&name, &inventory);
            (
                judged,
                inventory.slices_listed,
                args.policy.options(Mode::Offer),
                said,
            )
        }
        (None, None) => anyhow::bail!("a target is needed: a manifest file, or --node NAME"),
    };
    let mut view = Target::manifest(&target).with_slices_listed(slices_listed);
    if let Some(scope) = args.target_scope {
        view = view.with_scope(match scope {
            ScopeArg::Pod => TargetScope::Pod,
            ScopeArg::Node => TargetScope::Node,
            ScopeArg::All => TargetScope::All,
        });
    }
    let mut report = evaluate_target(&source, view, &options);
    report.warnings.extend(said);
    let code = if report.compared_nothing() {
        report.warnings.push(Warning::Added(NOTHING_COMPARED.to_string()));
        ExitCode::from(EXIT_NOTHING_COMPARED)
    } else if report.compatible {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    closed_pipe_is_fine(print(&report, args, &source_name)).context("cannot write the report")?;
    Ok(code)
}

/// What a node's inventory says of itself, as the webhook warns it: why a better source was
/// passed over, and each note (what the source could not tell, a node mig-manager is
/// reconfiguring), so the answer says why a check is unknown.
fn node_warnings(name: &str, inventory: &miggate_inventory::Inventory) -> Vec<Warning> {
    inventory
        .notes
        .iter()
        .map(|note| Warning::Added(format!("node {}: {note}", escape(name))))
        .collect()
}

/// The exit status of a check that compared nothing: every check was not applicable or unknown
/// (`--target-scope pod` asked of a node inventory, say). Not 0: nothing says the restore
/// fits; not 1: nothing refused it either.
pub const EXIT_NOTHING_COMPARED: u8 = 3;

/// The warning such a report carries, so `-o json` says it too.
pub const NOTHING_COMPARED: &str = "nothing was compared: every check is not applicable or unknown for this \
     target (exit status 3); is it the right file, and the right --target-scope?";

/// Prints the report; its header names the source as `source` (the file, or what was read
/// from the cluster) and the target by its file or node.
fn print(report: &miggate_compat::Report, args: &CheckArgs, source: &std::path::Path) -> std::io::Result<()> {
    let target = match (&args.target, &args.node) {
        (Some(path), _) => path.clone(),
        (None, node) => std::path::PathBuf::from(format!("node {}", node.as_deref().unwrap_or_default())),
    };
    let mut out = anstream::stdout().lock();
    match args.output {
        CheckOutput::Json => write_json(&mut out, report)?,
        CheckOutput::Yaml => write_yaml(&mut out, report)?,
        CheckOutput::Table => {
            crate::table::write_report(&mut out, report, source, &target, crate::table::VALUE_WIDTH)?
        }
        CheckOutput::Wide => {
            crate::table::write_report(&mut out, report, source, &target, crate::table::WIDE)?;
        }
    }
    out.flush()
}

/// `value` as pretty JSON, terminal-safe, and a line break.
pub(crate) fn write_json(out: &mut impl Write, value: &impl serde::Serialize) -> std::io::Result<()> {
    let mut json = serde_json::Serializer::with_formatter(&mut *out, TerminalSafe::default());
    value.serialize(&mut json)?;
    writeln!(out)
}

/// `value` as YAML: its JSON tree written by the YAML writer, every string escaped the way
/// YAML's double quotes escape (the writer quotes what a terminal would act on).
pub(crate) fn write_yaml(out: &mut impl Write, value: &impl serde::Serialize) -> std::io::Result<()> {
    let tree = serde_json::to_value(value)?;
    let text = serde_saphyr::to_string(&tree).map_err(std::io::Error::other)?;
    out.write_all(text.as_bytes())
}

/// serde_json's pretty output, with the characters serde_json writes as they are but a terminal
/// would act on (DEL, C1 controls, bidi overrides such as U+202E) written as `\uXXXX` escapes.
/// serde_json already escapes C0 controls. A JSON reader gets the very same strings; only the
/// bytes on the screen differ, so `-o json` piped to a terminal cannot be reordered or driven.
#[derive(Default)]
pub(crate) struct TerminalSafe(serde_json::ser::PrettyFormatter<'static>);

impl serde_json::ser::Formatter for TerminalSafe {
    fn write_string_fragment<W: ?Sized + Write>(&mut self, w: &mut W, fragment: &str) -> std::io::Result<()> {
        let mut rest = fragment;
        while let Some((at, c)) = rest.char_indices().find(|&(_, c)| is_hazard(c)) {
            w.write_all(&rest.as_bytes()[..at])?;
            // Every hazard is in the Basic Multilingual Plane, so one `\uXXXX` holds it.
            write!(w, "\\u{:04x}", u32::from(c))?;
            rest = &rest[at + c.len_utf8()..];
        }
        w.write_all(rest.as_bytes())
    }

    // Layout: exactly the methods `PrettyFormatter` overrides, handed to it.
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(w)
    }
}

#[cfg(test)]
mod tests {
    use super::TerminalSafe;

    fn render(value: &serde_json::Value) -> String {
        let mut out = Vec::new();
        let mut json = serde_json::Serializer::with_formatter(&mut out, TerminalSafe::default());
        serde::Serialize::serialize(value, &mut json).unwrap_or_default();
        String::from_utf8(out).unwrap_or_default()
    }

    #[test]
    fn hazards_are_json_escapes_and_the_strings_are_unchanged() {
        let value = serde_json::json!({"a": ["x\u{202e}y\u{1b}[2J\u{7f}\u{9b}z", "日本"], "b": {}});
        let text = render(&value);
        assert!(text.contains(r"x\u202ey\u001b[2J\u007f\u009bz"), "{text}");
        assert!(
            !text
                .chars()
                .filter(|&c| c != '\n')
                .any(miggate_compat::escape::is_hazard),
            "{text}"
        );
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).ok(),
            Some(value.clone())
        );
        // The layout is serde_json's pretty one.
        let plain = render(&serde_json::json!({"a": [1, 2], "b": {}}));
        assert_eq!(
            plain,
            serde_json::to_string_pretty(&serde_json::json!({"a": [1, 2], "b": {}})).unwrap_or_default()
        );
    }
}
