//! The grammar IR printed as llguidance's Lark dialect, so both engines run the very
//! same grammar. Every literal and class becomes an inline regex (`\x{..}` escapes).
use formwork_grammar::{Expr, Grammar, TokenRef};
use std::fmt::Write;

fn esc(out: &mut String, c: char) {
    if c.is_ascii_alphanumeric() || c == '_' {
        out.push(c);
    } else {
        let _ = write!(out, "\\x{{{:x}}}", c as u32);
    }
}

fn expr(out: &mut String, e: &Expr) {
    match e {
        Expr::Literal(s) if s.is_empty() => out.push_str("\"\""),
        Expr::Literal(s) => {
            out.push('/');
            s.chars().for_each(|c| esc(out, c));
            out.push('/');
        }
        Expr::Class(ranges) => {
            out.push_str("/[");
            if ranges.is_empty() {
                out.push_str("^\\x{0}-\\x{10ffff}");
            }
            for &(a, b) in ranges {
                esc(out, a);
                if a != b {
                    out.push('-');
                    esc(out, b);
                }
            }
            out.push_str("]/");
        }
        Expr::Seq(items) if items.is_empty() => out.push_str("\"\""),
        Expr::Seq(items) => {
            out.push('(');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                expr(out, x);
            }
            out.push(')');
        }
        Expr::Alt(items) => {
            let empty = |x: &Expr| {
                matches!(x, Expr::Seq(v) if v.is_empty())
                    || matches!(x, Expr::Literal(s) if s.is_empty())
            };
            let rest: Vec<&Expr> = items.iter().filter(|x| !empty(x)).collect();
            out.push('(');
            for (i, x) in rest.iter().enumerate() {
                if i > 0 {
                    out.push_str(" | ");
                }
                expr(out, x);
            }
            out.push(')');
            if rest.len() < items.len() {
                out.push('?');
            }
        }
        Expr::Repeat { expr: x, min, max } => {
            out.push('(');
            expr(out, x);
            out.push(')');
            match (min, max) {
                (0, None) => out.push('*'),
                (1, None) => out.push('+'),
                (0, Some(1)) => out.push('?'),
                (m, None) => {
                    let _ = write!(out, "{{{m},}}");
                }
                (m, Some(n)) => {
                    let _ = write!(out, "{{{m},{n}}}");
                }
            }
        }
        Expr::Rule(r) => {
            let _ = write!(out, "r{}", r.0);
        }
        Expr::Token(TokenRef::Id(t)) => {
            let _ = write!(out, "<[{}]>", t.0);
        }
        Expr::Token(TokenRef::Name(n)) => out.push_str(n),
        // A negated token reference (GBNF `!<[N]>`) is given no Lark form here (the GBNF
        // corpus the peer runs has none): a regex that matches nothing.
        Expr::NotToken(_) => out.push_str("/(?!)/"),
        // Only JSON Schema grammars in any-key-order mode have these, and schemas go to the
        // peer as JSON Schema, never through Lark: a regex that matches nothing.
        Expr::Unordered(_) => out.push_str("/(?!)/"),
    }
}

/// The grammar in Lark syntax (`start` is the root).
pub fn to_lark(g: &Grammar) -> String {
    let mut out = format!("start: r{}\n", g.root().0);
    for (i, r) in g.rules().iter().enumerate() {
        let _ = write!(out, "r{i}: ");
        expr(&mut out, &r.expr);
        out.push('\n');
    }
    out
}
