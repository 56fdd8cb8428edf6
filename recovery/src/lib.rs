#![doc = include_str!("../README.md")]

pub mod apply;
pub mod bdf;
pub mod error;
#[cfg(any(test, feature = "testing"))]
pub mod fake;
pub mod files;
pub mod gate;
pub mod journal;
pub mod layout;
pub mod observe;
pub mod plan;
pub mod real;
pub mod record;
pub mod seams;

pub use apply::{Failure, Options, Outcome, Progress, apply};
pub use bdf::Bdf;
pub use error::{Error, Result};
pub use layout::Layout;
pub use plan::{Plan, plan};
