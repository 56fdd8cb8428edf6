//! Every command's flags, one file per command, and the flag groups and value parsers several
//! commands share (as ripgrep keeps its flags in one place). A leaf for the commands: each
//! command's module reads its flags from here, and nothing here imports a command. Defaults
//! that another process must agree with (the webhook's, which the chart's Deployment passes)
//! are `miggate_wire::webhook`'s constants, not literals here.

pub mod capture;
pub mod check;
pub mod claim;
pub mod cluster;
pub mod convert;
pub mod deploy;
pub mod doctor;
pub mod place;
pub mod policy;
pub mod publish;
pub mod read;
pub mod recover;
pub mod webhook;

use std::ffi::OsStr;
use std::path::PathBuf;

use clap::builder::TypedValueParser;
use clap::error::ErrorKind;
use clap::{Arg, Command as ClapCommand};
use miggate_compat::escape::{MAX_QUOTED_BYTES, escape_within};
use miggate_store::StoreConfig;
use miggate_store::kube_store::KubeOptions;

/// How much of a flag's value an error quotes, and of a name inside it: both fit in one
/// message well under [`MAX_QUOTED_BYTES`] with room for the rest.
const FLAG_QUOTE_BYTES: usize = MAX_QUOTED_BYTES / 4;

/// A flag value read by a function of compat's, whose error quotes the value escaped and cut:
/// clap's own value errors quote it as typed. The function gives the reason, already escaped.
#[derive(Clone)]
pub(crate) struct FlagParser<T>(pub(crate) fn(&str) -> Result<T, String>);

impl<T: Clone + Send + Sync + 'static> TypedValueParser for FlagParser<T> {
    type Value = T;

    fn parse_ref(&self, cmd: &ClapCommand, arg: Option<&Arg>, value: &OsStr) -> Result<T, clap::Error> {
        let why = match value.to_str() {
            Some(text) => match (self.0)(text) {
                Ok(parsed) => return Ok(parsed),
                Err(why) => why,
            },
            None => "not UTF-8 text".to_string(),
        };
        let flag = arg.map_or_else(|| "the value".to_string(), ToString::to_string);
        let message = format!(
            "invalid value '{}' for '{flag}': {why}",
            escape_within(&value.to_string_lossy(), FLAG_QUOTE_BYTES)
        );
        Err(clap::Error::raw(ErrorKind::ValueValidation, message).format(&mut cmd.clone()))
    }
}

/// The format names `-o` takes anywhere: a file named one of them is almost surely a format
/// asked of a flag that writes a file.
const FORMAT_NAMES: &[&str] = &["table", "wide", "json", "yaml", "yml", "text", "name"];

/// `--out PATH` (also `-o PATH`): a path, but never a format's name, so `-o yaml` is an error
/// instead of a file named `yaml`.
pub(crate) fn out_path(text: &str) -> Result<PathBuf, String> {
    if FORMAT_NAMES.contains(&text.to_ascii_lowercase().as_str()) {
        return Err(format!(
            "that is an output format's name, not a file: this flag names the file to write \
             (./{} for a file of that name)",
            escape_within(text, FLAG_QUOTE_BYTES)
        ));
    }
    if text.is_empty() {
        return Err("expected a file path".to_string());
    }
    Ok(PathBuf::from(text))
}

/// `--store`: `kube` or `dir:PATH`.
pub(crate) fn store_arg(text: &str) -> Result<StoreConfig, String> {
    if text == "kube" {
        return Ok(StoreConfig::Kube(KubeOptions::default()));
    }
    match text.strip_prefix("dir:") {
        Some(path) if !path.is_empty() => Ok(StoreConfig::Dir(PathBuf::from(path))),
        _ => Err("expected kube or dir:PATH".into()),
    }
}
