//! [`SelectSummary`]: what a generated select list says that the rest of the query depends
//! on — the tables it named, its aliases, and what grouping it needs.
//!
//! PostgreSQL (and the SQL standard) refuse a query whose select list mixes aggregates with
//! columns that are not grouped (`SELECT customers.name, SUM(orders.total) … ` without
//! `GROUP BY customers.name`); SQLite runs it and returns an arbitrary row's value. So the
//! grammar of the query's end is built from this summary: with an aggregate and ungrouped
//! columns, `GROUP BY` those columns is required (and forced, being known text); `ORDER BY`
//! after a grouping names grouped columns, aggregates or aliases; after `DISTINCT`, only
//! what the select list shows.
//!
//! The text parsed is the select list's own grammar's output (canonical: single spaces,
//! `table.column`, upper-case function names, no string literals), so a small scanner is
//! exact here.

use crate::catalog::{Catalog, TableId};

/// What the rest of a query needs to know about its select list.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SelectSummary {
    /// The tables it named (sorted, each once): all must be in scope before the query ends.
    pub required: Vec<TableId>,
    /// Its aliases (sorted): `ORDER BY` may name them.
    pub aliases: Vec<String>,
    /// Columns outside any aggregate, as written (`customers.name`), in order, each once.
    pub bare: Vec<String>,
    /// Tables selected whole (`orders.*`).
    pub star_tables: Vec<TableId>,
    /// `*` (every column of every table in scope).
    pub star: bool,
    /// An aggregate appears (`COUNT(*)`, `SUM(…)`, …).
    pub aggregate: bool,
    /// `SELECT DISTINCT`.
    pub distinct: bool,
}

impl SelectSummary {
    /// Reads the select list `text` (`SELECT … FROM`, as its grammar writes it).
    pub fn parse(text: &str, cat: &Catalog) -> SelectSummary {
        let mut s = SelectSummary { distinct: text.starts_with("SELECT DISTINCT "), ..Default::default() };
        let body = text.strip_prefix("SELECT ").unwrap_or(text);
        let body = body.strip_prefix("DISTINCT ").unwrap_or(body);
        let body = body.strip_suffix(" FROM").unwrap_or(body);
        let b = body.as_bytes();
        // Open parentheses: true for an aggregate's.
        let mut parens: Vec<bool> = Vec::new();
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            if c == b'(' {
                parens.push(false);
                i += 1;
            } else if c == b')' {
                parens.pop();
                i += 1;
            } else if c == b'*' {
                // `*` alone is a select item (not multiplication, which has spaces around it).
                let alone = (i == 0 || body[..i].ends_with(", ")) && (i + 1 == b.len() || body[i + 1..].starts_with(','));
                s.star |= alone && !parens.iter().any(|&a| a);
                i += 1;
            } else if c == b'"' || c.is_ascii_alphabetic() || c == b'_' {
                let rest = &body[i..];
                let Some((name, len)) = identifier(rest) else { break };
                let after = &rest[len..];
                if ["COUNT", "SUM", "AVG", "MIN", "MAX"].contains(&name.as_str()) && after.starts_with('(') {
                    s.aggregate = true;
                    parens.push(true);
                    i += len + 1;
                    continue;
                }
                if let Some(col) = after.strip_prefix('.') {
                    let table = cat.find(&name);
                    if let Some(t) = table {
                        s.required.push(t);
                    }
                    if col.starts_with('*') {
                        if let Some(t) = table {
                            s.star_tables.push(t);
                        }
                        i += len + 2;
                        continue;
                    }
                    let (_, clen) = identifier(col).unwrap_or_default();
                    let written = &rest[..len + 1 + clen];
                    if !parens.iter().any(|&a| a) && !s.bare.iter().any(|x| x == written) {
                        s.bare.push(written.to_string());
                    }
                    i += len + 1 + clen;
                    continue;
                }
                if rest[..len].eq_ignore_ascii_case("AS") || name == "DISTINCT" {
                    i += len;
                    continue;
                }
                if body[..i].ends_with(" AS ") {
                    s.aliases.push(name);
                }
                i += len;
            } else if c.is_ascii_digit() {
                while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                    i += 1;
                }
            } else {
                i += 1;
            }
        }
        s.required.sort();
        s.required.dedup();
        s.aliases.sort();
        s.aliases.dedup();
        s
    }
}

/// The identifier at the start of `s` (bare, or double-quoted with `""` escapes), unquoted,
/// and its length in `s`.
pub(crate) fn identifier(s: &str) -> Option<(String, usize)> {
    let b = s.as_bytes();
    match *b.first()? {
        b'"' => {
            let mut out = String::new();
            let mut i = 1;
            while i < b.len() {
                if b[i] == b'"' {
                    if b.get(i + 1) == Some(&b'"') {
                        out.push('"');
                        i += 2;
                        continue;
                    }
                    return Some((out, i + 1));
                }
                let ch = s[i..].chars().next()?;
                out.push(ch);
                i += ch.len_utf8();
            }
            None
        }
        c if c.is_ascii_alphabetic() || c == b'_' => {
            let n = b.iter().take_while(|c| c.is_ascii_alphanumeric() || **c == b'_').count();
            Some((s[..n].to_string(), n))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::tests::shop;

    #[test]
    fn summaries_of_select_lists() {
        let cat = shop();
        let id = |n: &str| cat.find(n).unwrap();
        let s = SelectSummary::parse("SELECT customers.name, SUM(orders.total) AS revenue, (orders.total + 1) * 2 FROM", &cat);
        assert_eq!(s.required, vec![id("customers"), id("orders")]);
        assert_eq!(s.bare, vec!["customers.name", "orders.total"]);
        assert_eq!(s.aliases, vec!["revenue"]);
        assert!(s.aggregate && !s.star && !s.distinct);
        let s = SelectSummary::parse("SELECT DISTINCT *, COUNT(*) FROM", &cat);
        assert!(s.star && s.aggregate && s.distinct && s.bare.is_empty() && s.required.is_empty());
        let s = SelectSummary::parse("SELECT orders.*, orders.total * 2 AS twice FROM", &cat);
        assert_eq!(s.star_tables, vec![id("orders")]);
        assert_eq!(s.bare, vec!["orders.total"]);
        assert!(!s.star && !s.aggregate);
        let s = SelectSummary::parse("SELECT COUNT(DISTINCT customers.country) FROM", &cat);
        assert!(s.aggregate && s.bare.is_empty());
        assert_eq!(s.required, vec![id("customers")]);
    }
}
