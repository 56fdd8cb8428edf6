//! Why a row of a MIG box table cannot be read. A leaf of its own, so the warnings
//! ([`crate::warning`]) carry it without depending on the table reader.

use crate::text::quote;

/// Why one row of a box table cannot be read; the row is skipped with a warning that says so
/// ([`crate::Warning::TableRowSkipped`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RowError {
    /// No token reads as the profile name.
    #[error("no profile name")]
    NoProfileName,
    /// A required column is missing.
    #[error("no {column}")]
    Missing {
        /// The column, as the table's header names it.
        column: &'static str,
    },
    /// A column that must be a number is not one.
    #[error("{column} {} is not a number", quote(token))]
    NotANumber {
        /// The column.
        column: &'static str,
        /// The token found.
        token: String,
    },
    /// The `Free/Total` column is not two numbers.
    #[error("{} is not Free/Total", quote(token))]
    NotFreeTotal {
        /// The token found.
        token: String,
    },
    /// The `Start:Size` column is not a placement.
    #[error("placement {} is not start:size", quote(token))]
    NotPlacement {
        /// The token found.
        token: String,
    },
}
