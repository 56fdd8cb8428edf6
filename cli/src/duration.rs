//! Durations on the command line: `5s`, `500ms`, `2m`, `1h30m` (humantime's units), or a bare
//! number, which keeps the flag's old meaning of seconds. Each flag keeps its bounds.

use std::ffi::OsStr;
use std::time::Duration;

use clap::builder::TypedValueParser;
use clap::error::ErrorKind;
use clap::{Arg, Command};
use miggate_compat::escape::{MAX_QUOTED_BYTES, escape_within};

/// A duration flag's parser, with the shortest and longest value it takes.
#[derive(Debug, Clone, Copy)]
pub struct DurationParser {
    /// The shortest value taken.
    pub min: Duration,
    /// The longest value taken.
    pub max: Duration,
}

impl DurationParser {
    /// Values from `min` to `max` seconds.
    pub const fn seconds(min: u64, max: u64) -> DurationParser {
        DurationParser {
            min: Duration::from_secs(min),
            max: Duration::from_secs(max),
        }
    }

    /// The duration `text` says, within the bounds; the error in words.
    pub fn parse(&self, text: &str) -> Result<Duration, String> {
        let text = text.trim();
        let value = match text.parse::<u64>() {
            Ok(seconds) => Duration::from_secs(seconds),
            Err(_) => humantime::parse_duration(text).map_err(|_| {
                "expected a duration such as 30s, 500ms or 2m (a bare number is seconds)".to_string()
            })?,
        };
        if value < self.min || value > self.max {
            return Err(format!(
                "expected from {} to {}",
                humantime::format_duration(self.min),
                humantime::format_duration(self.max)
            ));
        }
        Ok(value)
    }
}

impl TypedValueParser for DurationParser {
    type Value = Duration;

    fn parse_ref(&self, cmd: &Command, arg: Option<&Arg>, value: &OsStr) -> Result<Duration, clap::Error> {
        let why = match value.to_str() {
            Some(text) => match self.parse(text) {
                Ok(d) => return Ok(d),
                Err(why) => why,
            },
            None => "not UTF-8 text".to_string(),
        };
        let flag = arg.map_or_else(|| "the value".to_string(), ToString::to_string);
        let message = format!(
            "invalid value '{}' for '{flag}': {why}",
            escape_within(&value.to_string_lossy(), MAX_QUOTED_BYTES / 4)
        );
        Err(clap::Error::raw(ErrorKind::ValueValidation, message).format(&mut cmd.clone()))
    }
}

/// A duration as the flags take it back: `30s`, `2m`, `500ms`.
pub fn shown(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::bare_number_is_seconds("30", Ok(Duration::from_secs(30)))]
    #[case::seconds("5s", Ok(Duration::from_secs(5)))]
    #[case::milliseconds("1500ms", Ok(Duration::from_millis(1500)))]
    #[case::minutes("2m", Ok(Duration::from_secs(120)))]
    #[case::too_short("500ms", Err("expected from 1s to 1h".to_string()))]
    #[case::too_long("2h", Err("expected from 1s to 1h".to_string()))]
    #[case::not_a_duration(
        "soon",
        Err("expected a duration such as 30s, 500ms or 2m (a bare number is seconds)".to_string())
    )]
    fn durations_read_with_units(#[case] text: &str, #[case] expected: Result<Duration, String>) {
        assert_eq!(DurationParser::seconds(1, 3600).parse(text), expected);
    }
}
