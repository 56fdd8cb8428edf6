//! `nvidia-smi mig -lgipp` (and `-lcipp`): where each profile's instances can be placed.
//!
//! Boot recovery recreates GPU instances *with placement*, so that a rebuilt layout matches the
//! recorded one slice for slice; these lines say which starts a profile allows. The keyword is
//! `Placements:` or, with one placement, `Placement :`.

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use super::table::{MigTable, Placement, none_found};
use crate::error::Error;
use crate::failure;
use crate::text::number;
use crate::text::{nothing_parsed, numbered_lines};
use crate::warning::Warning;

/// The command, as named in errors and warnings.
pub const LGIPP: &str = crate::commands::LGIPP;

/// One profile's possible placements on one GPU (or, for `-lcipp`, in one GPU instance).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlacementList {
    /// The GPU index.
    pub gpu: u32,
    /// The GPU instance, on `-lcipp` lines (`GPU  0 GI  1 Profile ID …`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_instance_id: Option<u32>,
    /// The profile's numeric id: the number after `Profile ID` (`9` in `Profile ID  9`).
    pub profile_id: u32,
    /// Every placement the profile allows, in printed order.
    pub placements: Vec<Placement>,
}

static LINE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^GPU\s+(\d+)\s+(?:GI\s+(\d+)\s+)?Profile\s+ID\s+(\d+)\s+Placements?\s*:\s*\{([^}]*)\}\s*:\s*(\d+)\s*$",
    )
    .ok()
});

/// Reads `nvidia-smi mig -lgipp` lines such as `GPU  0 Profile ID  9 Placements: {0,4}:4`.
/// Other lines are skipped with a warning; output with no such line is an error unless
/// nvidia-smi said there is nothing (`No MIG-enabled devices found.`).
pub fn parse_placements(text: &str) -> Result<MigTable<PlacementList>, Error> {
    if let Some(err) = failure::classify(text) {
        return Err(err);
    }
    let mut table = MigTable {
        rows: Vec::new(),
        none_found: None,
        warnings: Vec::new(),
    };
    let re = LINE.as_ref();
    for (n, raw) in numbered_lines(text) {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(none) = none_found(line) {
            table.none_found = Some(none);
            continue;
        }
        match re.and_then(|re| re.captures(line)).and_then(|c| read(&c)) {
            Some(row) => table.rows.push(row),
            None => table.warnings.push(Warning::PlacementLineSkipped {
                line: n,
                text: line.to_string(),
            }),
        }
    }
    if table.rows.is_empty() && table.none_found.is_none() {
        return Err(nothing_parsed(
            LGIPP,
            text,
            "`GPU <n> Profile ID <id> Placements: {<start>,…}:<size>` lines",
        ));
    }
    Ok(table)
}

fn read(c: &regex::Captures<'_>) -> Option<PlacementList> {
    let size = number(c.get(5)?.as_str())?;
    let mut placements = Vec::new();
    for start in c
        .get(4)?
        .as_str()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        placements.push(Placement {
            start: number(start)?,
            size,
        });
    }
    Some(PlacementList {
        gpu: number(c.get(1)?.as_str())?,
        gpu_instance_id: match c.get(2) {
            Some(gi) => Some(number(gi.as_str())?),
            None => None,
        },
        profile_id: number(c.get(3)?.as_str())?,
        placements,
    })
}
