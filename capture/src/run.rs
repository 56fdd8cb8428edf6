//! Running nvidia-smi: a child process with a deadline.
//!
//! A wedged GPU can hang nvidia-smi forever, and a checkpoint agent must not hang with it, so
//! every command runs with a timeout that kills the child. No async runtime is needed for a
//! handful of short commands: a thread per output pipe and a polling wait are enough.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::Error;

/// How long one nvidia-smi command may run before it is killed.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// What a finished command printed.
#[derive(Debug, Clone)]
pub struct Output {
    /// The command line, for messages.
    pub command: String,
    /// The exit status.
    pub status: ExitStatus,
    /// Standard output, lossily decoded (nvidia-smi prints UTF-8 or ASCII).
    pub stdout: String,
    /// Standard error, lossily decoded.
    pub stderr: String,
}

impl Output {
    /// Both streams, stdout first, for matching known failure texts.
    pub fn combined(&self) -> String {
        match (self.stdout.trim().is_empty(), self.stderr.trim().is_empty()) {
            (_, true) => self.stdout.clone(),
            (true, false) => self.stderr.clone(),
            (false, false) => format!("{}\n{}", self.stdout.trim_end(), self.stderr),
        }
    }
}

/// Runs `program args…`, killing it after `timeout`. A missing binary is [`Error::NotFound`].
pub fn run(program: &Path, args: &[&str], timeout: Duration) -> Result<Output, Error> {
    let command = std::iter::once(program.display().to_string())
        .chain(args.iter().map(|a| a.to_string()))
        .collect::<Vec<_>>()
        .join(" ");
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| match error.kind() {
            std::io::ErrorKind::NotFound => Error::NotFound {
                program: program.to_path_buf(),
            },
            _ => Error::Spawn {
                program: program.to_path_buf(),
                error,
            },
        })?;
    let stdout = child.stdout.take().map(drain);
    let stderr = child.stderr.take().map(drain);
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                // Best effort: the child may have exited between the poll and the kill.
                let _ = child.kill();
                let _ = child.wait();
                return Err(Error::Timeout {
                    command,
                    after: timeout,
                });
            }
            Ok(None) => thread::sleep(Duration::from_millis(5)),
            Err(error) => {
                return Err(Error::Spawn {
                    program: program.to_path_buf(),
                    error,
                });
            }
        }
    };
    let collect = |h: Option<thread::JoinHandle<Vec<u8>>>| {
        h.and_then(|h| h.join().ok())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    };
    Ok(Output {
        command,
        status,
        stdout: collect(stdout),
        stderr: collect(stderr),
    })
}

/// The most of one stream that is kept. nvidia-smi prints kilobytes; a child that prints more
/// is not nvidia-smi, and memory stays bounded whatever it does.
pub const MAX_OUTPUT_BYTES: u64 = 8 * 1024 * 1024;

fn drain(pipe: impl Read + Send + 'static) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        let mut limited = pipe.take(MAX_OUTPUT_BYTES);
        // A read error ends the capture of this stream; what was read so far is kept.
        let _ = limited.read_to_end(&mut buf);
        // Keep reading past the limit and drop it, so the child is never blocked on a full pipe.
        let _ = std::io::copy(&mut limited.into_inner(), &mut std::io::sink());
        buf
    })
}

/// Where nvidia-smi is: the explicit path, else `MIGGATE_NVIDIA_SMI`, else `nvidia-smi` on PATH.
pub fn nvidia_smi_path(explicit: Option<&Path>) -> PathBuf {
    explicit
        .map(Path::to_path_buf)
        .or_else(|| {
            std::env::var_os("MIGGATE_NVIDIA_SMI")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .unwrap_or_else(|| PathBuf::from("nvidia-smi"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn captures_both_streams_and_status() {
        let out = run(
            Path::new("sh"),
            &["-c", "echo out; echo err >&2; exit 3"],
            DEFAULT_TIMEOUT,
        )
        .unwrap();
        assert_eq!(out.stdout, "out\n");
        assert_eq!(out.stderr, "err\n");
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.combined(), "out\nerr\n");
    }

    #[test]
    fn a_hung_child_is_killed_at_the_deadline() {
        let start = Instant::now();
        let err = run(Path::new("sleep"), &["30"], Duration::from_millis(200)).unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
        assert!(start.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn output_is_bounded_and_the_child_still_finishes() {
        let out = run(
            Path::new("sh"),
            &["-c", "head -c 20000000 /dev/zero; echo done >&2"],
            DEFAULT_TIMEOUT,
        )
        .unwrap();
        assert_eq!(out.stdout.len() as u64, MAX_OUTPUT_BYTES);
        assert_eq!(out.stderr, "done\n");
        assert!(out.status.success());
    }

    #[test]
    fn a_missing_binary_is_not_found() {
        let err = run(Path::new("/nonexistent/nvidia-smi"), &["-L"], DEFAULT_TIMEOUT).unwrap_err();
        assert!(matches!(err, Error::NotFound { .. }), "{err}");
        assert!(err.to_string().contains("no NVIDIA driver here?"));
    }
}
