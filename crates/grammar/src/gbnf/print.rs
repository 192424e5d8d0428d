//! [`Grammar`] to normalized GBNF text.
//!
//! One rule per line, in rule-id order, single spaces between elements, `|` between
//! alternatives, parentheses only where structure needs them. Literals and classes are
//! escaped so the text is plain printable ASCII-or-Unicode without control characters;
//! classes print in whichever of the positive and negated (`[^...]`) forms has fewer
//! ranges (on a tie, negated when the class reaches U+10FFFF), and the full range prints
//! as `.`. `-` and `^` inside classes print as `\x2D` / `\x5E`, which llama.cpp also reads.
//!
//! Rule names that are not GBNF names (`[A-Za-z0-9_-]+`) are rewritten (other characters
//! become `-`, clashes get a `-N` suffix), and the root rule is always printed as `root`.
//! For a grammar in canonical form (see the [module docs](super)) with valid names and a
//! root named `root`, `parse(print(g)) == g`. The printer is iterative, so any IR depth
//! prints without recursion.
//!
//! [`Expr::Unordered`] (a JSON object's members in any order) has no GBNF form; it prints
//! as `@unordered(m1, m2?, ..., extra*; sep S; count min..max)` (`?` marks optional members),
//! which no GBNF reader accepts: such a grammar is for reading, not for llama.cpp.

use crate::ir::complement;
use crate::{Expr, Grammar, TokenRef};
use std::collections::HashSet;
use std::fmt::Write;

/// Prints `g` as normalized GBNF text (see the module docs).
pub fn print(g: &Grammar) -> String {
    let names = print_names(g);
    let mut out = String::new();
    for (i, r) in g.rules().iter().enumerate() {
        out.push_str(&names[i]);
        out.push_str(" ::= ");
        write_expr(&mut out, &r.expr, &names);
        out.push('\n');
    }
    out
}

/// True when `name` can be written as a GBNF rule name.
fn is_valid_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(super::parse::is_name_char)
}

/// The name each rule is printed under: its own when valid and free, else a rewritten one.
fn print_names(g: &Grammar) -> Vec<String> {
    let root = g.root().index();
    let rules = g.rules();
    let mut used: HashSet<String> = HashSet::new();
    used.insert("root".to_string());
    let mut out: Vec<Option<String>> = vec![None; rules.len()];
    out[root] = Some("root".to_string());
    // Valid names keep themselves (first come first served; names are unique anyway).
    for (i, r) in rules.iter().enumerate() {
        if i != root && is_valid_name(&r.name) && used.insert(r.name.clone()) {
            out[i] = Some(r.name.clone());
        }
    }
    for (i, r) in rules.iter().enumerate() {
        if out[i].is_some() {
            continue;
        }
        let mut base: String = r.name.chars().map(|c| if super::parse::is_name_char(c) { c } else { '-' }).collect();
        if base.is_empty() {
            base = "rule".into();
        }
        let name = if used.contains(&base) {
            (1..).map(|k| format!("{base}-{k}")).find(|n| !used.contains(n)).unwrap()
        } else {
            base
        };
        used.insert(name.clone());
        out[i] = Some(name);
    }
    out.into_iter().map(|n| n.unwrap()).collect()
}

/// Where an expression appears, which decides whether it needs parentheses.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    /// A whole rule body.
    Top,
    /// A branch of an alternation.
    Branch,
    /// An item of a sequence.
    Item,
    /// The operand of a repetition.
    Operand,
}

enum Work<'a> {
    Expr(&'a Expr, Ctx),
    Text(&'static str),
    Owned(String),
}

fn write_expr(out: &mut String, e: &Expr, names: &[String]) {
    let mut stack = vec![Work::Expr(e, Ctx::Top)];
    while let Some(w) = stack.pop() {
        let (e, ctx) = match w {
            Work::Text(s) => {
                out.push_str(s);
                continue;
            }
            Work::Owned(s) => {
                out.push_str(&s);
                continue;
            }
            Work::Expr(e, ctx) => (e, ctx),
        };
        match e {
            Expr::Literal(s) => write_literal(out, s),
            Expr::Class(r) => write_class(out, r),
            Expr::Rule(id) => out.push_str(&names[id.index()]),
            Expr::Token(t) => write_token(out, t),
            Expr::NotToken(t) => {
                out.push('!');
                write_token(out, t);
            }
            Expr::Unordered(u) => {
                out.push_str("@unordered(");
                let mut count = match u.max {
                    Some(m) => format!("; count {}..{m}", u.min),
                    None => format!("; count {}..", u.min),
                };
                // Presence clauses by member index: `; present 0 & !1 | 2, 3`.
                if !u.presence.is_empty() {
                    let term = |t: &crate::Presence| {
                        let lits: Vec<String> = t.present.iter().map(|i| i.to_string()).chain(t.absent.iter().map(|i| format!("!{i}"))).collect();
                        if lits.is_empty() { "true".to_string() } else { lits.join(" & ") }
                    };
                    let clauses: Vec<String> = u.presence.iter().map(|c| if c.is_empty() { "false".to_string() } else { c.iter().map(term).collect::<Vec<_>>().join(" | ") }).collect();
                    count.push_str(&format!("; present {}", clauses.join(", ")));
                }
                count.push(')');
                stack.push(Work::Owned(count));
                stack.push(Work::Expr(&u.sep, Ctx::Item));
                stack.push(Work::Text("; sep "));
                let mut items: Vec<Work> = Vec::new();
                for (i, (m, req)) in u.members.iter().enumerate() {
                    if i > 0 {
                        items.push(Work::Text(", "));
                    }
                    items.push(Work::Expr(m, Ctx::Operand));
                    if !req {
                        items.push(Work::Text("?"));
                    }
                }
                if let Some(x) = &u.extra {
                    if !u.members.is_empty() {
                        items.push(Work::Text(", "));
                    }
                    items.push(Work::Expr(x, Ctx::Operand));
                    items.push(Work::Text("*"));
                }
                stack.extend(items.into_iter().rev());
            }
            Expr::Seq(v) if v.is_empty() => out.push_str("()"),
            Expr::Seq(v) => {
                let paren = matches!(ctx, Ctx::Item | Ctx::Operand);
                push_list(out, &mut stack, v, paren, " ", Ctx::Item);
            }
            Expr::Alt(v) => {
                let paren = ctx != Ctx::Top;
                push_list(out, &mut stack, v, paren, " | ", Ctx::Branch);
            }
            Expr::Repeat { expr, min, max } => {
                let op = match (min, max) {
                    (0, None) => "*".to_string(),
                    (1, None) => "+".to_string(),
                    (0, Some(1)) => "?".to_string(),
                    (m, None) => format!("{{{m},}}"),
                    (m, Some(n)) if m == n => format!("{{{m}}}"),
                    (m, Some(n)) => format!("{{{m},{n}}}"),
                };
                stack.push(Work::Owned(op));
                // A repetition of a repetition needs no parentheses: `"a"*?`.
                let inner_ctx = if matches!(**expr, Expr::Repeat { .. }) { Ctx::Item } else { Ctx::Operand };
                stack.push(Work::Expr(expr, inner_ctx));
            }
        }
    }
}

/// A token reference: `<[123]>` or `<name>`.
fn write_token(out: &mut String, t: &TokenRef) {
    match t {
        TokenRef::Id(t) => {
            let _ = write!(out, "<[{}]>", t.0);
        }
        TokenRef::Name(n) if n.starts_with('<') && n.ends_with('>') && n.len() > 2 => out.push_str(n),
        TokenRef::Name(n) => {
            let _ = write!(out, "<{n}>");
        }
    }
}

fn push_list<'a>(out: &mut String, stack: &mut Vec<Work<'a>>, v: &'a [Expr], paren: bool, sep: &'static str, ctx: Ctx) {
    if paren {
        out.push('(');
        stack.push(Work::Text(")"));
    }
    for (i, item) in v.iter().enumerate().rev() {
        stack.push(Work::Expr(item, ctx));
        if i > 0 {
            stack.push(Work::Text(sep));
        }
    }
}

/// Characters printed as escapes everywhere: controls and invisible or line-breaking ones.
fn needs_hex(c: char) -> bool {
    c.is_control()
        || (c.is_whitespace() && c != ' ')
        || matches!(c as u32, 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x206F | 0xFEFF | 0xFFF9..=0xFFFB)
}

fn write_hex(out: &mut String, c: char) {
    let v = c as u32;
    let _ = match v {
        0..=0xFF => write!(out, "\\x{v:02X}"),
        0x100..=0xFFFF => write!(out, "\\u{v:04X}"),
        _ => write!(out, "\\U{v:08X}"),
    };
}

fn write_common(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\\' => out.push_str("\\\\"),
        c if needs_hex(c) => write_hex(out, c),
        c => out.push(c),
    }
}

fn write_literal(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            c => write_common(out, c),
        }
    }
    out.push('"');
}

fn write_class_char(out: &mut String, c: char) {
    match c {
        ']' => out.push_str("\\]"),
        '[' => out.push_str("\\["),
        // `-` and `^` as hex escapes: unambiguous anywhere in a class, and llama.cpp reads them.
        '-' | '^' => write_hex(out, c),
        c => write_common(out, c),
    }
}

fn write_class(out: &mut String, r: &[(char, char)]) {
    if r == [('\0', char::MAX)] {
        out.push('.');
        return;
    }
    let comp = complement(r);
    // Negated when that takes fewer ranges, or as many and the class reaches U+10FFFF
    // (a "mostly everything" class such as `[^"\\]`).
    let reaches_top = r.last().is_some_and(|&(_, b)| b == char::MAX);
    let negated = r.is_empty() || comp.len() < r.len() || (comp.len() == r.len() && reaches_top);
    let ranges = if negated { &comp[..] } else { r };
    out.push('[');
    if negated {
        out.push('^');
    }
    for &(a, b) in ranges {
        write_class_char(out, a);
        if b != a {
            if b as u32 != a as u32 + 1 {
                out.push('-');
            }
            write_class_char(out, b);
        }
    }
    out.push(']');
}
