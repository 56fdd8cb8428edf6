//! Reading the shared words from text (`--mode offer`, `--skip mig-profile`), with the crate's
//! error. Kept out of `vocab.rs` so that the vocabulary stays a leaf that imports nothing of
//! the crate: the error type and the escaping function are this module's, not the words'.

use std::str::FromStr;

use crate::Error;
use crate::escape::escape;
use crate::vocab::{CheckName, Mode, Outcome, Scope, TargetScope};

impl FromStr for CheckName {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        CheckName::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| Error::UnknownCheck {
                name: escape(s).into_owned(),
                known: CheckName::ALL.map(CheckName::as_str).join(", "),
            })
    }
}

/// `FromStr` for each closed vocabulary of `vocab.rs`: its `from_name`, or an error naming
/// the values.
macro_rules! from_str {
    ($($ty:ident),*) => {$(
        impl FromStr for $ty {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self, Error> {
                $ty::from_name(s).ok_or_else(|| Error::InvalidOption {
                    what: $ty::WHAT,
                    value: escape(s).into_owned(),
                    why: $ty::EXPECTED,
                })
            }
        }
    )*};
}

from_str!(Mode, Outcome, Scope, TargetScope);
