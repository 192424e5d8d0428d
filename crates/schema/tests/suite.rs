//! JSON Schema Test Suite conformance (draft2020-12, draft7, draft4), against a checked-in
//! baseline of refused and known-wrong cases.
//!
//! For every case, either the schema is refused (recorded with the keyword) or the grammar
//! must accept every valid instance (compact and pretty-printed) and reject every invalid
//! one. The grammar follows the specification's semantics (`KeyOrder::Any`; in 2020-12,
//! `formats_as_annotations`); the generation grammar (listed key order, formats asserted)
//! is also compiled for every case and must reject every invalid instance. An accepted invalid instance always fails the test. A case that got worse than the
//! baseline fails the test; `FORMWORK_BLESS=1` rewrites `tests/baseline.json`.

mod common;

use formwork_grammar::matcher::accepts;
use formwork_schema::{compile, Draft, KeyOrder, SchemaOptions};
use std::collections::BTreeMap;

fn run() {
    let data = common::data_dir().join("json-schema-test-suite/tests");
    let remotes = common::remotes();
    let baseline_path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/baseline.json");
    let baseline: BTreeMap<String, String> =
        std::fs::read_to_string(&baseline_path).ok().and_then(|s| serde_json::from_str(&s).ok()).unwrap_or_default();
    let mut now: BTreeMap<String, String> = BTreeMap::new();
    let mut invalid_accepted = Vec::new();
    let mut summary = Vec::new();
    for (dir, draft) in [("draft2020-12", Draft::Draft202012), ("draft7", Draft::Draft7), ("draft4", Draft::Draft4)] {
        let (mut right, mut refused, mut wrong) = (0, 0, 0);
        let mut files: Vec<_> = std::fs::read_dir(data.join(dir)).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_file()).collect();
        files.sort();
        for f in files {
            let fname = f.file_name().unwrap().to_string_lossy().to_string();
            let cases: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
            for (ci, case) in cases.as_array().unwrap().iter().enumerate() {
                let id = format!("{dir}/{fname}#{ci}: {}", case["description"].as_str().unwrap_or(""));
                // The specification's semantics: objects unordered; in 2020-12, `format` an
                // annotation (the suite's format.json expects that default).
                let formats_as_annotations = draft == Draft::Draft202012;
                let opts = SchemaOptions { draft, remotes: remotes.clone(), key_order: KeyOrder::Any, formats_as_annotations, ..Default::default() };
                // Generation's options: listed key order, formats asserted.
                let listed = SchemaOptions { key_order: KeyOrder::Listed, formats_as_annotations: false, ..opts.clone() };
                // The generation grammar (listed key order) accepts a subset: never an invalid instance.
                if let Ok(g) = compile(&case["schema"], &listed) {
                    for t in case["tests"].as_array().unwrap().iter().filter(|t| t["valid"] == false) {
                        for text in [serde_json::to_string(&t["data"]).unwrap(), serde_json::to_string_pretty(&t["data"]).unwrap()] {
                            if accepts(&g, text.as_bytes(), &listed.limits).unwrap_or(false) {
                                invalid_accepted.push(format!("{id} (listed key order) / {}: {text}", t["description"].as_str().unwrap_or("")));
                            }
                        }
                    }
                }
                let g = match compile(&case["schema"], &opts) {
                    Ok(g) => g,
                    Err(e) => {
                        refused += 1;
                        now.insert(id, format!("refused: {}", e.keyword().unwrap_or("limit")));
                        continue;
                    }
                };
                let mut ok = true;
                for t in case["tests"].as_array().unwrap() {
                    let valid = t["valid"].as_bool().unwrap();
                    for text in [serde_json::to_string(&t["data"]).unwrap(), serde_json::to_string_pretty(&t["data"]).unwrap()] {
                        let acc = accepts(&g, text.as_bytes(), &opts.limits).unwrap_or(false);
                        if acc && !valid {
                            invalid_accepted.push(format!("{id} / {}: {text}", t["description"].as_str().unwrap_or("")));
                        }
                        if !acc && valid {
                            ok = false;
                        }
                    }
                }
                if ok {
                    right += 1;
                } else {
                    wrong += 1;
                    now.insert(id, "wrong: valid instance rejected".into());
                }
            }
        }
        summary.push(format!("{dir}: right {right}, refused {refused}, wrong {wrong}"));
    }
    for s in &summary {
        eprintln!("{s}");
    }
    if std::env::var("FORMWORK_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&baseline_path, serde_json::to_string_pretty(&now).unwrap() + "\n").unwrap();
    }
    assert!(invalid_accepted.is_empty(), "{} invalid instances accepted:\n{}", invalid_accepted.len(), invalid_accepted.join("\n"));
    let regressions: Vec<String> = now.iter().filter(|(k, _)| !baseline.contains_key(*k)).map(|(k, v)| format!("{k}: {v}")).collect();
    let improved = baseline.keys().filter(|k| !now.contains_key(*k)).count();
    if improved > 0 {
        eprintln!("{improved} cases now right that the baseline lists; run with FORMWORK_BLESS=1 to record");
    }
    assert!(regressions.is_empty(), "{} cases regressed against tests/baseline.json:\n{}", regressions.len(), regressions.join("\n"));
}

#[test]
fn json_schema_test_suite() {
    common::big_stack(run);
}
