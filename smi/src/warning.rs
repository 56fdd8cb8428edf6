//! Every warning the parsers write, as one enum: the words live in [`Warning`]'s `Display`, and
//! the parsers name what they saw (the line, the text), kept typed until the warning is shown or
//! written. A table's `warnings` serialize as their words, as they always have.

use std::fmt;

use miggate_compat::escape::escape;
use miggate_compat::{DeviceUuid, GpuUuid};
use serde::{Serialize, Serializer};

use crate::commands::{LGIPP, LIST, QUERY};
use crate::mig_table::RowError;

/// What a parser skipped, guessed or read as unknown, naming the command and the line.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Warning {
    /// `-L`: a line that is neither a GPU nor a MIG line, skipped.
    ListLineSkipped {
        /// The 1-based line.
        line: usize,
        /// The line, trimmed.
        text: String,
    },
    /// `-L`: a GPU listed again (concatenated outputs), merged with its first listing.
    ListGpuAgain {
        /// The line of the repeat.
        line: usize,
        /// The GPU's index.
        index: u32,
        /// Its UUID, when the line had one.
        uuid: Option<GpuUuid>,
        /// The line it was first listed at.
        first: usize,
    },
    /// `-L`: a GPU index listed again with another UUID; both kept.
    ListGpuIndexAgain {
        /// The line of the repeat.
        line: usize,
        /// The index.
        index: u32,
        /// The line of the first GPU with that index.
        first: usize,
    },
    /// `-L`: a MIG device listed again, dropped.
    ListSliceAgain {
        /// The line of the repeat.
        line: usize,
        /// The device's UUID.
        uuid: DeviceUuid,
        /// The line it was first listed at.
        first: usize,
    },
    /// `-L`: a MIG line with no GPU line above it: its parent is unknown.
    ListOrphanSlice {
        /// The MIG line.
        line: usize,
    },
    /// `-L`: a legacy MIG UUID naming a parent other than the GPU it is listed under.
    ListParentMismatch {
        /// The MIG line.
        line: usize,
        /// The parent the UUID names.
        parent: GpuUuid,
        /// The GPU it is listed under.
        listed_under: GpuUuid,
    },
    /// `-L`: a GPU line without its `(UUID: …)` part.
    ListGpuWithoutUuid {
        /// The line.
        line: usize,
        /// The GPU's index.
        index: u32,
    },
    /// `-L`: a MIG line without its `Device <n>:` part.
    ListSliceWithoutDevice {
        /// The line.
        line: usize,
    },
    /// `-L`: a MIG line without its `(UUID: …)` part.
    ListSliceWithoutUuid {
        /// The line.
        line: usize,
    },
    /// `-L`: a MIG line that names no profile.
    ListSliceWithoutProfile {
        /// The line.
        line: usize,
    },
    /// `-L`: a MIG line whose profile text is not a MIG profile (the text is kept on the slice).
    ListProfileUnreadable {
        /// The line.
        line: usize,
        /// The text read as the profile, unchanged.
        profile: String,
        /// What is wrong with it.
        why: String,
    },
    /// `-L`: white space inside a UUID, removed.
    ListUuidSpaced {
        /// The line.
        line: usize,
        /// The UUID as read, without the white space.
        uuid: String,
    },

    /// `--query-gpu`: the header names other fields than were asked for; read by the header.
    QueryHeaderDiffers {
        /// The header's line.
        line: usize,
        /// The fields the header names, canonical.
        header: Vec<String>,
        /// The fields asked for, canonical.
        requested: Vec<String>,
    },
    /// `--query-gpu`: a row with another number of values than there are fields, skipped.
    QueryRowSkipped {
        /// The line.
        line: usize,
        /// How many values it has.
        values: usize,
        /// How many fields there are.
        fields: usize,
        /// The line, trimmed.
        text: String,
    },
    /// `--query-gpu`: an `index` that is not a number.
    QueryIndexNotANumber {
        /// The line.
        line: usize,
        /// The value.
        value: String,
    },
    /// `--query-gpu`: a bracketed value other than `[N/A]` or `[Not Supported]`, taken as
    /// unknown.
    QueryBracketed {
        /// The line.
        line: usize,
        /// The field.
        field: String,
        /// The cell, brackets and all.
        cell: String,
    },
    /// `--query-gpu`: a `memory.total` that is not a MiB amount, taken as unknown.
    QueryMemoryUnreadable {
        /// The line.
        line: usize,
        /// The value.
        value: String,
    },
    /// `--query-gpu`: a MIG mode other than `Enabled` or `Disabled`, taken as unknown.
    QueryMigModeUnreadable {
        /// The line.
        line: usize,
        /// The field (`mig.mode.current`, `mig.mode.pending`).
        field: String,
        /// The value.
        value: String,
    },
    /// `--query-gpu`: a header and no row.
    QueryNoRows,

    /// A MIG box table: a line that is not a row of it, skipped.
    TableLineSkipped {
        /// The command (`nvidia-smi mig -lgi`, …).
        command: &'static str,
        /// The line.
        line: usize,
        /// The line, trimmed.
        text: String,
    },
    /// A MIG box table: a row whose profile name is not a MIG profile; its profile is unknown.
    TableProfileUnreadable {
        /// The command.
        command: &'static str,
        /// The row's line.
        line: usize,
        /// The name as printed.
        name: String,
    },
    /// A MIG box table: a row that cannot be read, skipped.
    TableRowSkipped {
        /// The command.
        command: &'static str,
        /// The row's line.
        line: usize,
        /// Why it cannot be read.
        why: RowError,
        /// The row's tokens, joined by spaces.
        row: String,
    },
    /// A MIG box table with no row and no `No … found` line.
    TableNoRows {
        /// The command.
        command: &'static str,
    },
    /// `mig -lgipp`: a line that is not a placement line, skipped.
    PlacementLineSkipped {
        /// The line.
        line: usize,
        /// The line, trimmed.
        text: String,
    },
}

/// Outside text as a warning quotes it: in backticks, with terminal controls neutralised and
/// cut to 4 KiB (see [`miggate_compat::escape::escape`]).
struct Quoted<'a>(&'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`", escape(self.0))
    }
}

/// A list of names quoted as one text (`a, b`).
struct QuotedList<'a>(&'a [String]);

impl fmt::Display for QuotedList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Quoted(&self.0.join(", ")).fmt(f)
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.fmt_listing(f) {
            Some(written) => written,
            None => self.fmt_tables(f),
        }
    }
}

impl Warning {
    /// The words of a `-L` listing's warning; `None` for another command's.
    fn fmt_listing(&self, f: &mut fmt::Formatter<'_>) -> Option<fmt::Result> {
        let list = LIST;
        Some(match self {
            Warning::ListLineSkipped { line, text } => write!(
                f,
                "{list} line {line}: neither a GPU nor a MIG line, skipped: {}",
                Quoted(text)
            ),
            Warning::ListGpuAgain {
                line,
                index,
                uuid,
                first,
            } => {
                let what = uuid.as_deref().unwrap_or("a GPU without UUID");
                write!(
                    f,
                    "{list} line {line}: GPU {index} ({what}) listed again (concatenated outputs?); merged with line {first}"
                )
            }
            Warning::ListGpuIndexAgain { line, index, first } => write!(
                f,
                "{list} line {line}: GPU index {index} listed again with a different UUID (line {first}); kept both"
            ),
            Warning::ListSliceAgain { line, uuid, first } => write!(
                f,
                "{list} line {line}: MIG device {uuid} listed again (first at line {first}); dropped"
            ),
            Warning::ListOrphanSlice { line } => write!(
                f,
                "{list} line {line}: MIG line with no GPU line above it: parent unknown"
            ),
            Warning::ListParentMismatch {
                line,
                parent,
                listed_under,
            } => write!(
                f,
                "{list} line {line}: MIG UUID names parent {parent} but is listed under {listed_under}; kept under the GPU above it"
            ),
            Warning::ListGpuWithoutUuid { line, index } => write!(
                f,
                "{list} line {line}: GPU {index} has no `(UUID: …)` part; its UUID is unknown"
            ),
            Warning::ListSliceWithoutDevice { line } => {
                write!(f, "{list} line {line}: MIG line has no `Device <n>:` part")
            }
            Warning::ListSliceWithoutUuid { line } => write!(
                f,
                "{list} line {line}: MIG line has no `(UUID: …)` part; its UUID is unknown"
            ),
            Warning::ListSliceWithoutProfile { line } => write!(
                f,
                "{list} line {line}: MIG line names no profile; its shape is unknown"
            ),
            // The words of `miggate_compat::Error::InvalidProfile`, whose fields these are.
            Warning::ListProfileUnreadable { line, profile, why } => write!(
                f,
                "{list} line {line}: `{profile}` is not a MIG profile: {why}; the slice's shape is unknown"
            ),
            Warning::ListUuidSpaced { line, uuid } => write!(
                f,
                "{list} line {line}: white space inside UUID removed, read as {}",
                Quoted(uuid)
            ),
            _ => return None,
        })
    }

    /// The words of a `--query-gpu` or MIG table's warning (every one
    /// [`Warning::fmt_listing`] leaves; each listing variant named, so a new one is placed).
    fn fmt_tables(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let query = QUERY;
        match self {
            Warning::QueryHeaderDiffers {
                line,
                header,
                requested,
            } => write!(
                f,
                "{query} line {line}: header names {}, but {} was asked for; read by the header",
                QuotedList(header),
                QuotedList(requested)
            ),
            Warning::QueryRowSkipped {
                line,
                values,
                fields,
                text,
            } => write!(
                f,
                "{query} line {line}: {values} values for {fields} fields, skipped: {}",
                Quoted(text)
            ),
            Warning::QueryIndexNotANumber { line, value } => {
                write!(f, "{query} line {line}: index {} is not a number", Quoted(value))
            }
            Warning::QueryBracketed { line, field, cell } => write!(
                f,
                "{query} line {line}: {} is {}; taken as unknown",
                Quoted(field),
                Quoted(cell)
            ),
            Warning::QueryMemoryUnreadable { line, value } => write!(
                f,
                "{query} line {line}: memory.total {} is not a MiB amount; taken as unknown",
                Quoted(value)
            ),
            Warning::QueryMigModeUnreadable { line, field, value } => write!(
                f,
                "{query} line {line}: {field} is {}, not Enabled or Disabled; taken as unknown",
                Quoted(value)
            ),
            Warning::QueryNoRows => write!(f, "{query}: a header and no rows: no GPU listed"),
            Warning::TableLineSkipped { command, line, text } => write!(
                f,
                "{command} line {line}: not a row of this table, skipped: {}",
                Quoted(text)
            ),
            Warning::TableProfileUnreadable { command, line, name } => write!(
                f,
                "{command} line {line}: {} is not a MIG profile name; its profile is unknown",
                Quoted(name)
            ),
            Warning::TableRowSkipped {
                command,
                line,
                why,
                row,
            } => write!(f, "{command} line {line}: {why}, skipped: {}", Quoted(row)),
            Warning::TableNoRows { command } => {
                write!(f, "{command}: a table with no rows and no `No … found` line")
            }
            Warning::PlacementLineSkipped { line, text } => write!(
                f,
                "{LGIPP} line {line}: not a placement line, skipped: {}",
                Quoted(text)
            ),
            Warning::ListLineSkipped { .. }
            | Warning::ListGpuAgain { .. }
            | Warning::ListGpuIndexAgain { .. }
            | Warning::ListSliceAgain { .. }
            | Warning::ListOrphanSlice { .. }
            | Warning::ListParentMismatch { .. }
            | Warning::ListGpuWithoutUuid { .. }
            | Warning::ListSliceWithoutDevice { .. }
            | Warning::ListSliceWithoutUuid { .. }
            | Warning::ListSliceWithoutProfile { .. }
            | Warning::ListProfileUnreadable { .. }
            | Warning::ListUuidSpaced { .. } => Ok(()),
        }
    }
}

impl Warning {
    /// Whether the warning says `text`, word for word: rendered piece by piece against it, so
    /// nothing is allocated.
    pub fn says(&self, text: &str) -> bool {
        miggate_compat::warning::displays_as(self, text)
    }
}

impl PartialEq<str> for Warning {
    fn eq(&self, other: &str) -> bool {
        self.says(other)
    }
}

impl PartialEq<&str> for Warning {
    fn eq(&self, other: &&str) -> bool {
        self.says(other)
    }
}

impl PartialEq<String> for Warning {
    fn eq(&self, other: &String) -> bool {
        self.says(other)
    }
}

/// Written as its words: the tables' `warnings` serialize as lists of strings.
impl Serialize for Warning {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The profile warning repeats the words of the error it was read from.
    #[test]
    fn an_unreadable_profile_says_what_the_reader_said() {
        let error = "7g.80GB+x!".parse::<miggate_compat::MigProfile>().unwrap_err();
        let miggate_compat::Error::InvalidProfile { profile, why } = &error else {
            panic!("not a profile error: {error}");
        };
        let w = Warning::ListProfileUnreadable {
            line: 3,
            profile: profile.clone(),
            why: why.clone(),
        };
        assert_eq!(
            w.to_string(),
            format!(
                "{} line 3: {error}; the slice's shape is unknown",
                crate::list::COMMAND
            )
        );
    }
}
