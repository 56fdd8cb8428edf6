//! No module circle in any workspace crate: no two modules of a crate name each other, directly
//! or around a loop.
//!
//! A circle makes two modules one unit that can only be read, tested and changed together, and
//! the docs' layering (`docs/architecture.md`) a claim nothing holds. This test reads every
//! crate's `src/**/*.rs`, takes each module's references to other modules of its crate through
//! `crate::` and `super::` paths (a parent's bare paths to its own `mod` children are its parts,
//! not imports), resolves a name the crate root re-exports (`pub use x::Y` in `lib.rs`) to the
//! module that defines it, and reports every strongly connected component of that graph by name.
//! Comments, string literals and `#[cfg(test)]` items are skipped: a test may use anything.
//!
//! Everything is iterative (explicit stacks) and bounded by the files' sizes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::{Path, PathBuf};

/// Circles known to remain, each a crate (its directory) and its modules, which the test
/// requires to be exactly what it finds: fixing one fails the test until its entry is removed
/// here, and a new one fails it too. None remain; an entry here is a debt with a name.
const KNOWN: &[(&str, &[&str])] = &[];

#[test]
fn no_workspace_crate_has_a_module_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found: BTreeSet<(String, Vec<String>)> = BTreeSet::new();
    let mut report = Vec::new();
    let members = workspace_members(&root);
    assert!(members.len() >= 5, "read the workspace members: {members:?}");
    for member in members {
        let src = root.join(&member).join("src");
        let graph = ModuleGraph::read(&src);
        assert!(
            !graph.modules.is_empty(),
            "no module read under {}",
            src.display()
        );
        for component in graph.circles() {
            report.push(format!(
                "{member}: {} (component: {})",
                graph.describe(&component),
                component.join(", ")
            ));
            found.insert((member.clone(), component));
        }
    }
    let known: BTreeSet<(String, Vec<String>)> = KNOWN
        .iter()
        .map(|(c, ms)| (c.to_string(), ms.iter().map(|m| m.to_string()).collect()))
        .collect();
    assert!(
        found == known,
        "module circles found:\n  {}\nknown (allowed) circles: {known:?}",
        report.join("\n  ")
    );
}

/// The checker itself, on a crate written here: it must see a circle through `crate::`, one
/// through `super::` and a re-export, and none in a tree or inside `#[cfg(test)]`.
#[test]
fn the_checker_finds_circles_and_only_circles() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |rel: &str, text: &str| {
        let p = src.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("lib.rs", "mod a; mod b; mod c; mod d; mod e; pub use e::Thing;\n");
    write(
        "a.rs",
        "use crate::b::B;\n// crate::d is only a comment\nconst S: &str = \"crate::d\";\n",
    );
    write("b.rs", "use crate::{c::C, d};\n");
    write("c.rs", "pub struct C; fn f() -> crate::a::A { todo!() }\n");
    write(
        "d.rs",
        "use crate::Thing;\n#[cfg(test)]\nmod tests { use crate::a::A; }\n",
    );
    write("e/mod.rs", "mod inner; pub struct Thing;\n");
    write("e/inner.rs", "use super::Thing;\n");
    let graph = ModuleGraph::read(src);
    assert_eq!(graph.circles(), [vec!["a".to_string(), "b".into(), "c".into()]]);
    assert_eq!(graph.describe(&graph.circles()[0]), "a -> b -> c -> a");

    write("e/mod.rs", "mod inner; pub struct Thing; use crate::d::D;\n");
    let graph = ModuleGraph::read(src);
    assert_eq!(graph.circles()[1], ["d".to_string(), "e".into()]);

    // A name taken through a module's own re-export is a reference to that module; taken from
    // where it is defined, it is not.
    write(
        "e/mod.rs",
        "mod inner; pub use inner::Thing; fn f(_: crate::d::D) {}\n",
    );
    write("e/inner.rs", "pub struct Thing;\n");
    write("d.rs", "use crate::e::Thing;\n");
    assert_eq!(ModuleGraph::read(src).circles()[1], ["d".to_string(), "e".into()]);
    write("d.rs", "use crate::e::inner::Thing;\n");
    assert_eq!(ModuleGraph::read(src).circles().len(), 1);
}

/// The `members` of the root `Cargo.toml`.
fn workspace_members(root: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let start = text.find("members").unwrap();
    let open = start + text[start..].find('[').unwrap();
    let close = open + text[open..].find(']').unwrap();
    text[open + 1..close]
        .split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty())
        .collect()
}

/// One crate's modules (by path, `""` for the root) and the modules each one names.
struct ModuleGraph {
    modules: BTreeSet<String>,
    /// What the root re-exports under a name: `Name` -> the path it was imported from.
    exports: HashMap<String, HashMap<String, Vec<String>>>,
    /// Each module's references, unresolved: the module it was written in and its segments.
    references: Vec<(String, Vec<String>)>,
}

impl ModuleGraph {
    fn read(src: &Path) -> ModuleGraph {
        let mut files = Vec::new();
        let mut dirs = vec![src.to_path_buf()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    // `src/bin/*` are crates of their own.
                    if path != src.join("bin") {
                        dirs.push(path);
                    }
                } else if path.extension().is_some_and(|e| e == "rs") {
                    files.push(path);
                }
            }
        }
        files.sort();
        let mut graph = ModuleGraph {
            modules: BTreeSet::new(),
            exports: HashMap::new(),
            references: Vec::new(),
        };
        let mut test_only: Vec<String> = Vec::new();
        let mut parsed = Vec::new();
        for file in &files {
            let Some(module) = module_of(src, file) else {
                continue;
            };
            let text = std::fs::read_to_string(file).unwrap();
            let tokens = tokens(&text);
            let (kept, test_modules) = without_test_items(&tokens);
            test_only.extend(test_modules.into_iter().map(|m| join(&module, &m)));
            parsed.push((module, kept));
        }
        for (module, kept) in parsed {
            let is_test = test_only
                .iter()
                .any(|t| module == *t || module.starts_with(&format!("{t}::")));
            if is_test {
                continue;
            }
            let (uses, references) = paths(&kept);
            let mut exports = HashMap::new();
            for (path, alias) in uses {
                let name = alias.or_else(|| path.last().cloned()).unwrap_or_default();
                if let Some(absolute) = absolute(&module, &path)
                    && !matches!(name.as_str(), "" | "crate" | "super" | "self" | "_")
                {
                    exports.insert(name, absolute);
                }
            }
            // Only the root's re-exports are followed: the root is every module's parent and no
            // part of the graph, while a name taken through another module's re-export is a
            // reference to that module.
            if module.is_empty() {
                graph.exports.insert(module.clone(), exports);
            }
            graph
                .references
                .extend(references.into_iter().map(|r| (module.clone(), r)));
            graph.modules.insert(module);
        }
        graph
    }

    /// The module a path (absolute, from the crate root) lands in: the longest prefix that is a
    /// module, following a re-exported name to where it came from (a bounded number of hops).
    fn target(&self, path: &[String]) -> String {
        let mut path = path.to_vec();
        for _ in 0..16 {
            let mut current = String::new();
            let mut next = None;
            for segment in &path {
                let candidate = join(&current, segment);
                if self.modules.contains(&candidate) {
                    current = candidate;
                    continue;
                }
                next = self.exports.get(&current).and_then(|e| e.get(segment)).cloned();
                break;
            }
            match next {
                Some(reexported) if reexported != path => path = reexported,
                _ => return current,
            }
        }
        String::new()
    }

    /// Module -> the other modules it names. The crate root is left out: it declares and
    /// re-exports everything, and a name defined in it belongs to no module.
    fn edges(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (module, reference) in &self.references {
            let Some(absolute) = absolute(module, reference) else {
                continue;
            };
            let target = self.target(&absolute);
            if module.is_empty() || target.is_empty() || target == *module {
                continue;
            }
            edges.entry(module.clone()).or_default().insert(target);
        }
        edges
    }

    /// Every strongly connected component of more than one module, each sorted, in order.
    /// Tarjan's algorithm with an explicit stack.
    fn circles(&self) -> Vec<Vec<String>> {
        let edges = self.edges();
        let names: Vec<&String> = self.modules.iter().collect();
        let index_of: HashMap<&String, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let next: Vec<Vec<usize>> = names
            .iter()
            .map(|n| {
                edges.get(*n).map_or(Vec::new(), |t| {
                    t.iter().filter_map(|t| index_of.get(t).copied()).collect()
                })
            })
            .collect();
        let n = names.len();
        let (mut index, mut low, mut on_stack) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
        let (mut stack, mut counter, mut out) = (Vec::new(), 0, Vec::new());
        for start in 0..n {
            if index[start] != usize::MAX {
                continue;
            }
            let mut work = vec![(start, 0usize)];
            while let Some(&mut (v, ref mut child)) = work.last_mut() {
                if *child == 0 && index[v] == usize::MAX {
                    index[v] = counter;
                    low[v] = counter;
                    counter += 1;
                    stack.push(v);
                    on_stack[v] = true;
                }
                if let Some(&w) = next[v].get(*child) {
                    *child += 1;
                    if index[w] == usize::MAX {
                        work.push((w, 0));
                    } else if on_stack[w] {
                        low[v] = low[v].min(index[w]);
                    }
                    continue;
                }
                work.pop();
                if let Some(&(parent, _)) = work.last() {
                    low[parent] = low[parent].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut component = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        component.push(names[w].clone());
                        if w == v {
                            break;
                        }
                    }
                    if component.len() > 1 {
                        component.sort();
                        out.push(component);
                    }
                }
            }
        }
        out.sort();
        out
    }

    /// One loop through a component, from its first module back to it (breadth-first).
    fn describe(&self, component: &[String]) -> String {
        let edges = self.edges();
        let Some(first) = component.first() else {
            return String::new();
        };
        let inside: BTreeSet<&String> = component.iter().collect();
        let mut came_from: HashMap<&String, &String> = HashMap::new();
        let mut queue = VecDeque::from([first]);
        while let Some(v) = queue.pop_front() {
            for w in edges.get(v).into_iter().flatten().filter(|w| inside.contains(w)) {
                if w == first {
                    let mut names = vec![first.as_str()];
                    let mut at = v;
                    while at != first {
                        names.push(at);
                        at = came_from[at];
                    }
                    names.push(first);
                    let last = names.len() - 1;
                    names[1..last].reverse();
                    return names
                        .iter()
                        .map(|n| if n.is_empty() { "crate" } else { n })
                        .collect::<Vec<_>>()
                        .join(" -> ");
                }
                if !came_from.contains_key(w) {
                    came_from.insert(w, v);
                    queue.push_back(w);
                }
            }
        }
        component.join(", ")
    }
}

/// `src/a/b.rs` and `src/a/b/mod.rs` are `a::b`; `lib.rs` and `main.rs` are the root, `""`.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel: PathBuf = file.strip_prefix(src).ok()?.with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod")) {
        parts.pop();
    }
    if parts.len() == 1 && matches!(parts[0].as_str(), "lib" | "main") {
        parts.clear();
    }
    Some(parts.join("::"))
}

fn join(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_string()
    } else {
        format!("{base}::{name}")
    }
}

/// A path written in `module`, made absolute from the crate root: `crate::`, `super::` (any
/// number) and `self::`; `None` for anything else (another crate, a local name).
fn absolute(module: &str, path: &[String]) -> Option<Vec<String>> {
    let mut base: Vec<String> = if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").map(str::to_string).collect()
    };
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        Some("self") => rest = &rest[1..],
        _ => {
            // A bare `use child::X` in a `use` item names a child module.
            base.extend(path.iter().cloned());
            return Some(base);
        }
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Punct(char),
}

/// The source as identifiers and punctuation, without comments, strings, chars and lifetimes.
fn tokens(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if (c == 'r' || c == 'b') && raw_string_start(&chars, i).is_some() {
            let (hashes, body) = raw_string_start(&chars, i).unwrap_or((0, i));
            i = body;
            loop {
                if i >= chars.len() {
                    break;
                }
                if chars[i] == '"' && (0..hashes).all(|h| chars.get(i + 1 + h) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
        } else if c == '\'' {
            // A char literal ('a', '\n', '\u{..}') or a lifetime ('a): skip either.
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Token::Ident(chars[start..i].iter().collect()));
        } else if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '.') {
                i += 1;
            }
        } else {
            if !c.is_whitespace() {
                out.push(Token::Punct(c));
            }
            i += 1;
        }
    }
    out
}

/// Where a raw string (`r"`, `r#"`, `br#"`) starting at `i` has its body: its `#` count and
/// the index after the opening quote.
fn raw_string_start(chars: &[char], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    if chars.get(j) == Some(&'b') {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    if i > 0 && chars.get(i - 1).is_some_and(|c| c.is_alphanumeric() || *c == '_') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while chars.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (chars.get(j) == Some(&'"')).then_some((hashes, j + 1))
}

fn is_punct(t: Option<&Token>, c: char) -> bool {
    t == Some(&Token::Punct(c))
}

fn is_ident(t: Option<&Token>, name: &str) -> bool {
    matches!(t, Some(Token::Ident(i)) if i == name)
}

/// The tokens without `#[cfg(test)]` items (and without every other attribute), and the names
/// of `#[cfg(test)] mod name;` files, which are test-only modules.
fn without_test_items(tokens: &[Token]) -> (Vec<Token>, Vec<String>) {
    let mut out = Vec::new();
    let mut test_modules = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if is_punct(tokens.get(i), '#')
            && (is_punct(tokens.get(i + 1), '[') || is_punct(tokens.get(i + 2), '['))
        {
            let open = if is_punct(tokens.get(i + 1), '[') {
                i + 1
            } else {
                i + 2
            };
            let close = matching(tokens, open);
            let attribute = &tokens[open..close.min(tokens.len())];
            let is_test = is_ident(attribute.get(1), "cfg")
                && attribute.iter().any(|t| is_ident(Some(t), "test"))
                && !attribute.iter().any(|t| is_ident(Some(t), "not"));
            i = close + 1;
            if is_test {
                // Skip further attributes, then the item up to its `;` or its block's end.
                while is_punct(tokens.get(i), '#') {
                    let open = if is_punct(tokens.get(i + 1), '[') {
                        i + 1
                    } else {
                        i + 2
                    };
                    i = matching(tokens, open) + 1;
                }
                let start = i;
                while i < tokens.len() && !is_punct(tokens.get(i), ';') && !is_punct(tokens.get(i), '{') {
                    i += 1;
                }
                if is_punct(tokens.get(i), '{') {
                    i = matching(tokens, i);
                } else if let Some(m) = tokens[start..i.min(tokens.len())]
                    .iter()
                    .position(|t| is_ident(Some(t), "mod"))
                    && let Some(Token::Ident(name)) = tokens.get(start + m + 1)
                {
                    test_modules.push(name.clone());
                }
                i += 1;
            }
            continue;
        }
        out.push(tokens[i].clone());
        i += 1;
    }
    (out, test_modules)
}

/// The index of the bracket closing the one at `open` (`[`, `{` or `(`), or the end.
fn matching(tokens: &[Token], open: usize) -> usize {
    let mut depth = 0usize;
    for (i, t) in tokens.iter().enumerate().skip(open) {
        match t {
            Token::Punct('[' | '{' | '(') => depth += 1,
            Token::Punct(']' | '}' | ')') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    tokens.len()
}

/// The leaves of `use` items, each with its `as` name, and every `crate::`/`super::` path
/// written anywhere (in `use` items too). `self::` paths name a module's own parts.
type UsePath = (Vec<String>, Option<String>);

fn paths(tokens: &[Token]) -> (Vec<UsePath>, Vec<Vec<String>>) {
    let mut uses = Vec::new();
    let mut references = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if is_ident(tokens.get(i), "use") {
            let end = (i..tokens.len())
                .find(|&j| is_punct(tokens.get(j), ';'))
                .unwrap_or(tokens.len());
            for (path, alias) in use_tree(&tokens[i + 1..end]) {
                if matches!(path.first().map(String::as_str), Some("crate" | "super")) {
                    references.push(path.clone());
                }
                uses.push((path, alias));
            }
            i = end;
            continue;
        }
        let starts = matches!(tokens.get(i), Some(Token::Ident(s)) if s == "crate" || s == "super")
            && is_punct(tokens.get(i + 1), ':')
            && !(is_punct(tokens.get(i.wrapping_sub(1)), ':')
                && is_punct(tokens.get(i.wrapping_sub(2)), ':'));
        if starts {
            let mut path = Vec::new();
            let mut j = i;
            while let Some(Token::Ident(s)) = tokens.get(j) {
                path.push(s.clone());
                if is_punct(tokens.get(j + 1), ':') && is_punct(tokens.get(j + 2), ':') {
                    j += 3;
                } else {
                    j += 1;
                    break;
                }
            }
            references.push(path);
            i = j;
            continue;
        }
        i += 1;
    }
    (uses, references)
}

/// The leaves of a use tree (`a::{b, c::{d as e}, *}`), each with its `as` name, iteratively.
fn use_tree(tokens: &[Token]) -> Vec<(Vec<String>, Option<String>)> {
    let mut out = Vec::new();
    // The prefixes of the open groups, and the path being read.
    let mut prefixes: Vec<Vec<String>> = vec![Vec::new()];
    let mut path: Vec<String> = Vec::new();
    let mut alias = None;
    let mut i = 0;
    let mut flush = |prefixes: &Vec<Vec<String>>, path: &mut Vec<String>, alias: &mut Option<String>| {
        if !path.is_empty() {
            let mut full = prefixes.last().cloned().unwrap_or_default();
            full.append(path);
            out.push((full, alias.take()));
        }
    };
    while i < tokens.len() {
        match &tokens[i] {
            Token::Ident(s) if s == "as" => {
                if let Some(Token::Ident(name)) = tokens.get(i + 1) {
                    alias = Some(name.clone());
                }
                i += 2;
                continue;
            }
            Token::Ident(s) if s == "pub" || s == "in" => {}
            Token::Ident(s) => path.push(s.clone()),
            Token::Punct('{') => {
                let mut prefix = prefixes.last().cloned().unwrap_or_default();
                prefix.append(&mut path);
                prefixes.push(prefix);
            }
            Token::Punct(',') => flush(&prefixes, &mut path, &mut alias),
            Token::Punct('}') => {
                flush(&prefixes, &mut path, &mut alias);
                prefixes.pop();
            }
            Token::Punct('(') => {
                // `pub(crate) use`: skip the visibility.
                i = matching(tokens, i) + 1;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    flush(&prefixes, &mut path, &mut alias);
    out
}
