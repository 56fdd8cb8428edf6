//! The one error type of this crate.

use crate::escape::escape;
use crate::field_path::{PathSegment, render_path};

/// What went wrong reading a manifest or setting up a comparison. Every variant names what
/// failed and where, so a caller can print it as is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The input is larger than any manifest should be; refused before parsing.
    #[error("manifest is {size} bytes, over the {limit}-byte limit")]
    TooLarge {
        /// The input's size.
        size: usize,
        /// [`MAX_MANIFEST_BYTES`](crate::MAX_MANIFEST_BYTES), named so the message says it.
        limit: usize,
    },
    /// The input is empty or only white space.
    #[error("manifest is empty")]
    Empty,
    /// The input is not valid UTF-8.
    #[error("manifest is not UTF-8 text: invalid bytes at line {line} column {column}")]
    NotUtf8 {
        /// The line of the first invalid byte, from 1.
        line: usize,
        /// Its column in characters, from 1.
        column: usize,
    },
    /// YAML past one of the reading limits that guard against hostile documents.
    #[error("manifest YAML cannot be read: {why}")]
    YamlLimit {
        /// Which limit, in words.
        why: String,
    },
    /// JSON that does not parse, or does not fit the manifest's shape.
    #[error("invalid manifest JSON{}: {error}", at(path))]
    Json {
        /// The field it happened at, from the document root (`nvidia.devices[0].memoryMiB`);
        /// empty at the root, or where no field is involved.
        path: Vec<PathSegment>,
        /// serde_json's error, with the line and column.
        error: serde_json::Error,
    },
    /// YAML that does not parse, or does not fit the manifest's shape.
    #[error("invalid manifest YAML{}: {}", at(path), yaml_cause(error))]
    Yaml {
        /// The field it happened at, from the document root; empty at the root, or where no
        /// field is involved.
        path: Vec<PathSegment>,
        /// serde-saphyr's error, with the line, the column and the lines around them (boxed:
        /// it is large, and every `Result` of this crate would carry its size).
        error: Box<serde_saphyr::Error>,
    },
    /// A field no manifest mapping knows, refused by a strict reading
    /// ([`FieldValidation::Strict`](crate::FieldValidation::Strict)).
    #[error("unknown field `{}`{}{}", escape(&render_path(path)), line_of(*at), did_you_mean(*suggestion))]
    UnknownField {
        /// The field's path from the document root (`nvidia.devcies`).
        path: Vec<PathSegment>,
        /// The line and column the reader was at when it met the field, from 1.
        at: Option<(usize, usize)>,
        /// The known name at that place nearest to it, when one is near.
        suggestion: Option<&'static str>,
    },
    /// A manifest that could not be written out.
    #[error("cannot write manifest as YAML: {0}")]
    YamlWrite(serde_saphyr::SerializeError),
    /// A MIG profile that is not of the form nvidia-smi prints.
    #[error("`{profile}` is not a MIG profile: {why}")]
    InvalidProfile {
        /// The text that does not read as a profile; escaped when it came from a manifest.
        profile: String,
        /// What is wrong with it.
        why: String,
    },
    /// A UUID that is not in a form nvidia-smi prints; quoted escaped.
    #[error("`{uuid}` is not a GPU or MIG UUID: {why}")]
    InvalidUuid {
        /// The text given, escaped.
        uuid: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A manifest builder was asked for something no capture could produce (a MIG cut of a GPU
    /// that has no MIG, two devices with one UUID, a limit that is not a quantity), so a test
    /// built on it would compare a shape no real node has.
    #[error("cannot build manifest: {what}: {why}")]
    Build {
        /// What was asked for, escaped.
        what: String,
        /// Why it cannot be.
        why: &'static str,
    },
    /// A Go peer artifact recognised by its shape that cannot be translated.
    #[error("{what}: {why}")]
    Peer {
        /// Which artifact.
        what: &'static str,
        /// Why not.
        why: &'static str,
    },
    /// A check name that does not exist (in `--skip`, say).
    #[error("unknown check `{name}`; known checks: {known}")]
    UnknownCheck {
        /// The name as given, escaped for the message.
        name: String,
        /// Every valid name, comma-separated.
        known: String,
    },
    /// A minimum version that cannot be read.
    #[error("invalid {what} `{value}`: {why}")]
    InvalidOption {
        /// Which option.
        what: &'static str,
        /// The option's text as given, escaped for the message.
        value: String,
        /// What is expected.
        why: &'static str,
    },
}

/// serde-saphyr's error on one line, the cause once: its message with the line and column,
/// without the source snippet under it (which repeats the message), and a repeated key in the
/// words the JSON reader uses rather than the name of a reader option.
fn yaml_cause(error: &serde_saphyr::Error) -> String {
    let text = error.without_snippet().to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or_default();
    const POLICY: &str = ", set DuplicateKeyPolicy in Options if acceptable";
    let mut out = match (first.split_once("duplicate mapping key"), first.find(POLICY)) {
        (Some((before, rest)), Some(_)) => {
            let (key, after) = rest.split_once(POLICY).unwrap_or((rest, ""));
            match key.strip_prefix(": ") {
                Some(key) => format!("{before}duplicate field `{key}`{after}"),
                None => format!("{before}duplicate field{after}"),
            }
        }
        _ => first.to_string(),
    };
    // `msg at line 3, column 6` as the JSON reader and the snippet's head put it: the place
    // first, `line 3 column 6: msg`.
    if let Some((message, place)) = out.rsplit_once(" at line ")
        && let Some((line, column)) = place.split_once(", column ")
        && line.bytes().all(|b| b.is_ascii_digit())
        && column.bytes().all(|b| b.is_ascii_digit())
    {
        out = format!("line {line} column {column}: {message}");
    }
    // Anything after the first line (an alias's "defined here") joins it, not a new line.
    for line in lines {
        out.push_str("; ");
        out.push_str(line);
    }
    out
}

/// ` at line L column C`, or nothing where the position is not known.
fn line_of(at: Option<(usize, usize)>) -> String {
    at.map_or_else(String::new, |(line, column)| {
        format!(" at line {line} column {column}")
    })
}

/// `: did you mean `x`?`, or nothing.
fn did_you_mean(suggestion: Option<&str>) -> String {
    suggestion.map_or_else(String::new, |s| format!(": did you mean `{s}`?"))
}

/// ` at <path>`, or nothing at the root.
fn at(path: &[PathSegment]) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!(" at {}", render_path(path))
    }
}

// The wrapped errors are shown in each variant's message rather than as `source()`, so a
// caller printing the whole chain does not print them twice.
impl From<serde_json::Error> for Error {
    fn from(error: serde_json::Error) -> Self {
        Error::Json {
            path: Vec::new(),
            error,
        }
    }
}

impl From<serde_saphyr::Error> for Error {
    fn from(error: serde_saphyr::Error) -> Self {
        Error::Yaml {
            path: Vec::new(),
            error: Box::new(error),
        }
    }
}

impl From<serde_saphyr::SerializeError> for Error {
    fn from(e: serde_saphyr::SerializeError) -> Self {
        Error::YamlWrite(e)
    }
}
