//! What every MIG listing shares: the table type, the placement, and reading box tables.

use std::fmt;

use serde::Serialize;

use super::row_error::RowError;
use crate::error::Error;
use crate::failure;
use crate::text::{nothing_parsed, number, numbered_lines};
use crate::warning::Warning;

/// Rows read from one MIG listing, with why it is empty when it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigTable<T> {
    /// The rows, in printed order.
    pub rows: Vec<T>,
    /// Set when nvidia-smi said there is nothing to list, and how it said it.
    pub none_found: Option<NoneFound>,
    /// Rows or lines skipped, each naming the line; serialized as its words.
    pub warnings: Vec<Warning>,
}

/// How nvidia-smi says a MIG listing is empty. The two differ for boot recovery: one GPU has
/// MIG on and nothing created, the other has MIG off everywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NoneFound {
    /// `No GPU instances found: Not Found` / `No compute instances found: Not Found`: MIG is on
    /// and no such instance exists.
    NotFound,
    /// `No MIG-enabled devices found.`: no GPU has MIG on.
    NoMigEnabledDevices,
}

/// A placement: where an instance sits in the GPU's memory slices (`Start:Size`, `{0,2}:2`).
/// Written as nvidia-smi prints it, `start:size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Placement {
    /// The first memory slice (or placement unit).
    pub start: u32,
    /// How many it spans.
    pub size: u32,
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.start, self.size)
    }
}

impl Serialize for Placement {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// As a recorded layout holds it: `start:size` with a size of at least one slice.
impl<'de> serde::Deserialize<'de> for Placement {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let bad = || serde::de::Error::custom(format!("placement {text:?}: expected start:size, e.g. 0:1"));
        let (start, size) = text.split_once(':').ok_or_else(bad)?;
        let start = start.trim().parse().map_err(|_| bad())?;
        let size: u32 = size.trim().parse().map_err(|_| bad())?;
        if size == 0 {
            return Err(bad());
        }
        Ok(Placement { start, size })
    }
}

impl Placement {
    /// Reads `start:size`.
    pub fn parse(text: &str) -> Option<Placement> {
        let (start, size) = text.split_once(':')?;
        Some(Placement {
            start: number(start.trim())?,
            size: number(size.trim())?,
        })
    }
}

/// One data row of a box table: its line and tokens, plus the numbers-only second line when
/// the table prints two lines per row.
pub(super) struct BoxRow<'a> {
    pub(super) line: usize,
    pub(super) tokens: Vec<&'a str>,
    pub(super) more: Vec<&'a str>,
}

/// The tokens of a row around its profile name: `[gpu, (gi)] MIG <name> [rest…]`.
pub(super) struct Named<'a> {
    pub(super) before: Vec<&'a str>,
    pub(super) name: &'a str,
    pub(super) after: Vec<&'a str>,
}

impl<'a> BoxRow<'a> {
    /// Splits the row at its profile name: the token after `MIG`, or, with no `MIG` token, the
    /// first token that looks like a profile.
    pub(super) fn named(&self) -> Option<Named<'a>> {
        let at = match self.tokens.iter().position(|t| *t == "MIG") {
            Some(mig) => mig + 1,
            None => self.tokens.iter().position(|t| looks_like_profile(t))?,
        };
        let name = *self.tokens.get(at)?;
        let before = self.tokens[..at]
            .iter()
            .copied()
            .filter(|t| *t != "MIG")
            .collect();
        Some(Named {
            before,
            name,
            after: self.tokens[at + 1..].to_vec(),
        })
    }
}

/// Whether a token reads like a MIG profile name (`1g.10gb`, `1c.3g.40gb+me`).
pub(super) fn looks_like_profile(token: &str) -> bool {
    token.contains("g.") && token.contains("gb")
}

/// What [`scan`] found in a box table's text.
pub(super) struct Scan<'a> {
    pub(super) rows: Vec<BoxRow<'a>>,
    pub(super) none_found: Option<NoneFound>,
    pub(super) saw_box: bool,
    pub(super) warnings: Vec<Warning>,
}

/// Reads `-lgi` style output into rows: a known failure message is its error; `No … found`
/// forms set `none_found`; other unexpected lines become warnings.
pub(super) fn scan<'a>(text: &'a str, command: &'static str) -> Result<Scan<'a>, Error> {
    if let Some(err) = failure::classify(text) {
        return Err(err);
    }
    let mut scan = Scan {
        rows: Vec::new(),
        none_found: None,
        saw_box: false,
        warnings: Vec::new(),
    };
    // Whether the last row can still take a numbers-only second line.
    let mut open = false;
    for (n, raw) in numbered_lines(text) {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(none) = none_found(line) {
            scan.none_found = Some(none);
            open = false;
            continue;
        }
        let boxed = line.starts_with('|') || line.starts_with('+');
        let inner = line.trim_start_matches('|').trim_end_matches('|').trim();
        if inner.chars().all(|c| matches!(c, '+' | '-' | '=' | '|')) {
            // A border or the `===` rule under the header.
            scan.saw_box |= boxed;
            open = false;
            continue;
        }
        scan.saw_box |= boxed;
        let tokens: Vec<&str> = inner.split_whitespace().collect();
        let numeric = |t: &&str| number(t.trim_end_matches('*')).is_some();
        let first_is_gpu = tokens.first().is_some_and(|t| number(t).is_some());
        if first_is_gpu && tokens.iter().any(|t| *t == "MIG" || looks_like_profile(t)) {
            scan.rows.push(BoxRow {
                line: n,
                tokens,
                more: Vec::new(),
            });
            open = true;
        } else if open && tokens.iter().all(numeric) {
            if let Some(row) = scan.rows.last_mut() {
                row.more = tokens;
            }
            open = false;
        } else if first_is_gpu || !boxed {
            scan.warnings.push(Warning::TableLineSkipped {
                command,
                line: n,
                text: line.to_string(),
            });
            open = false;
        }
        // Anything else inside a box is the title or the column header.
    }
    Ok(scan)
}

/// Recognises the ways nvidia-smi says a listing is empty.
pub(super) fn none_found(line: &str) -> Option<NoneFound> {
    let lower = line.to_ascii_lowercase();
    if lower.contains("no mig-enabled devices found") {
        Some(NoneFound::NoMigEnabledDevices)
    } else if lower.starts_with("no ") && lower.contains("found") && lower.trim_end().ends_with("not found") {
        Some(NoneFound::NotFound)
    } else {
        None
    }
}

/// Turns rows into a table with `read`, which warns about and skips rows it cannot read. Output
/// with no readable row and no `No … found` line is an error, naming the first data row when
/// there was one, so a mangled table never reads as "nothing exists".
pub(super) fn build<'a, T>(
    text: &'a str,
    command: &'static str,
    expected: &str,
    read: impl Fn(&BoxRow<'a>) -> Result<T, RowError>,
) -> Result<MigTable<T>, Error> {
    let scan = scan(text, command)?;
    let mut table = MigTable {
        rows: Vec::new(),
        none_found: scan.none_found,
        warnings: scan.warnings,
    };
    let mut first_bad: Option<(usize, String)> = None;
    for row in &scan.rows {
        if let Some(named) = row.named()
            && profile(named.name).is_none()
        {
            table.warnings.push(Warning::TableProfileUnreadable {
                command,
                line: row.line,
                name: named.name.to_string(),
            });
        }
        match read(row) {
            Ok(r) => table.rows.push(r),
            Err(why) => {
                let line = row.tokens.join(" ");
                first_bad.get_or_insert_with(|| (row.line, format!("{why}: {line}")));
                table.warnings.push(Warning::TableRowSkipped {
                    command,
                    line: row.line,
                    why,
                    row: line,
                });
            }
        }
    }
    if table.rows.is_empty() && table.none_found.is_none() {
        if let Some((line, why)) = first_bad {
            return Err(Error::Parse {
                command,
                line,
                message: format!("no row could be read ({expected})"),
                text: why,
            });
        }
        if !scan.saw_box {
            return Err(nothing_parsed(command, text, expected));
        }
        table.warnings.push(Warning::TableNoRows { command });
    }
    Ok(table)
}

/// Reads a required numeric token.
pub(super) fn need(tokens: &[&str], at: usize, column: &'static str) -> Result<u32, RowError> {
    let token = tokens.get(at).ok_or(RowError::Missing { column })?;
    number(token).ok_or_else(|| RowError::NotANumber {
        column,
        token: token.to_string(),
    })
}

/// Reads an optional numeric token (absent in older layouts).
pub(super) fn maybe(tokens: &[&str], at: usize) -> Option<u32> {
    tokens.get(at).and_then(|t| number(t))
}

/// Reads `free/total`.
pub(super) fn free_total(token: Option<&&str>) -> Result<(u32, u32), RowError> {
    let token = token.ok_or(RowError::Missing { column: "Free/Total" })?;
    let not = || RowError::NotFreeTotal {
        token: token.to_string(),
    };
    let (free, total) = token.split_once('/').ok_or_else(not)?;
    match (number(free), number(total)) {
        (Some(f), Some(t)) => Ok((f, t)),
        _ => Err(not()),
    }
}

/// Reads a profile name; `None` when it is not of the form nvidia-smi prints (the row keeps
/// the text).
pub(super) fn profile(name: &str) -> Option<miggate_compat::MigProfile> {
    name.parse().ok()
}
