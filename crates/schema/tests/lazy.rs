//! Lazy compilation ([`compile_lazy`]) against eager compilation ([`compile_with_warnings`])
//! on every MaskBench dev schema: the same refusals and warnings (as sets: the scan finds
//! some up front that eager compilation finds on the way), and the same verdict on
//! every test instance, compact and pretty-printed, walked byte by byte through the compiled
//! grammar (so the deferred rules are built as a model's output would build them). Debug
//! builds take every 4th file.

mod common;

use formwork_grammar::{CompiledGrammar, Limits, TokenIndex};
use formwork_schema::{compile_lazy, compile_with_warnings, KeyOrder, SchemaOptions, Warning};
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

fn run() {
    let dir = common::data_dir().join("maskbench-dev");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "json")).collect();
    files.sort();
    let step = if cfg!(debug_assertions) { 4 } else { 1 };
    let index = index();
    let limits = Limits::default();
    let (mut compared, mut deferred, mut instances, mut lazy_files) = (0, 0, 0, 0);
    for key_order in [KeyOrder::Any, KeyOrder::Listed] {
        let opts = SchemaOptions { key_order, ..Default::default() };
        for f in files.iter().step_by(step) {
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
            let eager = compile_with_warnings(&v["schema"], &opts);
            let lazy = compile_lazy(&v["schema"], &opts);
            let ((g, we), (lg, wl)) = match (eager, lazy) {
                (Ok(e), Ok(l)) => (e, l),
                (Err(e), Err(l)) => {
                    assert_eq!(e.to_string(), l.to_string(), "{name}: refused differently");
                    continue;
                }
                (e, l) => panic!("{name}: eager {:?} but lazy {:?}", e.err(), l.err().map(|e| e.to_string())),
            };
            let set = |w: Vec<Warning>| w.into_iter().map(|w| w.to_string()).collect::<std::collections::BTreeSet<_>>();
            assert_eq!(set(we), set(wl), "{name}: different warnings");
            compared += 1;
            deferred += lg.deferred.len();
            lazy_files += usize::from(!lg.deferred.is_empty());
            let (ge, gl) = match (CompiledGrammar::with_index(&g, index.clone(), &limits), CompiledGrammar::lazy(lg, index.clone(), &limits)) {
                (Ok(e), Ok(l)) => (e, l),
                (Err(e), Err(l)) => {
                    assert_eq!(e.to_string(), l.to_string(), "{name}: refused differently");
                    continue;
                }
                (e, l) => panic!("{name}: eager {:?} but lazy {:?}", e.err(), l.err()),
            };
            for t in v["tests"].as_array().into_iter().flatten() {
                for text in [serde_json::to_string(&t["data"]).unwrap(), serde_json::to_string_pretty(&t["data"]).unwrap()] {
                    assert_eq!(accepts(&ge, &text), accepts(&gl, &text), "{name} ({key_order:?}): {}", &text[..text.len().min(300)]);
                    instances += 1;
                }
            }
        }
    }
    eprintln!("lazy vs eager: {compared} grammars, {lazy_files} with deferred rules ({deferred} in all), {instances} instances");
    assert!(lazy_files * 4 > compared / 10, "too few grammars deferred anything to say much: {lazy_files} of {compared}");
}
