//! What the model is shown: the schema with its keys and relationships, and the rules —
//! a model cannot use relationships it has never seen — and a few worked examples over
//! the same database ([`examples`]), as earlier turns of the chat.
//!
//! The examples are built from the catalog alone (no question set is looked at): a count,
//! a column list, the largest value of a numeric column, a join along a relationship with a
//! filter, and a count per row of the related table. They are written the way the
//! constraint writes queries (qualified columns, joins on the relationship, required
//! filters first), so the model sees the form it will be held to, and that a query ends
//! where the question is answered.

use crate::catalog::{quote_ident, Catalog, ColumnType, Table, TableId};
use crate::grammar::{dialect_name, guarded_filter, sql_string};
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

/// A worked example: a question over the catalog and the query that answers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Example {
    /// The question, in words.
    pub question: String,
    /// The query, as the constraint would allow it.
    pub sql: String,
}

/// The column a table is best named by: the first text column called `name` or `title`
/// (or containing either), else its first text column that is not a key.
fn label_column(t: &Table) -> Option<usize> {
    let text = |k: &usize| t.columns[*k].ty == ColumnType::Text;
    let called = |w: &str| (0..t.columns.len()).filter(text).find(|&k| t.columns[k].name.to_ascii_lowercase().contains(w));
    called("name").or_else(|| called("title")).or_else(|| (0..t.columns.len()).filter(text).find(|k| !t.primary_key.contains(k)))
}

/// A numeric column that is not a key (nor named like one).
fn measure_column(cat: &Catalog, id: TableId) -> Option<usize> {
    let t = cat.table(id);
    let in_relationship = |k: usize| cat.relationships().iter().any(|r| (r.from == id && r.from_columns.contains(&k)) || (r.to == id && r.to_columns.contains(&k)));
    t.columns.iter().enumerate().position(|(k, c)| {
        let n = c.name.to_ascii_lowercase();
        matches!(c.ty, ColumnType::Integer | ColumnType::Real) && !t.primary_key.contains(&k) && !in_relationship(k) && n != "id" && !n.ends_with("_id") && !n.ends_with("id")
    })
}

/// ` WHERE ` and the required `filters` (guarded as the grammar writes them), then `more`,
/// joined by ` AND `; nothing when there is neither.
fn where_clause<'a>(filters: impl IntoIterator<Item = &'a str>, more: Option<String>) -> String {
    let parts: Vec<String> = filters.into_iter().map(guarded_filter).chain(more).collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", parts.join(" AND "))
    }
}

/// Worked examples over `cat` (see the module docs); at most five, fewer when the schema
/// has no text columns, numbers or relationships to show them with.
pub fn examples(cat: &Catalog) -> Vec<Example> {
    let mut out = Vec::new();
    let name = |t: TableId| cat.table(t).name.clone();
    let filter = |t: TableId| cat.table(t).required_filter.as_deref();
    // The relationship whose tables both have a label: a child row, the parent it names.
    let pair = cat.relationships().iter().find_map(|r| {
        let (c, p) = (label_column(cat.table(r.from))?, label_column(cat.table(r.to))?);
        (r.from_columns.len() == 1).then_some((r, c, p))
    });
    // The table shown alone: the parent of that relationship, else the first with a label.
    let single = pair.map(|(r, _, p)| (r.to, p)).or_else(|| cat.ids().find_map(|t| Some((t, label_column(cat.table(t))?))));
    if let Some((t, label)) = single {
        let tq = quote_ident(&name(t));
        out.push(Example { question: format!("How many rows does the table {} have?", name(t)), sql: format!("SELECT COUNT(*) FROM {tq}{}", where_clause(filter(t), None)) });
        let col = &cat.table(t).columns[label].name;
        out.push(Example {
            question: format!("List the {col} of every {}.", name(t)),
            sql: format!("SELECT {} FROM {tq}{}", cat.column_sql(t, label), where_clause(filter(t), None)),
        });
    }
    if let Some((t, m, label)) = cat.ids().find_map(|t| Some((t, measure_column(cat, t)?, label_column(cat.table(t))?))) {
        let (mcol, tq) = (&cat.table(t).columns[m].name, quote_ident(&name(t)));
        out.push(Example {
            question: format!("Which {} has the highest {mcol}?", name(t)),
            sql: format!("SELECT {} FROM {tq}{} ORDER BY {} DESC LIMIT 1", cat.column_sql(t, label), where_clause(filter(t), None), cat.column_sql(t, m)),
        });
    }
    if let Some((r, cl, pl)) = pair {
        let (c, p) = (r.from, r.to);
        let on = format!("{} = {}", cat.column_sql(c, r.from_columns[0]), cat.column_sql(p, r.to_columns[0]));
        let filters: Vec<&str> = [filter(c), filter(p)].into_iter().flatten().collect();
        let pcol = &cat.table(p).columns[pl];
        let value = pcol.values.as_ref().and_then(|v| v.first().cloned()).unwrap_or_else(|| "Example".to_string());
        out.push(Example {
            question: format!("Which {} belong to the {} whose {} is {value}?", name(c), name(p), pcol.name),
            sql: format!(
                "SELECT {} FROM {} JOIN {} ON {on}{}",
                cat.column_sql(c, cl),
                quote_ident(&name(c)),
                quote_ident(&name(p)),
                where_clause(filters.iter().copied(), Some(format!("{} = {}", cat.column_sql(p, pl), sql_string(&value))))
            ),
        });
        out.push(Example {
            question: format!("How many {} rows does each {} have? Give its {}.", name(c), name(p), pcol.name),
            sql: format!(
                "SELECT {}, COUNT(*) FROM {} JOIN {} ON {on}{} GROUP BY {}",
                cat.column_sql(p, pl),
                quote_ident(&name(p)),
                quote_ident(&name(c)),
                where_clause(filters.iter().copied(), None),
                cat.column_sql(p, pl)
            ),
        });
    }
    out
}

/// The chat for `question` over `cat`: the system message ([`system_prompt`]), each example
/// as a user turn and the assistant's answer, then the question.
pub fn chat(cat: &Catalog, question: &str) -> Vec<formwork_engine::ChatMessage> {
    use formwork_engine::ChatMessage;
    let mut m = vec![ChatMessage::new("system", &system_prompt(cat))];
    m.extend(example_turns(cat));
    m.push(ChatMessage::new("user", question));
    m
}

/// The examples of `cat` as chat turns (user question, assistant query).
pub fn example_turns(cat: &Catalog) -> Vec<formwork_engine::ChatMessage> {
    use formwork_engine::ChatMessage;
    examples(cat).into_iter().flat_map(|e| [ChatMessage::new("user", &e.question), ChatMessage::new("assistant", &e.sql)]).collect()
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
