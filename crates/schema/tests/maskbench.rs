//! Every MaskBench dev schema compiles or is refused, within a time bound, and the compiled
//! grammars (any key order) accept every valid test instance and no invalid one; the
//! generation grammars (listed key order) accept no invalid one either. Debug builds run every 8th file; release
//! builds (or `FORMWORK_MASKBENCH_ALL=1`) run all of them. Figures go to stderr.

mod common;

use formwork_grammar::matcher::accepts;
use formwork_schema::{compile, to_layout_string, KeyOrder, SchemaOptions, Whitespace};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

fn run() {
    let dir = common::data_dir().join("maskbench-dev");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "json")).collect();
    files.sort();
    let all = !cfg!(debug_assertions) || std::env::var("FORMWORK_MASKBENCH_ALL").is_ok_and(|v| v == "1");
    let step = if all { 1 } else { 8 };
    let (mut compiled, mut passed, mut valid_rejected, mut files_vr) = (0, 0, 0, 0);
    let mut refused: BTreeMap<String, usize> = BTreeMap::new();
    let mut invalid_accepted = Vec::new();
    let mut slowest = (Duration::ZERO, String::new());
    // Objects in any key order: the files list `properties` sorted by name while their
    // instances keep the order they were written in, so no listed order fits them all.
    let opts = SchemaOptions { key_order: KeyOrder::Any, ..Default::default() };
    // The generation grammar (listed key order) must never accept an invalid instance either.
    let listed = SchemaOptions { key_order: KeyOrder::Listed, ..opts.clone() };
    for f in files.iter().step_by(step) {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        let t = Instant::now();
        let r = compile(&v["schema"], &opts);
        let el = t.elapsed();
        if el > slowest.0 {
            slowest = (el, name.clone());
        }
        assert!(el < Duration::from_secs(if all { 5 } else { 30 }), "{name}: compiling took {el:?}");
        let g = match r {
            Ok(g) => g,
            Err(e) => {
                *refused.entry(e.keyword().unwrap_or("limit").to_string()).or_default() += 1;
                continue;
            }
        };
        compiled += 1;
        if let Ok(lg) = compile(&v["schema"], &listed) {
            for t in v["tests"].as_array().into_iter().flatten().filter(|t| t["valid"] == false) {
                let text = serde_json::to_string(&t["data"]).unwrap();
                if accepts(&lg, text.as_bytes(), &listed.limits).unwrap_or(false) {
                    invalid_accepted.push(format!("{name} (listed key order): {}", &text[..text.len().min(200)]));
                }
            }
        }
        let mut ok = true;
        for t in v["tests"].as_array().into_iter().flatten() {
            let valid = t["valid"].as_bool().unwrap_or(true);
            let text = serde_json::to_string(&t["data"]).unwrap();
            let acc = accepts(&g, text.as_bytes(), &opts.limits).unwrap_or(false);
            if acc && !valid {
                invalid_accepted.push(format!("{name}: {}", &text[..text.len().min(200)]));
                ok = false;
            }
            if !acc && valid {
                if valid_rejected < 40 {
                    eprintln!("valid rejected: {name}: {}", &text[..text.len().min(160)]);
                }
                valid_rejected += 1;
                ok = false;
            }
        }
        if ok {
            passed += 1;
        } else {
            files_vr += 1;
        }
    }
    let n = files.iter().step_by(step).count();
    eprintln!("maskbench-dev: {n} files, compiled {compiled}, passed {passed}, files with errors {files_vr}, valid rejected {valid_rejected}, invalid accepted {}", invalid_accepted.len());
    eprintln!("refused by keyword: {refused:?}");
    eprintln!("slowest compile: {:?} ({})", slowest.0, slowest.1);
    assert!(invalid_accepted.is_empty(), "invalid instances accepted:\n{}", invalid_accepted.join("\n"));
    assert_eq!(valid_rejected, 0, "valid instances rejected (listed above)");
}

#[test]
fn maskbench_dev_schemas() {
    common::big_stack(run);
}

/// The compact and pretty styles give the same verdicts as the flexible one, each on the
/// instances written in its own layout ([`to_layout_string`]), and refuse the other
/// layout wherever it differs. Every 2nd file in release builds, every 16th in debug.
fn styles() {
    let dir = common::data_dir().join("maskbench-dev");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "json")).collect();
    files.sort();
    let step = if cfg!(debug_assertions) { 16 } else { 2 };
    let pretty = Whitespace::Pretty { indent: 2 };
    let (mut checked, mut wrong) = (0usize, Vec::new());
    for f in files.iter().step_by(step) {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        for style in [Whitespace::Compact, pretty] {
            let opts = SchemaOptions { key_order: KeyOrder::Any, whitespace: style, ..Default::default() };
            let flexible = SchemaOptions { key_order: KeyOrder::Any, ..Default::default() };
            let (Ok(g), Ok(fg)) = (compile(&v["schema"], &opts), compile(&v["schema"], &flexible)) else { continue };
            for t in v["tests"].as_array().into_iter().flatten() {
                let text = to_layout_string(&t["data"], style);
                let expected = accepts(&fg, serde_json::to_string(&t["data"]).unwrap().as_bytes(), &opts.limits).unwrap_or(false);
                let got = accepts(&g, text.as_bytes(), &opts.limits).unwrap_or(false);
                checked += 1;
                if got != expected {
                    wrong.push(format!("{name} {style:?}: accepted {got}, flexible {expected}: {}", &text[..text.len().min(200)]));
                }
                let other = to_layout_string(&t["data"], if style == pretty { Whitespace::Compact } else { pretty });
                if other != text && accepts(&g, other.as_bytes(), &opts.limits).unwrap_or(false) {
                    wrong.push(format!("{name} {style:?}: accepted the other layout: {}", &other[..other.len().min(200)]));
                }
            }
        }
    }
    eprintln!("styles: {checked} instances checked");
    assert!(checked > 100);
    assert!(wrong.is_empty(), "{} wrong:\n{}", wrong.len(), wrong[..wrong.len().min(20)].join("\n"));
}

#[test]
fn compact_and_pretty_styles_agree_with_the_flexible_one() {
    common::big_stack(styles);
}

/// Token masks on real schemas equal the brute-force answer: after each structural byte of
/// the valid instances (`{`, `[`, `,`, `:`, `"`, where object keys and values start), every
/// token of the SmolLM2 vocabulary is allowed in the mask exactly when stepping its bytes
/// through a second, independent copy of the grammar succeeds. This checks the mask machinery
/// (truncated states, first-byte dispatch, bounded-repetition shortcuts, unordered groups)
/// against the automaton itself. Release builds check every 4th file, debug builds every 64th.
fn masks_brute_force() {
    use formwork_grammar::matcher::CompiledGrammar;
    use formwork_vocab::{TokenMask, Vocabulary};
    use std::sync::Arc;
    let vocab = Arc::new(Vocabulary::from_tokenizer_json_file(common::data_dir().join("tokenizers/smollm2.json"), None).unwrap());
    let dir = common::data_dir().join("maskbench-dev");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "json")).collect();
    files.sort();
    let step = if cfg!(debug_assertions) { 64 } else { 4 };
    let opts = SchemaOptions { key_order: KeyOrder::Any, ..Default::default() };
    let (mut checked_masks, mut checked_files) = (0usize, 0usize);
    for f in files.iter().step_by(step) {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        let Ok(g) = compile(&v["schema"], &opts) else { continue };
        let Ok(cg) = CompiledGrammar::new(&g, vocab.clone(), &opts.limits) else { continue };
        let oracle = CompiledGrammar::new(&g, vocab.clone(), &opts.limits).unwrap();
        checked_files += 1;
        let mut mask = TokenMask::new(vocab.len());
        for t in v["tests"].as_array().into_iter().flatten().filter(|t| t["valid"] != false) {
            let text = serde_json::to_string(&t["data"]).unwrap();
            let (mut m, mut o) = (cg.matcher(), oracle.matcher());
            // At most 24 positions per instance, spread over it.
            let points: Vec<usize> = (1..=text.len()).filter(|&i| b"{[,:\"".contains(&text.as_bytes()[i - 1])).collect();
            let every = points.len().div_ceil(24).max(1);
            let mut done = 0;
            for &i in points.iter().step_by(every) {
                m.commit_bytes(&text.as_bytes()[done..i]).unwrap();
                o.commit_bytes(&text.as_bytes()[done..i]).unwrap();
                done = i;
                m.compute_mask(&mut mask);
                for u in vocab.ids() {
                    let ok = o.is_allowed(u);
                    assert_eq!(mask.contains(u), ok, "{name}: token {:?} after {:?}", String::from_utf8_lossy(vocab.token_bytes(u)), &text[..i]);
                }
                checked_masks += 1;
            }
        }
    }
    eprintln!("brute-force masks: {checked_masks} masks in {checked_files} files, all equal");
    assert!(checked_masks > 0);
}

#[test]
fn maskbench_masks_equal_brute_force() {
    common::big_stack(masks_brute_force);
}
