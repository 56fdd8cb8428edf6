//! `miggate check`.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use miggate_compat::{Mode, Options, evaluate, parse_min_kernel, parse_skip};

use crate::cli::{CheckArgs, CheckOutput, ModeArg};
use crate::input::{closed_pipe_is_fine, read_manifest};

/// Compares the two manifests and prints the report; the exit code carries the verdict.
pub fn run(args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let options = Options {
        mode: match args.mode {
            ModeArg::Exact => Mode::Exact,
            ModeArg::Offer => Mode::Offer,
        },
        strict: args.strict,
        skip: parse_skip(&args.skip).context("--skip")?,
        min_kernel: parse_min_kernel(&args.min_kernel).context("--min-kernel")?,
        min_driver: args.min_driver,
    };
    if args.source.as_os_str() == "-" && args.target.as_os_str() == "-" {
        anyhow::bail!("source and target cannot both be `-`: standard input holds one manifest");
    }
    let source = read_manifest(&args.source, "source")?;
    let target = read_manifest(&args.target, "target")?;
    let report = evaluate(&source, &target, &options);
    let code = if report.compatible {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    closed_pipe_is_fine(print(&report, args)).context("cannot write the report")?;
    Ok(code)
}

fn print(report: &miggate_compat::Report, args: &CheckArgs) -> std::io::Result<()> {
    let mut out = anstream::stdout().lock();
    match args.output {
        CheckOutput::Json => {
            serde_json::to_writer_pretty(&mut out, report)?;
            writeln!(out)?;
        }
        CheckOutput::Text => crate::table::write_report(&mut out, report, &args.source, &args.target)?,
    }
    out.flush()
}
