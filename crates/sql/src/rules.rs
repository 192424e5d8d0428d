//! [`Rules`]: what the database does not say — hidden tables and columns, relationships
//! without foreign keys, and the filters a business relies on — read from a TOML file:
//!
//! ```toml
//! # Never shown to the model, never nameable in a query.
//! hidden = ["audit_log", "customers.password_hash"]
//!
//! # Every query that reads the table carries this condition (SQL over that table).
//! [required_filters]
//! customers = "customers.deleted_at IS NULL AND customers.is_test_account = 0"
//!
//! # Relationships the database does not declare; joins may follow them.
//! [[relationships]]
//! from = "orders.customer_id"          # or a list, for a key of several columns
//! to = "customers.id"
//! ```
//!
//! Applied in that order of meaning: declared relationships first (so a hidden table takes
//! its relationships with it), then hiding, then filters. A name that does not exist is an
//! error naming it; a filter is checked by the database's own parser when a database is at
//! hand.

use crate::catalog::{Catalog, Relationship};
use crate::database::Database;
use crate::error::SqlError;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// One column or several (a composite key).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum Columns {
    /// `table.column`.
    One(String),
    /// Several `table.column`, all of one table.
    Many(Vec<String>),
}

impl Columns {
    fn list(&self) -> Vec<&str> {
        match self {
            Columns::One(c) => vec![c.as_str()],
            Columns::Many(cs) => cs.iter().map(String::as_str).collect(),
        }
    }
}

/// A relationship declared in a rules file.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DeclaredRelationship {
    /// The referring column(s).
    pub from: Columns,
    /// The referred column(s).
    pub to: Columns,
}

/// A rules file (see the module docs).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Rules {
    /// Tables (`name`) and columns (`table.column`) to hide.
    #[serde(default)]
    pub hidden: Vec<String>,
    /// Per table, the condition every query reading it must carry.
    #[serde(default)]
    pub required_filters: BTreeMap<String, String>,
    /// Relationships to add.
    #[serde(default)]
    pub relationships: Vec<DeclaredRelationship>,
}

/// Largest rules file read (bytes).
pub const MAX_RULES_BYTES: u64 = 1 << 20;

impl Rules {
    /// Reads and parses a rules file.
    pub fn load(path: &Path) -> Result<Rules, SqlError> {
        let err = |why: String| SqlError::Rules { path: path.display().to_string(), why };
        let len = std::fs::metadata(path).map_err(|e| err(e.to_string()))?.len();
        if len > MAX_RULES_BYTES {
            return Err(err(format!("{len} bytes is larger than the limit of {MAX_RULES_BYTES}")));
        }
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        Rules::parse(&text).map_err(err)
    }

    /// Parses rules from TOML text.
    pub fn parse(text: &str) -> Result<Rules, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// Applies the rules to `catalog`; with `db`, each required filter is first checked by
    /// the database (it must be a condition over its table).
    pub fn apply(&self, catalog: &mut Catalog, db: Option<&Database>, path: &str) -> Result<(), SqlError> {
        let err = |why: String| SqlError::Rules { path: path.to_string(), why };
        for r in &self.relationships {
            let resolve = |cols: &Columns| -> Result<(crate::catalog::TableId, Vec<usize>), SqlError> {
                let mut table = None;
                let mut out = Vec::new();
                for c in cols.list() {
                    let (t, col) = catalog.resolve_column(c).map_err(|e| err(format!("relationship: {}", e.0)))?;
                    if table.is_some_and(|x| x != t) {
                        return Err(err(format!("relationship: the columns {:?} are not all of one table", cols.list())));
                    }
                    table = Some(t);
                    out.push(col);
                }
                Ok((table.ok_or_else(|| err("relationship: no columns".into()))?, out))
            };
            let (from, from_columns) = resolve(&r.from)?;
            let (to, to_columns) = resolve(&r.to)?;
            catalog.relate(Relationship { from, from_columns, to, to_columns }).map_err(|e| err(e.0))?;
        }
        for h in &self.hidden {
            if h.contains('.') {
                catalog.hide_column(h).map_err(|e| err(e.0))?;
            } else {
                catalog.hide_table(h).map_err(|e| err(e.0))?;
            }
        }
        for (table, filter) in &self.required_filters {
            if filter.contains(';') {
                return Err(err(format!("the required filter of `{table}` contains `;`: it must be one condition")));
            }
            catalog.require_filter(table, filter).map_err(|e| err(e.0))?;
            if let Some(db) = db {
                let t = catalog.find(table).expect("just resolved");
                let sql = format!("SELECT 1 FROM {} WHERE {filter} LIMIT 0", crate::catalog::quote_ident(&catalog.table(t).name));
                db.check(&sql).map_err(|e| err(format!("the required filter of `{table}` is not a condition over it: {e}")))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::tests::shop;

    #[test]
    fn rules_hide_relate_and_require() {
        let rules = Rules::parse(
            r#"
            hidden = ["order_items", "customers.deleted_at"]
            [required_filters]
            customers = "customers.country != 'XX'"
            [[relationships]]
            from = "notes.id"
            to = "customers.id"
            "#,
        )
        .unwrap();
        let mut c = shop();
        rules.apply(&mut c, None, "rules.toml").unwrap();
        assert!(c.find("order_items").is_none());
        let cust = c.find("customers").unwrap();
        assert!(c.table(cust).column("deleted_at").is_none());
        assert_eq!(c.table(cust).required_filter.as_deref(), Some("customers.country != 'XX'"));
        assert!(c.neighbours(c.find("notes").unwrap()).contains(&cust));
    }

    #[test]
    fn unknown_names_and_fields_are_errors_that_name_them() {
        let mut c = shop();
        let e = Rules::parse("hidden = [\"ghosts\"]").unwrap().apply(&mut c, None, "r.toml").unwrap_err();
        assert!(e.to_string().contains("ghosts") && e.to_string().contains("r.toml"), "{e}");
        let e = Rules::parse("[[relationships]]\nfrom = \"orders.nope\"\nto = \"customers.id\"").unwrap().apply(&mut c, None, "r.toml").unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        assert!(Rules::parse("hiden = []").unwrap_err().contains("hiden"));
        let e = Rules::parse("[required_filters]\ncustomers = \"1=1; DROP TABLE customers\"").unwrap().apply(&mut c, None, "r.toml").unwrap_err();
        assert!(e.to_string().contains("one condition"), "{e}");
    }
}
