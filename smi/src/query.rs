//! `nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]`: one row per physical GPU.
//!
//! The query gives what `-L` does not: PCI bus id, memory, compute capability, the driver
//! version and, above all, each GPU's MIG mode, without which a MIG-enabled GPU with no slices
//! cannot be told from a whole one. The caller passes the field list it asked for, so output
//! without a header (`noheader`) reads the same as output with one; units may sit in the header
//! (`memory.total [MiB]`) or in the values (`81559 MiB`), and `[N/A]` / `[Not Supported]`
//! values are unknown, not text.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use miggate_compat::GpuUuid;
use regex::Regex;
use serde::Serialize;

use crate::error::Error;
use crate::failure;
use crate::text::{nothing_parsed, number, numbered_lines};
use crate::warning::Warning;

/// The command this parser reads, as named in errors and warnings.
pub const COMMAND: &str = crate::commands::QUERY;

/// The fields miggate asks for, in order: everything a manifest's `gpus` entry records.
pub const FIELDS: [&str; 9] = [
    "index",
    "uuid",
    "name",
    "pci.bus_id",
    "memory.total",
    "compute_cap",
    "driver_version",
    "mig.mode.current",
    "mig.mode.pending",
];

/// A parsed `--query-gpu` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct QueryTable {
    /// The fields the columns hold, in their canonical names (from the header when there was
    /// one, else the requested list).
    pub fields: Vec<String>,
    /// Whether the output began with a header line.
    pub header: bool,
    /// One row per GPU, in printed order.
    pub rows: Vec<QueryRow>,
    /// What was skipped or read as unknown, each naming the line; serialized as its words.
    pub warnings: Vec<Warning>,
}

/// One GPU's row. Every value is `None` when it was not asked for, or printed as `[N/A]`,
/// `[Not Supported]` or another bracketed non-value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct QueryRow {
    /// The 1-based line it was read from.
    pub line: usize,
    /// `index`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
    /// `uuid` (`GPU-…`), read as a GPU UUID.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid: Option<GpuUuid>,
    /// `name`, the product name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `pci.bus_id` (`00000000:18:00.0`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
    /// `memory.total`, in MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_total_mib: Option<u64>,
    /// `compute_cap` (`9.0`), as text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute_cap: Option<String>,
    /// `driver_version`, as text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_version: Option<String>,
    /// `mig.mode.current`: `Some(true)` for `Enabled`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mig_mode_current: Option<bool>,
    /// `mig.mode.pending`: `Some(true)` for `Enabled`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mig_mode_pending: Option<bool>,
    /// Fields this parser does not interpret, by canonical name, as printed.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub other: BTreeMap<String, String>,
}

/// Reads `--query-gpu` CSV output. `requested` is the field list passed to `--query-gpu=` (any
/// spelling nvidia-smi accepts: `gpu_name` or `name`); it is what names the columns when the
/// output has no header. When a header is present it wins, with a warning if it differs.
///
/// Errors: a known failure message (see [`failure::classify`]); a field an old driver does not
/// know ([`Error::QueryFieldRejected`], so the runner can retry without it); a `uuid` value that
/// is not a GPU UUID as nvidia-smi prints it ([`Error::InvalidUuid`], naming the line: it is
/// never recorded); output with no readable row ([`Error::Parse`]).
pub fn parse(text: &str, requested: &[&str]) -> Result<QueryTable, Error> {
    if let Some(err) = failure::classify(text) {
        return Err(err);
    }
    if let Some(field) = rejected_field(text) {
        return Err(Error::QueryFieldRejected {
            field,
            output: text.to_string(),
        });
    }
    let requested: Vec<String> = requested.iter().map(|f| canonical(f)).collect();
    let mut table = QueryTable::default();
    let mut lines = numbered_lines(text)
        .filter(|(_, l)| !l.trim().is_empty())
        .peekable();
    if let Some(&(n, first)) = lines.peek()
        && let Some(names) = header_names(first, &requested)
    {
        lines.next();
        if !requested.is_empty() && names != requested {
            table.warnings.push(Warning::QueryHeaderDiffers {
                line: n,
                header: names.clone(),
                requested: requested.clone(),
            });
        }
        table.header = true;
        table.fields = names;
    } else {
        table.fields = requested;
    }
    let mut data_lines = 0;
    for (n, line) in lines {
        data_lines += 1;
        if table.fields.is_empty() {
            break;
        }
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        if cells.len() != table.fields.len() {
            table.warnings.push(Warning::QueryRowSkipped {
                line: n,
                values: cells.len(),
                fields: table.fields.len(),
                text: line.trim().to_string(),
            });
            continue;
        }
        let row = read_row(n, &table.fields, &cells, &mut table.warnings)?;
        table.rows.push(row);
    }
    if table.rows.is_empty() {
        if table.fields.is_empty() {
            return Err(nothing_parsed(
                COMMAND,
                text,
                "a CSV header, or a requested field list",
            ));
        }
        if data_lines > 0 {
            return Err(nothing_parsed(
                COMMAND,
                text,
                &format!("rows of {} comma-separated values", table.fields.len()),
            ));
        }
        if !table.header {
            return Err(nothing_parsed(COMMAND, text, "CSV rows"));
        }
        table.warnings.push(Warning::QueryNoRows);
    }
    Ok(table)
}

/// The field an old driver refused, from its message `Field "compute_cap" is not a valid field
/// to query.`, so the runner can ask again without it; `None` when the text says no such thing.
pub fn rejected_field(output: &str) -> Option<String> {
    static RE: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(r#"(?i)field\s*["'`“”]?\s*([A-Za-z0-9_.\-]+)\s*["'`“”]?\s+is\s+not\s+a\s+valid\s+field"#)
            .ok()
    });
    let re = RE.as_ref()?;
    Some(re.captures(output)?.get(1)?.as_str().to_string())
}

/// The canonical field name for a requested or printed one: lower case, aliases folded
/// (`gpu_name` → `name`), a unit suffix (`memory.total [MiB]`) removed.
fn canonical(field: &str) -> String {
    let field = field.trim();
    let field = match field.find('[') {
        Some(at) => field[..at].trim(),
        None => field,
    };
    let field = field.to_ascii_lowercase();
    match field.as_str() {
        "gpu_name" => "name".to_string(),
        "gpu_uuid" => "uuid".to_string(),
        "gpu_bus_id" => "pci.bus_id".to_string(),
        "gpu_serial" => "serial".to_string(),
        _ => field,
    }
}

/// The header's field names if `line` is a header: its cells are the requested fields, or, with
/// no request to compare with, all look like field names (`memory.total [MiB]`).
fn header_names(line: &str, requested: &[String]) -> Option<Vec<String>> {
    let cells: Vec<&str> = line.split(',').map(str::trim).collect();
    let names: Vec<String> = cells.iter().map(|c| canonical(c)).collect();
    if !requested.is_empty() && names == requested {
        return Some(names);
    }
    let looks_like_name = |c: &&str| {
        let name = c.split('[').next().unwrap_or(c).trim();
        name.starts_with(|ch: char| ch.is_ascii_lowercase())
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.')
    };
    cells.iter().all(looks_like_name).then_some(names)
}

/// Builds one row from its cells (already split and trimmed, as many as `fields`).
fn read_row(
    n: usize,
    fields: &[String],
    cells: &[&str],
    warnings: &mut Vec<Warning>,
) -> Result<QueryRow, Error> {
    let mut row = QueryRow {
        line: n,
        ..QueryRow::default()
    };
    for (field, cell) in fields.iter().zip(cells) {
        let Some(value) = value(cell, field, n, warnings) else {
            continue;
        };
        match field.as_str() {
            "index" => {
                row.index = number(value);
                if row.index.is_none() {
                    warnings.push(Warning::QueryIndexNotANumber {
                        line: n,
                        value: value.to_string(),
                    });
                }
            }
            "uuid" => {
                let uuid = value.parse::<GpuUuid>().map_err(|error| Error::InvalidUuid {
                    at: format!("`{COMMAND}` line {n}"),
                    error,
                })?;
                row.uuid = Some(uuid);
            }
            "name" => row.name = Some(value.to_string()),
            "pci.bus_id" => row.pci_bus_id = Some(value.to_string()),
            "memory.total" => row.memory_total_mib = mebibytes(value, n, warnings),
            "compute_cap" => row.compute_cap = Some(value.to_string()),
            "driver_version" => row.driver_version = Some(value.to_string()),
            "mig.mode.current" => row.mig_mode_current = enabled(value, field, n, warnings),
            "mig.mode.pending" => row.mig_mode_pending = enabled(value, field, n, warnings),
            _ => {
                row.other.insert(field.clone(), value.to_string());
            }
        }
    }
    Ok(row)
}

/// A cell's value, or `None` for the ways nvidia-smi says it has none: `[N/A]`, `N/A`,
/// `[Not Supported]`, `Not Supported`, an empty cell. Other bracketed texts (`[Unknown Error]`,
/// `[GPU requires reset]`) are unknown too, with a warning.
fn value<'a>(cell: &'a str, field: &str, n: usize, warnings: &mut Vec<Warning>) -> Option<&'a str> {
    let bare = cell.trim_start_matches('[').trim_end_matches(']').trim();
    if bare.is_empty() || bare.eq_ignore_ascii_case("N/A") || bare.eq_ignore_ascii_case("Not Supported") {
        return None;
    }
    if cell.starts_with('[') && cell.ends_with(']') {
        warnings.push(Warning::QueryBracketed {
            line: n,
            field: field.to_string(),
            cell: cell.to_string(),
        });
        return None;
    }
    Some(cell)
}

/// `81559 MiB` or `81559` (with `nounits`) as MiB.
fn mebibytes(value: &str, n: usize, warnings: &mut Vec<Warning>) -> Option<u64> {
    let digits = value.strip_suffix("MiB").unwrap_or(value).trim();
    let parsed = (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse::<u64>().ok())
        .flatten();
    if parsed.is_none() {
        warnings.push(Warning::QueryMemoryUnreadable {
            line: n,
            value: value.to_string(),
        });
    }
    parsed
}

/// `Enabled` / `Disabled` as a flag.
fn enabled(value: &str, field: &str, n: usize, warnings: &mut Vec<Warning>) -> Option<bool> {
    if value.eq_ignore_ascii_case("Enabled") {
        Some(true)
    } else if value.eq_ignore_ascii_case("Disabled") {
        Some(false)
    } else {
        warnings.push(Warning::QueryMigModeUnreadable {
            line: n,
            field: field.to_string(),
            value: value.to_string(),
        });
        None
    }
}
