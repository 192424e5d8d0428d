//! Lazy compilation ([`compile_lazy`]) against eager compilation ([`compile_with_warnings`])
//! on every MaskBench dev schema and every JSON Schema Test Suite case (three drafts, strict
//! and lenient): the same refusals and warnings (as sets: the scan finds
//! some up front that eager compilation finds on the way), and the same verdict on
//! every test instance, compact and pretty-printed, walked byte by byte through the compiled
//! grammar (so the deferred rules are built as a model's output would build them). Debug
//! builds take every 4th file.

mod common;

use formwork_grammar::{CompiledGrammar, Limits, TokenIndex};
use formwork_schema::{compile_lazy, compile_with_warnings, Draft, KeyOrder, SchemaOptions, Warning};
use formwork_vocab::Vocabulary;
use std::sync::Arc;

/// Does `g` accept `text` (byte by byte)?
fn accepts(g: &Arc<CompiledGrammar>, text: &str) -> bool {
    let mut m = g.matcher();
    m.commit_bytes(text.as_bytes()).is_ok() && m.is_accepting()
}

fn index() -> Arc<TokenIndex> {
    let bytes: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    TokenIndex::for_vocab(&Arc::new(Vocabulary::from_strings(&bytes, &[])))
}

#[test]
fn lazy_grammars_accept_what_eager_ones_accept() {
    common::big_stack(run);
}

/// Compiles `schema` both ways under `opts` and checks they agree on refusals, warnings and
/// every text of `texts`; returns how many rules were deferred (`None`: both refused).
fn compare(name: &str, schema: &serde_json::Value, opts: &SchemaOptions, texts: &[String], index: &Arc<TokenIndex>) -> Option<usize> {
    let limits = Limits::default();
    let ((g, we), (lg, wl)) = match (compile_with_warnings(schema, opts), compile_lazy(schema, opts)) {
        (Ok(e), Ok(l)) => (e, l),
        (Err(e), Err(l)) => {
            assert_eq!(e.to_string(), l.to_string(), "{name}: refused differently");
            return None;
        }
        (e, l) => panic!("{name}: eager {:?} but lazy {:?}", e.err(), l.err().map(|e| e.to_string())),
    };
    let set = |w: Vec<Warning>| w.into_iter().map(|w| w.to_string()).collect::<std::collections::BTreeSet<_>>();
    assert_eq!(set(we), set(wl), "{name}: different warnings");
    let deferred = lg.deferred.len();
    let (ge, gl) = match (CompiledGrammar::with_index(&g, index.clone(), &limits), CompiledGrammar::lazy(lg, index.clone(), &limits)) {
        (Ok(e), Ok(l)) => (e, l),
        (Err(e), Err(l)) => {
            // The same refusal; a size limit may name another rule (the lazy grammar has
            // fewer rules up front, so its lowering crosses the limit elsewhere).
            assert_eq!(without_rule_name(&e.to_string()), without_rule_name(&l.to_string()), "{name}: refused differently");
            return None;
        }
        (e, l) => panic!("{name}: eager {:?} but lazy {:?}", e.err(), l.err()),
    };
    for text in texts {
        assert_eq!(accepts(&ge, text), accepts(&gl, text), "{name}: {}", &text[..text.len().min(300)]);
    }
    Some(deferred)
}

/// A lowering error's text without the rule it names (`(rule `obj12-m`)`).
fn without_rule_name(e: &str) -> String {
    match (e.find("(rule `"), e.find("`)")) {
        (Some(a), Some(b)) if a < b => format!("{}{}", &e[..a], &e[b + 2..]),
        _ => e.to_string(),
    }
}

/// Each instance of `tests` compact and pretty-printed.
fn texts(tests: &serde_json::Value) -> Vec<String> {
    tests.as_array().into_iter().flatten().flat_map(|t| [serde_json::to_string(&t["data"]).unwrap(), serde_json::to_string_pretty(&t["data"]).unwrap()]).collect()
}

#[test]
fn the_test_suite_gives_the_same_verdicts_lazily() {
    common::big_stack(|| {
        let data = common::data_dir().join("json-schema-test-suite/tests");
        let remotes = common::remotes();
        let index = index();
        let (mut cases, mut lazy) = (0, 0);
        for (dir, draft) in [("draft2020-12", Draft::Draft202012), ("draft7", Draft::Draft7), ("draft4", Draft::Draft4)] {
            let mut files: Vec<_> = std::fs::read_dir(data.join(dir)).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_file()).collect();
            files.sort();
            for f in files {
                let all: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
                for (ci, case) in all.as_array().unwrap().iter().enumerate() {
                    for lenient in [false, true] {
                        let opts = SchemaOptions { draft, remotes: remotes.clone(), key_order: KeyOrder::Any, lenient, ..Default::default() };
                        let name = format!("{dir}/{}#{ci} (lenient {lenient})", f.file_name().unwrap().to_string_lossy());
                        if let Some(d) = compare(&name, &case["schema"], &opts, &texts(&case["tests"]), &index) {
                            cases += 1;
                            lazy += usize::from(d > 0);
                        }
                    }
                }
            }
        }
        eprintln!("test suite, lazy vs eager: {cases} grammars, {lazy} with deferred rules");
        // The suite's schemas are small, their keywords mostly at the root: few defer
        // anything, and all must refuse and warn alike.
        assert!(lazy > 10, "too few cases deferred anything to say much: {lazy}");
    });
}

fn run() {
    let dir = common::data_dir().join("maskbench-dev");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "json")).collect();
    files.sort();
    let step = if cfg!(debug_assertions) { 4 } else { 1 };
    let index = index();
    let (mut compared, mut deferred, mut instances, mut lazy_files) = (0, 0, 0, 0);
    for key_order in [KeyOrder::Any, KeyOrder::Listed] {
        let opts = SchemaOptions { key_order, ..Default::default() };
        for f in files.iter().step_by(step) {
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
            let Some(d) = compare(&format!("{name} ({key_order:?})"), &v["schema"], &opts, &texts(&v["tests"]), &index) else { continue };
            compared += 1;
            deferred += d;
            lazy_files += usize::from(d > 0);
            instances += 2 * v["tests"].as_array().map_or(0, Vec::len);
        }
    }
    eprintln!("lazy vs eager: {compared} grammars, {lazy_files} with deferred rules ({deferred} in all), {instances} instances");
    assert!(lazy_files * 4 > compared / 10, "too few grammars deferred anything to say much: {lazy_files} of {compared}");
}

#[test]
fn threads_sharing_a_lazy_grammar_build_it_consistently() {
    // Four threads walk the same instances through one lazily compiled grammar at once, so
    // deferred rules are built while other threads are masking; every verdict must be the
    // eager grammar's.
    let dir = common::data_dir().join("maskbench-dev");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.to_string_lossy().contains("Kubernetes")).collect();
    files.sort();
    let index = index();
    let limits = Limits::default();
    let opts = SchemaOptions { key_order: KeyOrder::Any, ..Default::default() };
    let mut checked = 0;
    for f in files.iter().step_by(if cfg!(debug_assertions) { 20 } else { 4 }) {
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        let (Ok(g), Ok((lg, _))) = (formwork_schema::compile(&v["schema"], &opts), compile_lazy(&v["schema"], &opts)) else { continue };
        if lg.deferred.is_empty() {
            continue;
        }
        let (Ok(ge), Ok(gl)) = (CompiledGrammar::with_index(&g, index.clone(), &limits), CompiledGrammar::lazy(lg, index.clone(), &limits)) else { continue };
        let texts = texts(&v["tests"]);
        let want: Vec<bool> = texts.iter().map(|t| accepts(&ge, t)).collect();
        std::thread::scope(|s| {
            for k in 0..4 {
                let (gl, texts, want) = (&gl, &texts, &want);
                s.spawn(move || {
                    // Each thread in its own order, so they reach definitions at different times.
                    for i in (0..texts.len()).map(|i| (i + k * 7) % texts.len()) {
                        assert_eq!(accepts(gl, &texts[i]), want[i], "{}: {}", f.display(), &texts[i][..texts[i].len().min(200)]);
                    }
                });
            }
        });
        checked += 1;
    }
    assert!(checked >= 3, "only {checked} Kubernetes files had deferred rules");
}
