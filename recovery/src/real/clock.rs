//! The wall clock.

use std::time::{Duration, Instant, SystemTime};

use crate::seams::Clock;

/// Real time, measured from when it was made.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    start: Instant,
}

impl SystemClock {
    /// A clock starting now.
    pub fn new() -> SystemClock {
        SystemClock {
            start: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    fn sleep(&self, d: Duration) {
        std::thread::sleep(d);
    }

    fn utc_now(&self) -> String {
        humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
    }
}
