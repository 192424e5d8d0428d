//! What the model is shown: the schema with its keys and relationships, and the rules —
//! a model cannot use relationships it has never seen.

use crate::catalog::{quote_ident, Catalog};
use crate::grammar::{dialect_name, sql_string};
use std::fmt::Write;

/// The schema as compact text, one table per line:
/// `orders(id INTEGER primary key, customer_id INTEGER -> customers.id, total REAL)`;
/// a few-valued column lists its values (`country TEXT: 'DE' | 'FR'`). Then the required
/// filters.
pub fn describe_schema(cat: &Catalog) -> String {
    let mut out = String::new();
    for (i, t) in cat.tables().iter().enumerate() {
        let id = crate::catalog::TableId(i as u32);
        let mut cols = Vec::new();
        for (k, c) in t.columns.iter().enumerate() {
            let mut s = format!("{} {}", quote_ident(&c.name), if c.declared_type.is_empty() { "ANY" } else { &c.declared_type });
            if t.primary_key == [k] {
                s.push_str(" primary key");
            }
            for r in cat.relationships().iter().filter(|r| r.from == id && r.from_columns == [k]) {
                let _ = write!(s, " -> {}", cat.column_sql(r.to, r.to_columns[0]));
            }
            if let Some(v) = &c.values {
                let _ = write!(s, ": {}", v.iter().map(|x| sql_string(x)).collect::<Vec<_>>().join(" | "));
            }
            cols.push(s);
        }
        let _ = writeln!(out, "{}({})", quote_ident(&t.name), cols.join(", "));
    }
    // Keys of several columns, which the per-column arrows cannot show.
    for r in cat.relationships().iter().filter(|r| r.from_columns.len() > 1) {
        let side = |t, cs: &[usize]| cs.iter().map(|&c| cat.column_sql(t, c)).collect::<Vec<_>>().join(", ");
        let _ = writeln!(out, "({}) -> ({})", side(r.from, &r.from_columns), side(r.to, &r.to_columns));
    }
    let rules: Vec<String> = cat
        .tables()
        .iter()
        .filter_map(|t| t.required_filter.as_ref().map(|f| format!("- every query reading {} must filter: {f}", quote_ident(&t.name))))
        .collect();
    if !rules.is_empty() {
        out.push_str("Rules:\n");
        out.push_str(&rules.join("\n"));
        out.push('\n');
    }
    out
}

/// The system message for a question: the schema and how to write the query.
pub fn system_prompt(cat: &Catalog) -> String {
    format!(
        "You translate questions into SQL for a {} database with these tables (-> marks a relationship):\n{}\
         Answer with one SELECT query and nothing else. Write every column as table.column, and join tables only along the relationships shown.",
        dialect_name(cat.dialect),
        describe_schema(cat)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::tests::shop;

    #[test]
    fn the_prompt_shows_keys_relationships_and_rules() {
        let mut c = shop();
        c.require_filter("customers", "customers.deleted_at IS NULL").unwrap();
        let p = system_prompt(&c);
        assert!(p.contains("orders(id INTEGER primary key, customer_id INTEGER -> customers.id, total REAL, placed_at DATE)"), "{p}");
        assert!(p.contains("every query reading customers must filter: customers.deleted_at IS NULL"), "{p}");
        assert!(p.starts_with("You translate questions into SQL for a SQLite database"));
    }
}
