//! `--restore-pod-selector`, read once at startup into kube's typed [`Selector`]: the pod
//! watch sends the API server its canonical text, and a restore pod's creation is matched
//! against the same value, so what the webhook watches and what it asks of a restore pod
//! cannot part.
//!
//! kube-core has the typed selector and its matching but no reader of the text, so the text
//! is read here as the API server reads it (`k8s.io/apimachinery/pkg/labels`' `Parse`):
//! requirements joined by `,`, each `key`, `!key`, `key=value`, `key==value`, `key!=value`,
//! `key in (v1,v2)` or `key notin (v1,v2)`, keys and values checked as label keys and values.
//! `>` and `<` have no [`Expression`], so a selector with them is refused rather than read
//! another way than the API server reads it.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use kube::core::{Expression, Selector, SelectorExt};
use miggate_compat::escape::escape_within;

/// A label selector for restore pods, parsed; shown (and sent to the API server) in its
/// canonical text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestorePodSelector {
    selector: Selector,
    /// The canonical text, made once: every refusal names it.
    text: String,
}

impl RestorePodSelector {
    /// The typed selector.
    pub fn selector(&self) -> &Selector {
        &self.selector
    }

    /// The canonical text (`miggate.io/restore=true`, `tier in (a,b)`), as the API server
    /// reads it.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether it selects every pod (no requirement: an empty flag), so it narrows nothing.
    pub fn selects_all(&self) -> bool {
        self.selector.selects_all()
    }

    /// Whether a pod of these labels is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.selector.matches(labels)
    }
}

impl fmt::Display for RestorePodSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for RestorePodSelector {
    type Err = SelectorError;

    fn from_str(text: &str) -> Result<Self, SelectorError> {
        let selector: Selector = Parser::new(text).requirements()?.into_iter().collect();
        Ok(RestorePodSelector {
            text: selector.to_string(),
            selector,
        })
    }
}

/// Why a selector's text cannot be read; outside text in it is escaped and bounded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A token where another was expected.
    #[error("at byte {at}: found {found}, expected {expected}")]
    Syntax {
        /// The byte offset of what was found.
        at: usize,
        /// What was found, quoted.
        found: String,
        /// What may stand there.
        expected: &'static str,
    },
    /// A key that is not a label key.
    #[error("`{key}` is not a label key: {why}")]
    Key {
        /// The key, escaped.
        key: String,
        /// Which rule it breaks.
        why: &'static str,
    },
    /// A value that is not a label value.
    #[error(
        "`{value}` (of key `{key}`) is not a label value: at most 63 of A-Z, a-z, 0-9, `-`, `_` and `.`, a letter or digit at each end"
    )]
    Value {
        /// The key, escaped.
        key: String,
        /// The value, escaped.
        value: String,
    },
    /// `>` or `<`, which the API server reads but kube's selector cannot hold.
    #[error(
        "`{key} {op} ...`: the webhook cannot match `{op}`; use =, ==, !=, in, notin, a key alone or !key"
    )]
    Unsupported {
        /// The key, escaped.
        key: String,
        /// The operator.
        op: &'static str,
    },
}

/// A token of a selector's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token<'s> {
    /// A run of anything but whitespace and `=!(),<>`: a key, a value, or `in`/`notin`.
    Word(&'s str),
    Not,
    Equals,
    DoubleEquals,
    NotEquals,
    Greater,
    Less,
    Open,
    Close,
    Comma,
    End,
}

impl Token<'_> {
    /// The token as an error quotes it.
    fn quoted(self) -> String {
        let text = match self {
            Token::Word(w) => return format!("`{}`", escape_within(w, 64)),
            Token::End => return "the end".into(),
            Token::Not => "!",
            Token::Equals => "=",
            Token::DoubleEquals => "==",
            Token::NotEquals => "!=",
            Token::Greater => ">",
            Token::Less => "<",
            Token::Open => "(",
            Token::Close => ")",
            Token::Comma => ",",
        };
        format!("`{text}`")
    }
}

/// The reader: a lexer with one token of lookahead, and the grammar of `labels.Parse`.
struct Parser<'s> {
    text: &'s str,
    at: usize,
    /// The next token and where it starts, once peeked.
    peeked: Option<(usize, Token<'s>)>,
}

impl<'s> Parser<'s> {
    fn new(text: &'s str) -> Self {
        Parser {
            text,
            at: 0,
            peeked: None,
        }
    }

    fn lex(&mut self) -> (usize, Token<'s>) {
        let bytes = self.text.as_bytes();
        while bytes
            .get(self.at)
            .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        {
            self.at += 1;
        }
        let start = self.at;
        let Some(&b) = bytes.get(start) else {
            return (start, Token::End);
        };
        let next_is_eq = bytes.get(start + 1) == Some(&b'=');
        let (token, len) = match b {
            b'!' if next_is_eq => (Token::NotEquals, 2),
            b'!' => (Token::Not, 1),
            b'=' if next_is_eq => (Token::DoubleEquals, 2),
            b'=' => (Token::Equals, 1),
            b'>' => (Token::Greater, 1),
            b'<' => (Token::Less, 1),
            b'(' => (Token::Open, 1),
            b')' => (Token::Close, 1),
            b',' => (Token::Comma, 1),
            _ => {
                let len = bytes
                    .get(start..)
                    .unwrap_or_default()
                    .iter()
                    .position(|b| is_separator(*b))
                    .unwrap_or(bytes.len() - start);
                // Separators are ASCII, so the run ends on a character boundary.
                (
                    Token::Word(self.text.get(start..start + len).unwrap_or_default()),
                    len,
                )
            }
        };
        self.at = start + len;
        (start, token)
    }

    fn peek(&mut self) -> Token<'s> {
        if self.peeked.is_none() {
            self.peeked = Some(self.lex());
        }
        self.peeked.map_or(Token::End, |(_, t)| t)
    }

    fn next(&mut self) -> (usize, Token<'s>) {
        match self.peeked.take() {
            Some(peeked) => peeked,
            None => self.lex(),
        }
    }

    fn unexpected<T>(&mut self, expected: &'static str) -> Result<T, SelectorError> {
        let (at, found) = self.next();
        Err(SelectorError::Syntax {
            at,
            found: found.quoted(),
            expected,
        })
    }

    /// The whole text: requirements joined by `,`; none for an empty text.
    fn requirements(mut self) -> Result<Vec<Expression>, SelectorError> {
        let mut out = Vec::new();
        if self.peek() == Token::End {
            return Ok(out);
        }
        loop {
            if !matches!(self.peek(), Token::Word(_) | Token::Not) {
                return self.unexpected("a label key or `!`");
            }
            out.push(self.requirement()?);
            match self.peek() {
                Token::End => return Ok(out),
                Token::Comma => {
                    self.next();
                }
                _ => return self.unexpected("`,` or the end"),
            }
        }
    }

    fn requirement(&mut self) -> Result<Expression, SelectorError> {
        let negated = self.peek() == Token::Not;
        if negated {
            self.next();
        }
        let key = match self.next() {
            (_, Token::Word(key)) => label_key(key)?,
            (at, found) => {
                return Err(SelectorError::Syntax {
                    at,
                    found: found.quoted(),
                    expected: "a label key",
                });
            }
        };
        if negated {
            return Ok(Expression::DoesNotExist(key));
        }
        Ok(match self.peek() {
            Token::End | Token::Comma => Expression::Exists(key),
            Token::Equals | Token::DoubleEquals => {
                self.next();
                let value = self.exact_value(&key)?;
                Expression::Equal(key, value)
            }
            Token::NotEquals => {
                self.next();
                let value = self.exact_value(&key)?;
                Expression::NotEqual(key, value)
            }
            Token::Word("in") => {
                self.next();
                let values = self.values(&key)?;
                Expression::In(key, values)
            }
            Token::Word("notin") => {
                self.next();
                let values = self.values(&key)?;
                Expression::NotIn(key, values)
            }
            Token::Greater | Token::Less => {
                let op = if self.peek() == Token::Greater { ">" } else { "<" };
                return Err(SelectorError::Unsupported {
                    key: escape_within(&key, 317).into_owned(),
                    op,
                });
            }
            _ => return self.unexpected("`=`, `==`, `!=`, `in`, `notin`, `,` or the end"),
        })
    }

    /// The value after `=`, `==` or `!=`: empty before `,` or the end, as the API server reads it.
    fn exact_value(&mut self, key: &str) -> Result<String, SelectorError> {
        match self.peek() {
            Token::End | Token::Comma => Ok(String::new()),
            Token::Word(value) => {
                self.next();
                label_value(key, value)
            }
            _ => self.unexpected("a label value"),
        }
    }

    /// `(v1,v2,...)`: an empty place in the list is the empty value, as the API server reads it.
    fn values(&mut self, key: &str) -> Result<BTreeSet<String>, SelectorError> {
        if self.peek() != Token::Open {
            return self.unexpected("`(`");
        }
        self.next();
        let mut values = BTreeSet::new();
        let mut want_value = true;
        loop {
            match self.peek() {
                Token::Word(value) if want_value => {
                    self.next();
                    values.insert(label_value(key, value)?);
                    want_value = false;
                }
                Token::Comma => {
                    self.next();
                    if want_value {
                        values.insert(String::new());
                    }
                    want_value = true;
                }
                Token::Close => {
                    self.next();
                    if want_value {
                        values.insert(String::new());
                    }
                    return Ok(values);
                }
                _ if want_value => return self.unexpected("a label value, `,` or `)`"),
                _ => return self.unexpected("`,` or `)`"),
            }
        }
    }
}

/// What ends a word: whitespace and the operators' characters.
fn is_separator(b: u8) -> bool {
    matches!(
        b,
        b' ' | b'\t' | b'\r' | b'\n' | b'=' | b'!' | b'(' | b')' | b',' | b'<' | b'>'
    )
}

/// A label key (`validation.IsQualifiedName`): a name, optionally after a DNS subdomain and `/`.
fn label_key(key: &str) -> Result<String, SelectorError> {
    let bad = |why| SelectorError::Key {
        key: escape_within(key, 317).into_owned(),
        why,
    };
    let name = match key.split_once('/') {
        None => key,
        Some((_, name)) if name.contains('/') => return Err(bad("at most one `/`")),
        Some(("", _)) => return Err(bad("the prefix before `/` is empty")),
        Some((prefix, _)) if !miggate_wire::dns::is_dns_subdomain(prefix) => {
            return Err(bad("the prefix before `/` is not a lower-case DNS subdomain"));
        }
        Some((_, name)) => name,
    };
    if !is_label_value(name) {
        return Err(bad(
            "its name is not 1 to 63 of A-Z, a-z, 0-9, `-`, `_` and `.`, a letter or digit at each end",
        ));
    }
    Ok(key.to_string())
}

/// A Kubernetes label value that is not empty, and a label key's name: at most 63 bytes of
/// `[A-Za-z0-9._-]`, alphanumeric at both ends.
pub(crate) fn is_label_value(v: &str) -> bool {
    let b = v.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A label value (`validation.IsValidLabelValue`): empty, or a name's characters.
fn label_value(key: &str, value: &str) -> Result<String, SelectorError> {
    if value.is_empty() || is_label_value(value) {
        return Ok(value.to_string());
    }
    Err(SelectorError::Value {
        key: escape_within(key, 317).into_owned(),
        value: escape_within(value, 128).into_owned(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rstest::rstest;

    /// Each form the API server reads, in its canonical text.
    #[rstest]
    #[case::equals("miggate.io/restore=true", "miggate.io/restore=true")]
    #[case::double_equals(" a == b ", "a=b")]
    #[case::not_equals("a!=b", "a!=b")]
    #[case::empty_value("a=", "a=")]
    #[case::empty_value_before_a_comma("a=,b", "a=,b")]
    #[case::exists("a", "a")]
    #[case::does_not_exist("! a", "!a")]
    #[case::in_set("tier in (b, a)", "tier in (a,b)")]
    #[case::notin_set("tier notin (a)", "tier notin (a)")]
    #[case::empty_set_is_the_empty_value("a in ()", "a in ()")]
    #[case::an_empty_place_is_the_empty_value("a in (,b)", "a in (,b)")]
    #[case::keywords_as_key_and_value("in in (in,notin)", "in in (in,notin)")]
    #[case::several("a=b,!c, d in (e)", "a=b,!c,d in (e)")]
    #[case::empty("", "")]
    #[case::blank("  ", "")]
    fn a_selector_reads_as_the_api_server_reads_it(#[case] text: &str, #[case] canonical: &str) {
        let s: RestorePodSelector = text.parse().unwrap();
        assert_eq!(s.as_str(), canonical);
        assert_eq!(s.selects_all(), canonical.is_empty());
        // The canonical text reads back to the same selector.
        assert_eq!(canonical.parse::<RestorePodSelector>().unwrap(), s);
    }

    #[rstest]
    #[case::trailing_comma("a=b,", "at byte 4: found the end, expected a label key or `!`")]
    #[case::leading_comma(",a", "at byte 0: found `,`, expected a label key or `!`")]
    #[case::two_values("a=b c", "at byte 4: found `c`, expected `,` or the end")]
    #[case::unclosed("a in (b", "at byte 7: found the end, expected `,` or `)`")]
    #[case::no_parenthesis("a in b", "at byte 5: found `b`, expected `(`")]
    #[case::negated_with_value("!a=b", "at byte 2: found `=`, expected `,` or the end")]
    #[case::bad_value("a=-b", "`-b` (of key `a`) is not a label value")]
    #[case::bad_key("-a=b", "`-a` is not a label key: its name")]
    #[case::upper_case_prefix("Miggate.io/a=b", "the prefix before `/` is not a lower-case DNS subdomain")]
    #[case::two_slashes("a/b/c", "at most one `/`")]
    #[case::empty_prefix("/a", "the prefix before `/` is empty")]
    #[case::greater_than("a > 1", "`a > ...`: the webhook cannot match `>`")]
    #[case::control_escaped("a=\u{1b}[2J", "`\\u{1b}[2J` (of key `a`)")]
    fn a_selector_the_api_server_would_not_read_is_refused(#[case] text: &str, #[case] says: &str) {
        let e = text.parse::<RestorePodSelector>().unwrap_err().to_string();
        assert!(e.contains(says), "{e}");
    }
}
