//! The report as a table a person reads at a glance: check, outcome, source, target; the
//! verdict, the reason and the device map below.

use std::io::{self, Write};
use std::path::Path;

use anstyle::{AnsiColor, Style};
use miggate_compat::{Outcome, Report};

use miggate_compat::escape::escape;

/// Values wider than this wrap at `, ` onto continuation lines, so a long multiset
/// (`NVIDIA H100 80GB HBM3 x8, …`) does not push the target column off the screen.
pub const VALUE_WIDTH: usize = 38;

fn outcome_style(o: Outcome) -> Style {
    match o {
        Outcome::Pass => AnsiColor::Green.on_default(),
        Outcome::Refuse => AnsiColor::Red.on_default().bold(),
        Outcome::Unknown => AnsiColor::Yellow.on_default(),
        Outcome::NotApplicable | Outcome::Skipped => Style::new().dimmed(),
    }
}

/// Splits a value into lines no wider than `width`, breaking after `, ` where possible.
fn wrap(value: &str, width: usize) -> Vec<String> {
    let value = escape(value);
    let mut lines = Vec::new();
    let mut line = String::new();
    for (i, part) in value.split(", ").enumerate() {
        let piece = if i == 0 {
            part.to_string()
        } else {
            format!(", {part}")
        };
        if !line.is_empty() && line.chars().count() + piece.chars().count() > width {
            lines.push(std::mem::take(&mut line) + ",");
            line = part.to_string();
        } else {
            line.push_str(&piece);
        }
    }
    lines.push(line);
    // A single token longer than the column (an image digest) is cut short on the screen
    // only; `-o json` keeps every value whole.
    lines
        .into_iter()
        .map(|l| {
            if l.chars().count() > width {
                let keep: String = l.chars().take(width - 1).collect();
                keep + "…"
            } else {
                l
            }
        })
        .collect()
}

/// How wide a value may be in `-o wide`: every value on one line, whole (the escaping bound
/// still holds).
pub const WIDE: usize = usize::MAX;

/// Writes the whole report, each value wrapped at `width` (the table's [`VALUE_WIDTH`], or
/// [`WIDE`]).
pub fn write_report(
    out: &mut impl Write,
    report: &Report,
    source: &Path,
    target: &Path,
    width: usize,
) -> io::Result<()> {
    let bold = Style::new().bold();
    writeln!(
        out,
        "{bold}{} -> {}{bold:#} ({} mode)\n",
        escape(&source.display().to_string()),
        escape(&target.display().to_string()),
        report.mode
    )?;
    write_rows(out, report, width)?;
    writeln!(out)?;
    write_notes(out, report)?;
    write_verdict(out, report)?;
    if !report.warnings.is_empty() {
        writeln!(out, "\n{bold}warnings{bold:#}")?;
        for w in &report.warnings {
            writeln!(out, "  - {}", escape(&w.to_string()))?;
        }
    }
    Ok(())
}

/// The table: a row per check, its source and target values wrapped at `width`.
fn write_rows(out: &mut impl Write, report: &Report, width: usize) -> io::Result<()> {
    let bold = Style::new().bold();
    let check_w = report
        .results
        .iter()
        .map(|r| r.check.as_str().len())
        .max()
        .unwrap_or(5)
        .max(5);
    let outcome_w = "not-applicable".len();
    let source_w = report
        .results
        .iter()
        .flat_map(|r| wrap(&r.source, width))
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(6)
        .max(6);
    writeln!(
        out,
        "{bold}{:check_w$}  {:outcome_w$}  {:source_w$}  TARGET{bold:#}",
        "CHECK", "OUTCOME", "SOURCE"
    )?;
    for r in &report.results {
        let s = wrap(&r.source, width);
        let t = wrap(&r.target, width);
        let style = outcome_style(r.outcome);
        for i in 0..s.len().max(t.len()) {
            let src = s.get(i).map_or("", String::as_str);
            let tgt = t.get(i).map_or("", String::as_str);
            if i == 0 {
                write!(
                    out,
                    "{:check_w$}  {style}{:outcome_w$}{style:#}",
                    r.check.as_str(),
                    r.outcome.as_str()
                )?;
            } else {
                write!(out, "{:check_w$}  {:outcome_w$}", "", "")?;
            }
            let cells = format!("  {src:source_w$}  {tgt}");
            writeln!(out, "{}", cells.trim_end())?;
        }
    }
    Ok(())
}

/// Rows that did not pass, with their reasons; rows sharing a message (every pod check on a
/// node inventory) share one line. Nothing when every row passed.
fn write_notes(out: &mut impl Write, report: &Report) -> io::Result<()> {
    let mut notes: Vec<(Vec<&str>, Outcome, &str)> = Vec::new();
    for r in report.results.iter().filter(|r| r.outcome != Outcome::Pass) {
        match notes
            .iter_mut()
            .find(|(_, o, m)| *o == r.outcome && *m == r.message)
        {
            Some(note) => note.0.push(r.check.as_str()),
            None => notes.push((vec![r.check.as_str()], r.outcome, &r.message)),
        }
    }
    if notes.is_empty() {
        return Ok(());
    }
    let bold = Style::new().bold();
    writeln!(out, "{bold}notes{bold:#}")?;
    for (checks, outcome, message) in notes {
        let style = outcome_style(outcome);
        writeln!(
            out,
            "  {style}{}{style:#}: {}",
            checks.join(", "),
            escape(message)
        )?;
    }
    writeln!(out)
}

/// The verdict (with the reason of a refusal) and the device map.
fn write_verdict(out: &mut impl Write, report: &Report) -> io::Result<()> {
    if report.compared_nothing() {
        // Not a pass: no check said anything about this target (exit status 3).
        let s = outcome_style(Outcome::Unknown).bold();
        writeln!(
            out,
            "verdict:    {s}nothing compared{s:#} (no check applies to, or knows, this target)"
        )?;
    } else if report.compatible {
        let s = outcome_style(Outcome::Pass).bold();
        writeln!(out, "verdict:    {s}compatible{s:#}")?;
    } else {
        let s = outcome_style(Outcome::Refuse);
        writeln!(out, "verdict:    {s}refused{s:#}")?;
        writeln!(out, "reason:     {}", escape(&report.reason))?;
    }
    match report.device_map.as_deref() {
        Some("") => writeln!(out, "device map: (every device maps to itself)"),
        Some(map) => {
            writeln!(out, "device map:")?;
            for pair in map.split(',') {
                writeln!(out, "  {}", escape(pair))?;
            }
            Ok(())
        }
        None => writeln!(out, "device map: none"),
    }
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn long_values_wrap_after_commas() {
        let v = "NVIDIA H100 80GB HBM3 1g.10gb x7, NVIDIA H100 80GB HBM3 3g.40gb x2, NVIDIA A100 x1";
        let lines = wrap(v, 38);
        assert_eq!(
            lines,
            vec![
                "NVIDIA H100 80GB HBM3 1g.10gb x7,",
                "NVIDIA H100 80GB HBM3 3g.40gb x2,",
                "NVIDIA A100 x1"
            ]
        );
        assert_eq!(wrap("amd64", 38), vec!["amd64"]);
        let digest = "sha256:9f2c4be5a0e7f4b1c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0";
        assert_eq!(wrap(digest, 20), vec!["sha256:9f2c4be5a0e7…"]);
    }
}
