//! No module cycles inside a crate: between the modules of one parent, the `crate::`,
//! `super::` and `self::` paths of non-test code point one way only.
//!
//! How a reference becomes an arrow: a path written in module `a::b::c` that names an item of
//! module `a::d::e` is an arrow `b → d` between the two children of their nearest common
//! parent `a`. A child that uses its parent (`use super::*`) or a parent that uses its child
//! draws no arrow: that is what nesting is for. The arrows between the children of each
//! parent must have no cycle (Tarjan's strongly connected components). Test code — a module
//! declared under `#[cfg(test)]`, everything inside it, and inline `#[cfg(test)] mod … { }`
//! blocks — is left out.
//!
//! What this reads: `use` trees (braces, `as`, globs) and paths spelled with `crate::`,
//! `super::` or `self::`, after comments, strings and character literals are removed. Names
//! brought in by a glob from a parent (`use super::*` then `sibling::x`) are not followed;
//! the modules here spell such paths out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path inside one crate, from its root (`[]` is the crate root).
type ModPath = Vec<String>;

/// Source text without comments, string literals and character literals (each replaced by a
/// space), so that paths are only read from code.
fn code_only(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < c.len() {
        let at = |k: usize| c.get(k).copied().unwrap_or('\0');
        if c[i] == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if (c[i] == 'r' || (c[i] == 'b' && at(i + 1) == 'r'))
            && !(i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_'))
            && {
                let mut k = i + if c[i] == 'b' { 2 } else { 1 };
                while at(k) == '#' {
                    k += 1;
                }
                at(k) == '"'
            }
        {
            // Raw string: r"…", r#"…"#, br##"…"##.
            i += if c[i] == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while c[i] == '#' {
                hashes += 1;
                i += 1;
            }
            i += 1;
            while i < c.len() {
                if c[i] == '"' && (1..=hashes).all(|h| at(i + h) == '#') {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
            out.push(' ');
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push(' ');
        } else if c[i] == '\'' && (at(i + 1) == '\\' || at(i + 2) == '\'') {
            // A character literal ('x', '\n', '\''); a lifetime ('a) has no closing quote next.
            i += 1;
            while i < c.len() && c[i] != '\'' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push(' ');
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// The index just past the `}` that closes the `{` at `open`.
fn matching_brace(code: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, &b) in code.iter().enumerate().skip(open) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// Splits `code` into the non-test part and the names of the child modules declared as test
/// modules (`#[cfg(test)] mod name;`). Inline `#[cfg(test)] … mod name { … }` blocks are cut.
fn without_tests(code: &str) -> (String, BTreeSet<String>) {
    let mut kept = String::new();
    let mut test_children = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        kept.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        // Skip further attributes and a visibility, then see whether a module follows.
        let mut tail = after.trim_start();
        while tail.starts_with("#[") {
            tail = tail[tail.find(']').map_or(tail.len(), |k| k + 1)..].trim_start();
        }
        for vis in ["pub(crate)", "pub(super)", "pub"] {
            if let Some(t) = tail.strip_prefix(vis) {
                tail = t.trim_start();
                break;
            }
        }
        if let Some(t) = tail.strip_prefix("mod ") {
            let name: String = t.trim_start().chars().take_while(|ch| ch.is_alphanumeric() || *ch == '_').collect();
            let after_name = t.trim_start()[name.len()..].trim_start();
            let consumed = rest.len() - after_name.len();
            if after_name.starts_with(';') {
                test_children.insert(name);
                rest = &rest[consumed + 1..];
            } else {
                let end = matching_brace(rest.as_bytes(), consumed);
                rest = &rest[end..];
            }
        } else {
            rest = after;
        }
    }
    kept.push_str(rest);
    (kept, test_children)
}

/// The flat paths of one `use` tree (`a::{b, c::d as e}` → `a::b`, `a::c::d`).
fn expand_use(tree: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (k, ch) in tree.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&tree[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&tree[start..]);
    for part in parts {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        if let Some(open) = part.find('{') {
            let head: Vec<String> = part[..open].split("::").map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
            let inner = &part[open + 1..part.rfind('}').unwrap_or(part.len())];
            let mut p = prefix.to_vec();
            p.extend(head);
            expand_use(inner, &p, out);
        } else {
            let part = part.split(" as ").next().unwrap_or(part);
            let mut p = prefix.to_vec();
            p.extend(part.split("::").map(str::trim).filter(|s| !s.is_empty()).map(String::from));
            out.push(p);
        }
    }
}

/// Every path in `code` that starts with `crate`, `super` or `self`, as segments.
fn local_paths(code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    // `use` trees, braces and all.
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let boundary = at == 0 || !rest.as_bytes()[at - 1].is_ascii_alphanumeric() && rest.as_bytes()[at - 1] != b'_';
        let after = &rest[at + 4..];
        if boundary {
            if let Some(end) = after.find(';') {
                expand_use(&after[..end], &[], &mut paths);
            }
        }
        rest = after;
    }
    // Paths written in code: `crate::a::b`, `super::super::x`.
    let bytes = code.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut k = 0;
    while k < bytes.len() {
        if word(bytes[k]) && (k == 0 || !word(bytes[k - 1])) {
            let mut end = k;
            while end < bytes.len() && (word(bytes[end]) || (bytes[end] == b':' && bytes.get(end + 1) == Some(&b':') && bytes.get(end + 2).is_some_and(|b| word(*b)))) {
                end += if bytes[end] == b':' { 2 } else { 1 };
            }
            let path = &code[k..end];
            if ["crate::", "super::", "self::"].iter().any(|p| path.starts_with(p)) {
                paths.push(path.split("::").map(String::from).collect());
            }
            k = end.max(k + 1);
        } else {
            k += 1;
        }
    }
    paths.retain(|p| matches!(p.first().map(String::as_str), Some("crate" | "super" | "self")));
    paths
}

/// The module a source file is, from the crate's `src` directory.
fn module_of(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut segs: ModPath = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if matches!(segs.last().map(String::as_str), Some("lib" | "main" | "mod")) {
        segs.pop();
    }
    segs
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// For one crate: parent module → child → the children it points to, with one witness
/// (`from-module → to-module`) per arrow.
type Arrows = BTreeMap<ModPath, BTreeMap<String, BTreeMap<String, String>>>;

fn arrows(src: &Path) -> Arrows {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    // `src/bin/*` are crates of their own.
    files.retain(|f| !f.strip_prefix(src).unwrap().starts_with("bin"));
    let mut modules: BTreeMap<ModPath, String> = BTreeMap::new();
    let mut test_modules: BTreeSet<ModPath> = BTreeSet::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let (code, tests) = without_tests(&code_only(&text));
        let module = module_of(src, f);
        for t in tests {
            let mut m = module.clone();
            m.push(t);
            test_modules.insert(m);
        }
        modules.insert(module, code);
    }
    let is_test = |m: &ModPath| (1..=m.len()).any(|n| test_modules.contains(&m[..n].to_vec()));
    let mut out = Arrows::new();
    for (from, code) in &modules {
        if is_test(from) {
            continue;
        }
        for path in local_paths(code) {
            let mut target = from.clone();
            let mut segs = path.as_slice();
            if segs[0] == "crate" {
                target.clear();
                segs = &segs[1..];
            }
            while let Some(first) = segs.first() {
                match first.as_str() {
                    "super" => drop(target.pop()),
                    "self" => {}
                    _ => break,
                }
                segs = &segs[1..];
            }
            // The longest prefix of the rest that is a module of this crate.
            for seg in segs {
                let mut next = target.clone();
                next.push(seg.clone());
                if !modules.contains_key(&next) {
                    break;
                }
                target = next;
            }
            let common = from.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common == from.len() || common == target.len() {
                continue; // parent and child
            }
            let witness = format!("{} → {}", from.join("::"), target.join("::"));
            out.entry(from[..common].to_vec())
                .or_default()
                .entry(from[common].clone())
                .or_default()
                .entry(target[common].clone())
                .or_insert(witness);
        }
    }
    out
}

/// The strongly connected components with more than one member (Tarjan).
fn cycles(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<BTreeSet<String>> {
    struct Tarjan<'a> {
        graph: &'a BTreeMap<String, BTreeMap<String, String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<BTreeSet<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            for w in self.graph.get(v).into_iter().flat_map(|m| m.keys()) {
                if !self.index.contains_key(w.as_str()) {
                    self.visit(w);
                    let lw = self.low[w.as_str()];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.stack.contains(&w.as_str()) {
                    let iw = self.index[w.as_str()];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut comp = BTreeSet::new();
                while let Some(w) = self.stack.pop() {
                    comp.insert(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    self.found.push(comp);
                }
            }
        }
    }
    let mut t = Tarjan { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), found: Vec::new() };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.found
}

#[test]
fn no_module_cycles_inside_a_crate() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut report = Vec::new();
    let mut names: Vec<PathBuf> = std::fs::read_dir(&crates).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    for dir in names {
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        let krate = dir.file_name().unwrap().to_string_lossy().into_owned();
        for (parent, graph) in arrows(&src) {
            for cycle in cycles(&graph) {
                let at = if parent.is_empty() { krate.clone() } else { format!("{krate}::{}", parent.join("::")) };
                let mut line = format!("{at}: {{{}}}", cycle.iter().cloned().collect::<Vec<_>>().join(", "));
                for a in &cycle {
                    for (b, witness) in &graph[a] {
                        if cycle.contains(b) {
                            line.push_str(&format!("\n    {a} → {b}  (e.g. {witness})"));
                        }
                    }
                }
                report.push(line);
            }
        }
    }
    assert!(report.is_empty(), "module cycles (move the shared piece below both modules):\n{}", report.join("\n"));
}

#[test]
fn the_reader_finds_paths_in_use_trees_and_code_but_not_in_strings_or_tests() {
    let code = code_only(
        "use crate::{a::X, b::{c, d as e}};\n// crate::comment::Y\nfn f() { let s = \"crate::string\"; let c = '\"'; super::g::h(); }\n#[cfg(test)]\nmod tests { use crate::t::Z; }\n#[cfg(test)]\nmod more;\n",
    );
    let (code, tests) = without_tests(&code);
    assert_eq!(tests, BTreeSet::from(["more".to_string()]));
    let paths: BTreeSet<String> = local_paths(&code).iter().map(|p| p.join("::")).collect();
    assert!(paths.contains("crate::a::X") && paths.contains("crate::b::c") && paths.contains("crate::b::d") && paths.contains("super::g::h"), "{paths:?}");
    assert!(!paths.iter().any(|p| p.contains("comment") || p.contains("string") || p.contains("::t::")), "{paths:?}");
    let mut g: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    g.entry("a".into()).or_default().insert("b".into(), String::new());
    g.entry("b".into()).or_default().insert("c".into(), String::new());
    assert!(cycles(&g).is_empty());
    g.entry("c".into()).or_default().insert("a".into(), String::new());
    assert_eq!(cycles(&g), vec![BTreeSet::from(["a".to_string(), "b".to_string(), "c".to_string()])]);
}
