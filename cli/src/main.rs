//! `miggate`: decides whether a GPU checkpoint can be restored on a target.
//!
//! Thin on purpose: flags are parsed here and the work happens in the library crates.

mod capture;
mod check;
mod cli;
mod input;
mod printable;
mod table;
mod tree;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("miggate: {err:#}");
            ExitCode::from(2)
        }
    }
}
