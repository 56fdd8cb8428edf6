//! PCI addresses. GPUs are keyed by bus id, never by index: indices shift when a GPU goes
//! missing or VFs appear, the bus id does not.

use std::fmt;

use miggate_compat::escape::escape;
use serde::{Deserialize, Serialize};

/// A PCI address that is not of the form `dddd:bb:dd.f`; the text as read, quoted escaped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: not a PCI address (expected dddd:bb:dd.f)", escape(.0))]
pub struct BdfError(pub String);

/// A canonical PCI address, `0000:18:00.0`: 4-digit domain (more only when the domain needs
/// it), lowercase hex.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bdf(String);

impl Bdf {
    /// Reads a PCI address as nvidia-smi (`00000000:18:00.0`), sysfs (`0000:18:00.0`) or lspci
    /// (`18:00.0`) spell it.
    pub fn parse(text: &str) -> Result<Bdf, BdfError> {
        let bad = || BdfError(text.to_string());
        let t = text.trim();
        let (domain, rest) = match t.matches(':').count() {
            2 => t.split_once(':').ok_or_else(bad)?,
            1 => ("0", t),
            _ => return Err(bad()),
        };
        let (bus, devfn) = rest.split_once(':').ok_or_else(bad)?;
        let (dev, func) = devfn.split_once('.').ok_or_else(bad)?;
        let hex = |s: &str, max: usize| -> Result<u32, BdfError> {
            if s.is_empty() || s.len() > max || !s.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(bad());
            }
            u32::from_str_radix(s, 16).map_err(|_| bad())
        };
        let domain = hex(domain, 8)?;
        let bus = hex(bus, 2)?;
        let dev = hex(dev, 2)?;
        let func = hex(func, 1)?;
        if dev > 0x1f || func > 7 {
            return Err(bad());
        }
        Ok(Bdf(format!("{domain:04x}:{bus:02x}:{dev:02x}.{func}")))
    }

    /// The address as sysfs spells it (`0000:18:00.0`), whichever spelling it was read from.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Bdf {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Bdf {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Bdf::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case("00000000:18:00.0", "0000:18:00.0")]
    #[case("0000:C2:00.0", "0000:c2:00.0")]
    #[case("18:00.4", "0000:18:00.4")]
    #[case("00010000:01:1f.7", "10000:01:1f.7")]
    fn spellings_read_to_one_form(#[case] text: &str, #[case] want: &str) {
        assert_eq!(Bdf::parse(text).unwrap().as_str(), want);
    }

    #[rstest]
    #[case("")]
    #[case("0000:18:00")]
    #[case("0000:18:20.0")]
    #[case("0000:18:00.8")]
    #[case("gg:00.0")]
    #[case("0:0:0:0.0")]
    fn non_addresses_are_refused(#[case] text: &str) {
        assert!(Bdf::parse(text).is_err());
    }
}
