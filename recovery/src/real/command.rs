//! Running a host command (nvidia-smi, sriov-manage, systemctl) under `miggate-smi`'s runner:
//! a deadline per command, bounded output, the process group killed at the end.

use std::path::Path;
use std::time::Duration;

use miggate_smi::{Deadline, Output, run};

use crate::error::{Error, Result};

/// Runs a command to its end within `limit`; `Ok` whatever its exit status.
pub(super) fn exec(program: &Path, args: &[&str], limit: Duration) -> Result<Output> {
    Ok(run(program, args, &Deadline::after(limit))?)
}

/// Runs a command; a non-zero exit is [`Error::Command`] with what it printed.
pub(super) fn exec_ok(program: &Path, args: &[&str], limit: Duration) -> Result<Output> {
    let out = exec(program, args, limit)?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(failed(&out))
    }
}

pub(super) fn failed(out: &Output) -> Error {
    Error::Command {
        command: out.command.clone(),
        status: out
            .status
            .code()
            .map_or("killed".to_string(), |c| format!("exit {c}")),
        output: out.combined(),
    }
}
