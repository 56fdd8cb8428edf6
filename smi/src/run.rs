//! Running nvidia-smi: a child process under one deadline.
//!
//! A wedged GPU can hang nvidia-smi forever, and a checkpoint agent must not hang with it, so
//! every command runs against a [`Deadline`] shared by the whole job (a capture, one recovery
//! command): a command still running when it passes is killed, and a command that would start
//! after it is not started. No async runtime is needed for a handful of short commands: a thread
//! per output pipe and a polling wait are enough.
//!
//! What a command prints is bounded ([`MAX_OUTPUT_BYTES`] per stream). Output over the bound is
//! an error, never parsed: a cut-off listing can end in half a GPU line that would read as a GPU
//! that does not exist.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use crate::error::{RunError, Stream};

/// How long a whole job (a capture: every command and retry) may take unless the caller says
/// otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The most of one stream that is read. nvidia-smi prints kilobytes (a 10,000-GPU listing is
/// about 6 MiB); a child that prints more is not nvidia-smi, and memory stays bounded whatever it
/// does.
pub const MAX_OUTPUT_BYTES: usize = 8 * 1024 * 1024;

/// How long output is still collected after the command ended; only a descendant that left its
/// process group (`setsid`) can hold a pipe open that long.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// The least grace a command that ended just before the deadline gets, so that what it wrote
/// before exiting (already in the pipe) is read rather than raced against the clock.
const MIN_GRACE: Duration = Duration::from_millis(100);

/// The one deadline of a job: every command, retries included, must finish before it.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    /// When it passes; `None` when the limit is past what `Instant` can hold (no deadline).
    at: Option<Instant>,
    /// The limit it was set with, for messages.
    limit: Duration,
}

impl Deadline {
    /// A deadline `limit` from now.
    pub fn after(limit: Duration) -> Deadline {
        Deadline {
            at: Instant::now().checked_add(limit),
            limit,
        }
    }

    /// The limit it was set with.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// Whether it has passed.
    pub fn passed(&self) -> bool {
        self.at.is_some_and(|at| Instant::now() >= at)
    }

    /// The time left; `None` when there is no deadline.
    pub fn remaining(&self) -> Option<Duration> {
        self.at.map(|at| at.saturating_duration_since(Instant::now()))
    }

    /// The earlier of `at` and the deadline.
    fn cap(&self, at: Instant) -> Instant {
        self.at.map_or(at, |d| d.min(at))
    }
}

/// What a finished command printed.
#[derive(Debug, Clone)]
pub struct Output {
    /// The command line, for messages (outside text: quote it escaped).
    pub command: String,
    /// How it exited; on Unix always with a code, a death by signal being [`RunError::Signalled`].
    pub status: ExitStatus,
    /// Standard output, lossily decoded (nvidia-smi prints UTF-8 or ASCII).
    pub stdout: String,
    /// Standard error, lossily decoded.
    pub stderr: String,
    /// Streams a descendant still held open when the grace after the command's exit ended:
    /// what was read until then is kept, up to its last whole line.
    pub held_open: Vec<HeldOpen>,
}

/// A stream that did not close within the grace after its command exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldOpen {
    /// Which stream.
    pub stream: Stream,
    /// How many bytes of an unfinished last line were dropped.
    pub dropped: usize,
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

/// Runs `program args…` until it ends or `deadline` passes.
///
/// The command runs in a process group of its own, and whatever is left of that group when the
/// command ends or is killed is killed too, so a wrapper's stray background process can neither
/// outlive the job nor hold its output pipes open. A descendant that escaped the group
/// (`setsid`) and holds a pipe open costs at most a 2 s grace: what was read by then is kept,
/// and [`Output::held_open`] says so.
pub fn run(program: &Path, args: &[&str], deadline: &Deadline) -> Result<Output, RunError> {
    let command = std::iter::once(program.display().to_string())
        .chain(args.iter().map(|a| a.to_string()))
        .collect::<Vec<_>>()
        .join(" ");
    if deadline.passed() {
        return Err(RunError::DeadlinePassed {
            command,
            limit: deadline.limit(),
        });
    }
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => RunError::NotFound {
            program: program.to_path_buf(),
        },
        _ => RunError::Spawn {
            program: program.to_path_buf(),
            error,
        },
    })?;
    let stdout = child.stdout.take().map(drain);
    let stderr = child.stderr.take().map(drain);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if deadline.passed() => {
                kill_group(&child);
                // Best effort: the child may have exited between the poll and the kill.
                let _ = child.kill();
                let _ = child.wait();
                return Err(RunError::TimedOut {
                    command,
                    limit: deadline.limit(),
                });
            }
            Ok(None) => thread::sleep(Duration::from_millis(5)),
            Err(error) => {
                kill_group(&child);
                let _ = child.kill();
                let _ = child.wait();
                return Err(RunError::Wait { command, error });
            }
        }
    };
    kill_group(&child);
    let ended = Instant::now();
    let grace = deadline.cap(ended + DRAIN_GRACE).max(ended + MIN_GRACE);
    let out = collect(stdout.as_deref(), grace);
    let err = collect(stderr.as_deref(), grace);
    for (stream, collected) in [(Stream::Stdout, &out), (Stream::Stderr, &err)] {
        if collected.over {
            return Err(RunError::OutputTooLarge {
                command,
                stream,
                limit: MAX_OUTPUT_BYTES,
            });
        }
    }
    #[cfg(unix)]
    if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&status) {
        return Err(RunError::Signalled { command, signal });
    }
    let mut held_open = Vec::new();
    let stdout = finish(out, Stream::Stdout, &mut held_open);
    let stderr = finish(err, Stream::Stderr, &mut held_open);
    Ok(Output {
        command,
        status,
        stdout,
        stderr,
        held_open,
    })
}

/// A stream's text. One that was still open keeps only its whole lines: the unfinished last
/// line may be half a GPU line, which must not read as a GPU.
fn finish(collected: Collected, stream: Stream, held_open: &mut Vec<HeldOpen>) -> String {
    let mut bytes = collected.bytes;
    if !collected.closed {
        let keep = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |at| at + 1);
        held_open.push(HeldOpen {
            stream,
            dropped: bytes.len() - keep,
        });
        bytes.truncate(keep);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Kills what is left of the child's process group (the child itself may be gone already).
fn kill_group(child: &std::process::Child) {
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

/// One output pipe, read by a thread of its own into a buffer the runner can take at any time.
#[derive(Default)]
struct Pipe {
    state: Mutex<Collected>,
    changed: Condvar,
}

/// What a pipe's reader has read so far.
#[derive(Default)]
struct Collected {
    /// The bytes, up to [`MAX_OUTPUT_BYTES`].
    bytes: Vec<u8>,
    /// More than [`MAX_OUTPUT_BYTES`] arrived (the rest was read and dropped).
    over: bool,
    /// The pipe reached its end (or failed): nothing more will arrive.
    closed: bool,
}

fn lock(pipe: &Pipe) -> MutexGuard<'_, Collected> {
    // A reader thread cannot panic while holding the lock, but a poisoned lock still holds the
    // bytes read so far.
    pipe.state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Starts reading `pipe` on a thread of its own. Past the bound it keeps reading and drops what
/// it reads, so the child is never blocked on a full pipe.
fn drain(mut pipe: impl Read + Send + 'static) -> Arc<Pipe> {
    let shared = Arc::new(Pipe::default());
    let reader = Arc::clone(&shared);
    thread::spawn(move || {
        let mut chunk = vec![0_u8; 64 * 1024];
        loop {
            let n = match pipe.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                // A read error ends this stream; what was read so far is kept.
                Err(_) => break,
            };
            let mut state = lock(&reader);
            if state.over {
                continue;
            }
            let room = MAX_OUTPUT_BYTES.saturating_sub(state.bytes.len());
            match chunk.get(..n) {
                Some(read) if n <= room => state.bytes.extend_from_slice(read),
                _ => {
                    // Over the bound: the output will not be read at all, so free it now.
                    state.over = true;
                    state.bytes = Vec::new();
                }
            }
        }
        lock(&reader).closed = true;
        reader.changed.notify_all();
    });
    shared
}

/// What a pipe's reader has read by `until` (or by its end, if that comes first). A missing pipe
/// reads as an empty, closed one.
fn collect(pipe: Option<&Pipe>, until: Instant) -> Collected {
    let Some(pipe) = pipe else {
        return Collected {
            closed: true,
            ..Collected::default()
        };
    };
    let mut state = lock(pipe);
    while !state.closed {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        state = match pipe.changed.wait_timeout(state, left) {
            Ok((guard, _)) => guard,
            Err(poisoned) => poisoned.into_inner().0,
        };
    }
    std::mem::take(&mut *state)
}

/// The nvidia-smi to run: the path given, else `nvidia-smi` on PATH.
pub fn nvidia_smi_path(explicit: Option<&Path>) -> PathBuf {
    explicit.map_or_else(|| PathBuf::from("nvidia-smi"), Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn soon() -> Deadline {
        Deadline::after(DEFAULT_TIMEOUT)
    }

    #[test]
    fn captures_both_streams_and_status() {
        let out = run(
            Path::new("sh"),
            &["-c", "echo out; echo err >&2; exit 3"],
            &soon(),
        )
        .unwrap();
        assert_eq!(out.stdout, "out\n");
        assert_eq!(out.stderr, "err\n");
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.combined(), "out\nerr\n");
        assert!(out.held_open.is_empty());
    }

    #[test]
    fn a_hung_child_is_killed_at_the_deadline() {
        let start = Instant::now();
        let err = run(
            Path::new("sleep"),
            &["30"],
            &Deadline::after(Duration::from_millis(200)),
        )
        .unwrap_err();
        assert!(matches!(err, RunError::TimedOut { .. }), "{err}");
        assert!(start.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn nothing_starts_after_the_deadline() {
        let deadline = Deadline::after(Duration::ZERO);
        let err = run(Path::new("sh"), &["-c", "echo ok"], &deadline).unwrap_err();
        assert!(matches!(err, RunError::DeadlinePassed { .. }), "{err}");
    }

    #[test]
    fn output_over_the_bound_is_an_error_and_the_child_still_finishes() {
        let start = Instant::now();
        let err = run(
            Path::new("sh"),
            &["-c", "head -c 20000000 /dev/zero; echo done >&2"],
            &soon(),
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                RunError::OutputTooLarge {
                    stream: Stream::Stdout,
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            err.to_string().contains("printed more than 8 MiB on stdout"),
            "{err}"
        );
        assert!(start.elapsed() < Duration::from_secs(20));
    }

    #[test]
    fn output_of_exactly_the_bound_is_read() {
        let script = format!("head -c {MAX_OUTPUT_BYTES} /dev/zero");
        let out = run(Path::new("sh"), &["-c", &script], &soon()).unwrap();
        assert_eq!(out.stdout.len(), MAX_OUTPUT_BYTES);
    }

    #[test]
    fn a_stray_background_process_neither_outlives_nor_stalls_the_command() {
        let start = Instant::now();
        let out = run(
            Path::new("sh"),
            &["-c", "sleep 30 & echo listed"],
            &Deadline::after(Duration::from_secs(20)),
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
        let err = run(
            Path::new("sh"),
            &["-c", &script],
            &Deadline::after(Duration::from_millis(200)),
        )
        .unwrap_err();
        assert!(matches!(err, RunError::TimedOut { .. }), "{err}");
        thread::sleep(Duration::from_millis(1500));
        assert!(!marker.exists(), "a process of the timed-out group kept running");
    }

    #[test]
    fn a_huge_timeout_is_no_deadline_not_a_panic() {
        let out = run(
            Path::new("sh"),
            &["-c", "echo ok"],
            &Deadline::after(Duration::MAX),
        )
        .unwrap();
        assert_eq!(out.stdout, "ok\n");
    }

    #[test]
    fn a_missing_binary_is_not_found() {
        let err = run(Path::new("/nonexistent/nvidia-smi"), &["-L"], &soon()).unwrap_err();
        assert!(matches!(err, RunError::NotFound { .. }), "{err}");
        assert!(err.to_string().contains("no NVIDIA driver here?"));
        assert!(!err.to_string().contains("--nvidia-smi"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn a_command_killed_by_a_signal_says_so() {
        let err = run(Path::new("sh"), &["-c", "echo partial; kill -TERM $$"], &soon()).unwrap_err();
        assert!(matches!(err, RunError::Signalled { signal: 15, .. }), "{err}");
    }

    #[test]
    fn finish_keeps_whole_lines_of_a_held_stream() {
        let mut held = Vec::new();
        let collected = Collected {
            bytes: b"GPU 0: X (UUID: GPU-1)\nGPU 1: X (UUID: GPU-".to_vec(),
            over: false,
            closed: false,
        };
        let text = finish(collected, Stream::Stdout, &mut held);
        assert_eq!(text, "GPU 0: X (UUID: GPU-1)\n");
        assert_eq!(
            held,
            [HeldOpen {
                stream: Stream::Stdout,
                dropped: 20
            }]
        );
    }
}
