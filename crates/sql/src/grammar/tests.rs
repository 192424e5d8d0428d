//! Tests of the SQL grammars.

use super::*;
use crate::catalog::tests::shop;
use formwork_grammar::{accepts, Limits};

fn ok(g: &Grammar, s: &str) -> bool {
    accepts(g, s.as_bytes(), &Limits::default()).unwrap()
}

#[test]
fn identifiers_other_than_reserved_words() {
    let mut b = GrammarBuilder::new();
    b.define("root", identifier_except(&["from", "for", "or"], 10));
    let g = b.build("root").unwrap();
    for good in ["f", "fo", "fro", "froma", "forx", "o", "ord", "x_1", "_", "orr"] {
        assert!(ok(&g, good), "{good}");
    }
    for bad in ["from", "for", "or", "", "1x", "Abc", "abcdefghijk"] {
        assert!(!ok(&g, bad), "{bad}");
    }
}

#[test]
fn select_names_columns_of_their_tables() {
    let cat = shop();
    let g = select_grammar(&cat, &SqlGrammarOptions::default());
    for good in [
        "SELECT customers.name FROM",
        "SELECT DISTINCT customers.country, orders.total FROM",
        "SELECT COUNT(*) FROM",
        "SELECT *, customers.name AS who FROM",
        "SELECT SUM(orders.total) AS revenue, customers.name FROM",
        "SELECT orders.total * 2 + 1 FROM",
        "SELECT customers.name, COUNT(orders.id) * 2 AS n FROM",
        "SELECT notes.body FROM",
    ] {
        assert!(ok(&g, good), "{good}");
    }
    for bad in [
        "SELECT customers.total FROM",            // no such column
        "SELECT clients.name FROM",               // no such table
        "SELECT name FROM",                       // unqualified
        "SELECT customers.name, notes.body FROM", // unrelated tables
        "SELECT SUM(customers.name) FROM",        // SUM of text
        "SELECT customers.name * 2 FROM",         // arithmetic on text
        "SELECT customers.id, customers.name + 1 FROM",
        "SELECT customers.name AS from FROM",     // reserved alias
        "DELETE FROM",
    ] {
        assert!(!ok(&g, bad), "{bad}");
    }
}

#[test]
fn rest_joins_along_relationships_then_finishes() {
    let cat = shop();
    let o = SqlGrammarOptions::default();
    let c = cat.find("customers").unwrap();
    let ord = cat.find("orders").unwrap();
    let sel = |text: &str| SelectSummary::parse(text, &cat);
    let g = rest_grammar(&cat, &[c], &sel("SELECT customers.name, orders.total FROM"), &o);
    assert!(ok(&g, " JOIN orders ON orders.customer_id = customers.id"));
    assert!(ok(&g, " LEFT JOIN orders ON customers.id = orders.customer_id"));
    assert!(!ok(&g, ""), "orders is still required");
    assert!(!ok(&g, " JOIN products ON products.id = customers.id"), "no relationship");
    assert!(!ok(&g, " WHERE customers.name = 'x'"));
    let g = rest_grammar(&cat, &[c, ord], &sel("SELECT customers.name, orders.total AS revenue FROM"), &o);
    for good in [
        "",
        " WHERE customers.country = 'DE' AND orders.total > 10.5",
        " WHERE customers.name LIKE 'A%' OR NOT (orders.total BETWEEN 1 AND 2)",
        " WHERE orders.placed_at >= '2024-01-01' AND customers.deleted_at IS NULL",
        " WHERE orders.placed_at BETWEEN '2024-02-29' AND '2000-02-29 23:59:59'",
        " WHERE orders.customer_id = customers.id",
        " GROUP BY customers.name, orders.total HAVING SUM(orders.total) > 100 ORDER BY revenue DESC LIMIT 10",
        " GROUP BY customers.name, orders.total, customers.country ORDER BY COUNT(*) DESC",
        " WHERE customers.id IN (1, 2, 3)",
        " JOIN order_items ON order_items.order_id = orders.id",
    ] {
        assert!(ok(&g, good), "{good}");
    }
    for bad in [
        " WHERE products.price > 1",      // not in scope
        " WHERE orders.total = 'abc'",    // text literal for a number
        " WHERE orders.placed_at = '2023-02-29'", // not a leap year
        " WHERE orders.placed_at = '1900-02-29'",
        " WHERE orders.placed_at = '2024-04-31'",
        " WHERE orders.placed_at = '2024-01-01 24:00'",
        " WHERE customers.name = 5",      // number for text
        " WHERE customers.id = 1; DROP TABLE customers",
        " ORDER BY who",                  // unknown alias
        " ORDER BY COUNT(*)",             // an aggregate without GROUP BY
        " GROUP BY customers.name",       // orders.total is shown but not grouped
        " LIMIT 0",
    ] {
        assert!(!ok(&g, bad), "{bad}");
    }
}

#[test]
fn aggregates_beside_columns_force_their_grouping() {
    let cat = shop();
    let o = SqlGrammarOptions::default();
    let (c, ord) = (cat.find("customers").unwrap(), cat.find("orders").unwrap());
    let sel = |text: &str| SelectSummary::parse(text, &cat);
    let g = rest_grammar(&cat, &[c, ord], &sel("SELECT customers.name, SUM(orders.total) AS spent FROM"), &o);
    assert!(ok(&g, " GROUP BY customers.name"));
    assert!(ok(&g, " WHERE orders.total > 1 GROUP BY customers.name, customers.id ORDER BY spent DESC"));
    assert!(ok(&g, " GROUP BY customers.name ORDER BY customers.name, SUM(orders.total)"));
    assert!(!ok(&g, ""), "customers.name must be grouped");
    assert!(!ok(&g, " GROUP BY customers.id"));
    assert!(!ok(&g, " GROUP BY customers.name ORDER BY orders.placed_at"), "not grouped");
    let g = rest_grammar(&cat, &[c], &sel("SELECT COUNT(*) FROM"), &o);
    assert!(ok(&g, ""));
    assert!(ok(&g, " GROUP BY customers.country ORDER BY COUNT(*) DESC"));
    assert!(!ok(&g, " ORDER BY customers.name"));
    let g = rest_grammar(&cat, &[c], &sel("SELECT DISTINCT customers.country FROM"), &o);
    assert!(ok(&g, " ORDER BY customers.country"));
    assert!(!ok(&g, " ORDER BY customers.name"), "DISTINCT orders by what it shows");
}

#[test]
fn required_filters_come_first_and_ors_stay_inside() {
    let mut cat = shop();
    cat.require_filter("customers", "customers.deleted_at IS NULL").unwrap();
    let c = cat.find("customers").unwrap();
    let g = rest_grammar(&cat, &[c], &SelectSummary::parse("SELECT customers.name FROM", &cat), &SqlGrammarOptions::default());
    assert!(ok(&g, " WHERE customers.deleted_at IS NULL"));
    assert!(ok(&g, " WHERE customers.deleted_at IS NULL AND (customers.name = 'a' OR customers.name = 'b')"));
    assert!(!ok(&g, ""), "the filter is required");
    assert!(!ok(&g, " WHERE customers.name = 'a'"));
    assert!(!ok(&g, " WHERE customers.deleted_at IS NULL AND customers.name = 'a' OR customers.name = 'b'"));
}

#[test]
fn known_values_are_the_only_literals() {
    let mut cat = shop();
    let c = cat.find("customers").unwrap();
    let mut t = cat.table(c).clone();
    t.columns[2].values = Some(vec!["DE".into(), "FR".into(), "O'Brien".into()]);
    let tables: Vec<_> = cat.tables().iter().map(|x| if x.name == "customers" { t.clone() } else { x.clone() }).collect();
    let rel = cat.relationships().to_vec();
    cat = Catalog::new(Dialect::Sqlite, tables).unwrap();
    for r in rel {
        cat.relate(r).unwrap();
    }
    let g = rest_grammar(&cat, &[c], &SelectSummary::parse("SELECT customers.name FROM", &cat), &SqlGrammarOptions::default());
    assert!(ok(&g, " WHERE customers.country = 'DE'"));
    assert!(ok(&g, " WHERE customers.country IN ('FR', 'O''Brien')"));
    assert!(ok(&g, " WHERE customers.country LIKE 'D%'"));
    assert!(!ok(&g, " WHERE customers.country = 'Germany'"));
}

#[test]
fn relaxed_grammar_prints_as_gbnf_and_reads_back() {
    let cat = shop();
    let g = relaxed_grammar(&cat, &SqlGrammarOptions::default());
    let text = formwork_grammar::gbnf::print(&g);
    let back = formwork_grammar::gbnf::parse(&text, &Limits::default()).unwrap();
    for s in [
        "SELECT customers.name FROM customers",
        "SELECT orders.total FROM orders JOIN customers ON orders.customer_id = customers.id WHERE customers.country = 'DE'",
    ] {
        assert!(ok(&back, s), "{s}");
    }
    assert!(!ok(&back, "SELECT customers.nam FROM customers"));
}
