//! Kubernetes resource quantities (`32Gi`, `4000m`, `1e3`), compared exactly.
//!
//! Limits are compared as values, not text: `32Gi` equals `34359738368` and `4` equals `4000m`.
//! Values are held as whole nano-units in a `u128`, which covers every quantity a container
//! limit can hold; anything finer is rounded up, as Kubernetes does.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::text::all_ascii_digits;

/// A quantity as written, with its value when the text is a valid Kubernetes quantity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quantity {
    text: String,
    nanos: Option<u128>,
}

impl Quantity {
    /// Reads a quantity; text that is not one is kept, with no value (an unknown fact).
    pub fn new(text: impl Into<String>) -> Self {
        let text = text.into().trim().to_string();
        let nanos = parse_nanos(&text);
        Quantity { text, nanos }
    }

    /// The text as written (`64Gi`), for messages; the checks compare its value
    /// ([`nanos`](Self::nanos)), to which `1Gi` and `1024Mi` are the same.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The value in nano-units, `None` when the text is not a quantity.
    pub fn nanos(&self) -> Option<u128> {
        self.nanos
    }

    /// Compares values; `None` when either side is unreadable.
    pub fn compare(&self, other: &Quantity) -> Option<Ordering> {
        Some(self.nanos?.cmp(&other.nanos?))
    }

    /// The value as a whole count (`2` GPUs), `None` for fractions or unreadable text.
    pub fn whole(&self) -> Option<u64> {
        let n = self.nanos?;
        if n % NANO != 0 {
            return None;
        }
        u64::try_from(n / NANO).ok()
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

const NANO: u128 = 1_000_000_000;

fn parse_nanos(text: &str) -> Option<u128> {
    let s = text.strip_prefix('+').unwrap_or(text);
    let num_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(num_end);
    let (int, frac) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    if (int.is_empty() && frac.is_empty()) || !all_ascii_digits(int) || !all_ascii_digits(frac) {
        return None;
    }
    let (exp10, exp2): (i64, u32) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        other => {
            let exp = other.strip_prefix(['e', 'E'])?;
            let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if digits.is_empty() || !all_ascii_digits(digits) {
                return None;
            }
            (exp.parse::<i64>().ok()?, 0)
        }
    };
    let mut mantissa: u128 = 0;
    for c in int.bytes().chain(frac.bytes()) {
        mantissa = mantissa.checked_mul(10)?.checked_add(u128::from(c - b'0'))?;
    }
    let scaled = mantissa.checked_mul(1u128.checked_shl(exp2)?)?;
    // An exponent at the edge of `i64` is no quantity: checked, so it never overflows.
    let scale10 = exp10
        .checked_add(9)?
        .checked_sub(i64::try_from(frac.len()).ok()?)?;
    if scale10 >= 0 {
        scaled.checked_mul(10u128.checked_pow(u32::try_from(scale10).ok()?)?)
    } else {
        let div = 10u128
            .checked_pow(u32::try_from(scale10.checked_neg()?).ok()?)
            .unwrap_or(u128::MAX);
        Some(scaled.div_ceil(div))
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Quantity;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Kubernetes quantity as a string or a number (\"32Gi\", 4, \"500m\")")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Quantity, E> {
                Ok(Quantity::new(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Quantity, E> {
                Ok(Quantity::new(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Quantity, E> {
                Ok(Quantity::new(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Quantity, E> {
                Ok(Quantity::new(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for Quantity {
    fn schema_name() -> Cow<'static, str> {
        "Quantity".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        // What Kubernetes itself uses for a value that is a number or a string: a structural
        // schema cannot hold a type union.
        json_schema!({
            "x-kubernetes-int-or-string": true,
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "description": "A Kubernetes quantity (\"32Gi\", \"4000m\", 4)."
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("32Gi", "34359738368", Ordering::Equal)]
    #[case("4", "4000m", Ordering::Equal)]
    #[case("4", "500m", Ordering::Greater)]
    #[case("1", "4500m", Ordering::Less)]
    #[case("1k", "1000", Ordering::Equal)]
    #[case("1Ki", "1024", Ordering::Equal)]
    #[case("1.5Gi", "1536Mi", Ordering::Equal)]
    #[case("1e3", "1k", Ordering::Equal)]
    #[case("1E-3", "1m", Ordering::Equal)]
    #[case(".5", "500m", Ordering::Equal)]
    #[case("0.1", "100m", Ordering::Equal)]
    #[case("+2", "2", Ordering::Equal)]
    #[case("1n", "0.000000001", Ordering::Equal)]
    #[case("64Gi", "32Gi", Ordering::Greater)]
    fn quantities_compare_by_value(#[case] a: &str, #[case] b: &str, #[case] want: Ordering) {
        assert_eq!(Quantity::new(a).compare(&Quantity::new(b)), Some(want));
    }

    #[rstest]
    #[case("plenty")]
    #[case("")]
    #[case("-1")]
    #[case("1Qi")]
    #[case("1e")]
    #[case("1e99")]
    #[case(".")]
    #[case("1.2.3")]
    #[case("1e9223372036854775807")]
    #[case("1E+9223372036854775807")]
    #[case("1.000000000e-9223372036854775808")]
    #[case("1e-9223372036854775809")]
    fn unreadable_quantities_have_no_value(#[case] text: &str) {
        assert_eq!(Quantity::new(text).nanos(), None, "{text}");
    }

    #[test]
    fn whole_counts() {
        assert_eq!(Quantity::new("2").whole(), Some(2));
        assert_eq!(Quantity::new("1500m").whole(), None);
    }

    #[test]
    fn numbers_and_strings_both_read() {
        let q: Quantity = serde_json::from_str("34359738368").unwrap();
        assert_eq!(q.compare(&Quantity::new("32Gi")), Some(Ordering::Equal));
        let q: Quantity = serde_saphyr::from_str("0.5").unwrap();
        assert_eq!(q.compare(&Quantity::new("500m")), Some(Ordering::Equal));
    }
}
