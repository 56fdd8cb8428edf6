//! Log lines batched in memory and written by a flusher thread every few milliseconds.
//!
//! A server logs a line per decided restore. Written straight to stderr, each line is a
//! `write(2)` in the request's thread; handed to a worker thread line by line
//! (`tracing-appender`'s non-blocking writer), each line wakes that thread and flushes alone,
//! which on a busy two-core node costs more than the decision (measured under wrk
//! beside a bare axum + rustls echo: see docs/webhook.md). Here a line is appended to a
//! buffer under a lock, and the flusher writes whatever has gathered every
//! [`FLUSH_EVERY`], or at once when [`EAGER_BYTES`] have gathered. Nothing is dropped: past
//! [`MAX_BYTES`] a writer waits for the flusher, and dropping the [`Guard`] writes the rest.

use std::io::{self, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a line may wait before it is written.
pub(crate) const FLUSH_EVERY: Duration = Duration::from_millis(20);
/// Gathered bytes that wake the flusher before its interval.
pub(crate) const EAGER_BYTES: usize = 64 * 1024;
/// Gathered bytes past which a writer waits for the flusher instead of growing the buffer.
pub(crate) const MAX_BYTES: usize = 4 * 1024 * 1024;

struct Shared {
    state: Mutex<State>,
    /// Signalled when bytes pass [`EAGER_BYTES`] or on stop (the flusher waits on it).
    wake: Condvar,
    /// Signalled after each write-out (writers over [`MAX_BYTES`] wait on it).
    drained: Condvar,
}

#[derive(Default)]
struct State {
    buf: Vec<u8>,
    stop: bool,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panic while holding the lock leaves bytes that are still lines: keep them.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The writer handed to the log subscriber: cheap to clone, appends whole lines.
#[derive(Clone)]
pub(crate) struct BatchWriter {
    shared: Arc<Shared>,
}

/// Keeps the flusher running; dropping it writes what is left and stops the thread.
pub(crate) struct Guard {
    shared: Arc<Shared>,
    flusher: Option<JoinHandle<()>>,
}

/// A writer over `out` and the guard of its flusher thread.
pub(crate) fn batched<W: Write + Send + 'static>(out: W) -> io::Result<(BatchWriter, Guard)> {
    let shared = Arc::new(Shared {
        state: Mutex::new(State::default()),
        wake: Condvar::new(),
        drained: Condvar::new(),
    });
    let flusher = {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name("miggate-log".into())
            .spawn(move || flush_loop(&shared, out))?
    };
    Ok((
        BatchWriter {
            shared: shared.clone(),
        },
        Guard {
            shared,
            flusher: Some(flusher),
        },
    ))
}

fn flush_loop<W: Write>(shared: &Shared, mut out: W) {
    let mut spare = Vec::new();
    loop {
        let mut state = lock(&shared.state);
        if state.buf.len() < EAGER_BYTES && !state.stop {
            state = shared
                .wake
                .wait_timeout(state, FLUSH_EVERY)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        std::mem::swap(&mut state.buf, &mut spare);
        let stop = state.stop;
        drop(state);
        if !spare.is_empty() {
            // stderr failing has nowhere to be reported: the lines are dropped, the server goes on.
            let _ = out.write_all(&spare).and_then(|()| out.flush());
            spare.clear();
            shared.drained.notify_all();
        }
        if stop {
            return;
        }
    }
}

impl Shared {
    /// Adds `bytes` to what the flusher writes next; past [`MAX_BYTES`] waits for it first.
    fn append(&self, bytes: &[u8]) {
        let mut state = lock(&self.state);
        while state.buf.len() >= MAX_BYTES && !state.stop {
            state = self.drained.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        let was = state.buf.len();
        state.buf.extend_from_slice(bytes);
        if was < EAGER_BYTES && state.buf.len() >= EAGER_BYTES {
            self.wake.notify_one();
        }
    }
}

impl Write for BatchWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.shared.append(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        // Lines are written on the flusher's schedule; the guard writes the rest at exit.
        Ok(())
    }
}

/// What the subscriber writes one line through: a borrow of the [`BatchWriter`], so a line
/// costs no reference count (an `Arc` clone per line is an atomic that every worker thread
/// contends for).
pub(crate) struct LineWriter<'a> {
    shared: &'a Shared,
}

impl Write for LineWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.shared.append(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for BatchWriter {
    type Writer = LineWriter<'a>;
    fn make_writer(&'a self) -> LineWriter<'a> {
        LineWriter { shared: &self.shared }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        lock(&self.shared.state).stop = true;
        self.shared.wake.notify_one();
        self.shared.drained.notify_all();
        if let Some(flusher) = self.flusher.take() {
            let _ = flusher.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that keeps what it is given.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_line_of_every_thread_is_written_whole_and_in_its_order() {
        let sink = Sink::default();
        let (writer, guard) = batched(sink.clone()).unwrap();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let mut w = writer.clone();
                std::thread::spawn(move || {
                    for i in 0..5000 {
                        w.write_all(format!("t{t} line {i:05} {}\n", "x".repeat(40)).as_bytes())
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        drop(guard);
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 20_000);
        for t in 0..4 {
            let mine: Vec<&str> = lines
                .iter()
                .copied()
                .filter(|l| l.starts_with(&format!("t{t} ")))
                .collect();
            assert_eq!(mine.len(), 5000);
            assert!(
                mine.windows(2).all(|w| w[0] < w[1]),
                "thread {t}'s lines out of order"
            );
        }
    }

    #[test]
    fn a_line_is_written_within_the_interval_without_an_exit() {
        let sink = Sink::default();
        let (mut writer, _guard) = batched(sink.clone()).unwrap();
        writer.write_all(b"one\n").unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while sink.0.lock().unwrap().is_empty() {
            assert!(std::time::Instant::now() < deadline, "the line was never written");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(sink.0.lock().unwrap().as_slice(), b"one\n");
    }

    /// The subscriber's path: each event's line goes through a [`LineWriter`] borrowed from
    /// the writer, and reaches the sink whole.
    #[test]
    fn a_subscribers_lines_reach_the_sink_through_borrowed_writers() {
        let sink = Sink::default();
        let (writer, guard) = batched(sink.clone()).unwrap();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(writer)
            .with_ansi(false)
            .without_time()
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            for i in 0..3 {
                tracing::info!(line = i, "decided");
            }
        });
        drop(guard);
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        for (i, line) in lines.iter().enumerate() {
            assert!(line.ends_with(&format!("decided line={i}")), "{line}");
        }
    }

    #[test]
    fn a_writer_past_the_cap_waits_and_loses_nothing() {
        /// A sink slow enough that writers outrun it.
        #[derive(Clone, Default)]
        struct Slow(Arc<Mutex<usize>>);
        impl Write for Slow {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                std::thread::sleep(Duration::from_millis(2));
                *self.0.lock().unwrap() += b.len();
                Ok(b.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let sink = Slow::default();
        let (mut writer, guard) = batched(sink.clone()).unwrap();
        let chunk = vec![b'x'; 256 * 1024];
        for _ in 0..40 {
            writer.write_all(&chunk).unwrap();
        }
        drop(guard);
        assert_eq!(*sink.0.lock().unwrap(), 40 * chunk.len());
    }
}
