//! Running nvidia-smi: a child process with a deadline.
//!
//! A wedged GPU can hang nvidia-smi forever, and a checkpoint agent must not hang with it, so
//! every command runs with a timeout that kills the child. No async runtime is needed for a
//! handful of short commands: a thread per output pipe and a polling wait are enough.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
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

/// How long output is still collected after the command ended (or was killed); only a
/// descendant that left its process group can hold a pipe open that long.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Runs `program args…`, killing it after `timeout`. A missing binary is [`Error::NotFound`].
///
/// The command runs in a process group of its own, and whatever is left of that group when the
/// command ends or times out is killed, so a wrapper's stray background process can neither
/// outlive the capture nor hold its output pipes (and the capture) open.
pub fn run(program: &Path, args: &[&str], timeout: Duration) -> Result<Output, Error> {
    let command = std::iter::once(program.display().to_string())
        .chain(args.iter().map(|a| a.to_string()))
        .collect::<Vec<_>>()
        .join(" ");
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().map_err(|error| match error.kind() {
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
    // A deadline past what `Instant` can hold is no deadline.
    let deadline = Instant::now().checked_add(timeout);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if deadline.is_some_and(|d| Instant::now() >= d) => {
                kill_group(&mut child);
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
                kill_group(&mut child);
                return Err(Error::Wait { command, error });
            }
        }
    };
    kill_group(&mut child);
    let grace = Instant::now() + DRAIN_GRACE;
    Ok(Output {
        command,
        status,
        stdout: collect(stdout, grace),
        stderr: collect(stderr, grace),
    })
}

/// Kills what is left of the child's process group (the child itself may be gone already).
fn kill_group(child: &mut std::process::Child) {
    #[cfg(unix)]
    if let Some(pid) = i32::try_from(child.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        // ESRCH (nothing left) is the usual answer and is fine.
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    #[cfg(not(unix))]
    let _ = child;
}

/// A stream's bytes, waiting no later than `until` for its reader to finish.
fn collect(reader: Option<mpsc::Receiver<Vec<u8>>>, until: Instant) -> String {
    reader
        .and_then(|rx| {
            rx.recv_timeout(until.saturating_duration_since(Instant::now()))
                .ok()
        })
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// The most of one stream that is kept. nvidia-smi prints kilobytes; a child that prints more
/// is not nvidia-smi, and memory stays bounded whatever it does.
pub const MAX_OUTPUT_BYTES: u64 = 8 * 1024 * 1024;

fn drain(pipe: impl Read + Send + 'static) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut buf = Vec::new();
        let mut limited = pipe.take(MAX_OUTPUT_BYTES);
        // A read error ends the capture of this stream; what was read so far is kept.
        let _ = limited.read_to_end(&mut buf);
        // Keep reading past the limit and drop it, so the child is never blocked on a full pipe.
        let _ = std::io::copy(&mut limited.into_inner(), &mut std::io::sink());
        // The receiver may have stopped waiting; then there is no one to tell.
        let _ = tx.send(buf);
    });
    rx
}

/// The nvidia-smi to run: the path given, else `nvidia-smi` on PATH.
pub fn nvidia_smi_path(explicit: Option<&Path>) -> PathBuf {
    explicit.map_or_else(|| PathBuf::from("nvidia-smi"), Path::to_path_buf)
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
    fn a_stray_background_process_neither_outlives_nor_stalls_the_command() {
        let start = Instant::now();
        let out = run(
            Path::new("sh"),
            &["-c", "sleep 30 & echo listed"],
            Duration::from_secs(20),
        )
        .unwrap();
        assert_eq!(out.stdout, "listed\n");
        assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
    }

    #[test]
    fn a_timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("survived");
        let script = format!("(sleep 1; touch {}) & sleep 30", marker.display());
        let err = run(Path::new("sh"), &["-c", &script], Duration::from_millis(200)).unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
        thread::sleep(Duration::from_millis(1500));
        assert!(!marker.exists(), "a process of the timed-out group kept running");
    }

    #[test]
    fn a_huge_timeout_is_no_deadline_not_a_panic() {
        let out = run(Path::new("sh"), &["-c", "echo ok"], Duration::MAX).unwrap();
        assert_eq!(out.stdout, "ok\n");
    }

    #[test]
    fn a_missing_binary_is_not_found() {
        let err = run(Path::new("/nonexistent/nvidia-smi"), &["-L"], DEFAULT_TIMEOUT).unwrap_err();
        assert!(matches!(err, Error::NotFound { .. }), "{err}");
        assert!(err.to_string().contains("no NVIDIA driver here?"));
    }
}
