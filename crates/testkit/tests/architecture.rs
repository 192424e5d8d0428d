//! The crate arrows drawn in ARCHITECTURE.md are exactly the workspace's: every workspace
//! crate is in its table, each with the workspace crates it depends on (normal dependencies,
//! optional ones included), and each depends only on crates listed above it (layers, no
//! cycles). The workspace is read with `cargo metadata`.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// The dependency table between the `deps:begin` and `deps:end` markers: crate → its arrows,
/// in table order.
fn drawn(doc: &str) -> Vec<(String, BTreeSet<String>)> {
    let begin = doc.find("<!-- deps:begin -->").expect("ARCHITECTURE.md has a `<!-- deps:begin -->` marker");
    let end = doc.find("<!-- deps:end -->").expect("ARCHITECTURE.md has a `<!-- deps:end -->` marker");
    let mut rows = Vec::new();
    for line in doc[begin..end].lines().filter(|l| l.starts_with("| formwork-")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        assert_eq!(cells.len(), 3, "a table row has three cells (crate, what it is, depends on): {line}");
        let deps = cells[2].split(',').map(str::trim).filter(|d| !d.is_empty() && *d != "—").map(str::to_string).collect();
        rows.push((cells[0].to_string(), deps));
    }
    rows
}

/// Workspace crate → the workspace crates it depends on (normal kind, optional included).
fn actual() -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("running cargo metadata");
    assert!(out.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr));
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let names: BTreeSet<String> = packages.iter().map(|p| p["name"].as_str().unwrap().to_string()).collect();
    packages
        .iter()
        .map(|p| {
            let name = p["name"].as_str().unwrap().to_string();
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null() && names.contains(d["name"].as_str().unwrap()) && d["name"] != p["name"])
                .map(|d| d["name"].as_str().unwrap().to_string())
                .collect();
            (name, deps)
        })
        .collect()
}

#[test]
fn the_crate_arrows_are_those_drawn_in_architecture_md() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ARCHITECTURE.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let rows = drawn(&doc);
    let actual = actual();
    let listed: BTreeSet<&String> = rows.iter().map(|(n, _)| n).collect();
    let missing: Vec<&String> = actual.keys().filter(|n| !listed.contains(n)).collect();
    assert!(missing.is_empty(), "crates missing from ARCHITECTURE.md's table: {missing:?}");
    let mut above: BTreeSet<&str> = BTreeSet::new();
    for (name, deps) in &rows {
        let real = actual.get(name).unwrap_or_else(|| panic!("ARCHITECTURE.md lists {name}, which is not a workspace crate"));
        let added: Vec<&String> = real.difference(deps).collect();
        let gone: Vec<&String> = deps.difference(real).collect();
        assert!(added.is_empty() && gone.is_empty(), "{name}: arrows not drawn in ARCHITECTURE.md {added:?}; drawn but not in Cargo.toml {gone:?}");
        let upward: Vec<&String> = deps.iter().filter(|d| !above.contains(d.as_str())).collect();
        assert!(upward.is_empty(), "{name} depends on {upward:?}, listed below it: the table is layered, dependencies point up the table");
        above.insert(name);
    }
}

#[test]
fn the_table_parser_reads_rows_and_empty_cells() {
    let doc = "x\n<!-- deps:begin -->\n| crate | what | depends on |\n|---|---|---|\n| formwork-a | a | — |\n| formwork-b | b, c | formwork-a |\n<!-- deps:end -->\n";
    let rows = drawn(doc);
    assert_eq!(rows.len(), 2);
    assert!(rows[0].1.is_empty());
    assert_eq!(rows[1].1, BTreeSet::from(["formwork-a".to_string()]));
}
