//! Where the time to first mask goes, per schema file: the schema compiled to a grammar,
//! the grammar compiled for the vocabulary, the first mask (best of 5 each), and the first
//! of the five rounds whole (what `bench masks` times once per file).
//!
//! `cargo run --release -p formwork-schema --example ttfm_phases -- [--lazy] [--listed] [--shared] TOKENIZER.json FILE...`
//! (a MaskBench file's `schema` member, or a plain schema). `--lazy` compiles the schema
//! with deferred locations (`compile_lazy`), as `bench masks`, the mask-engine protocol and
//! the Python package do; `--listed`: objects in listed key order (else any order);
//! `--shared` (with `--lazy`): the schema handed over as an `Arc` (`compile_lazy_shared`,
//! as the server and the Python package do), not copied by the compile.

#[global_allocator]
static GLOBAL: formwork_alloc::MiMalloc = formwork_alloc::MiMalloc;

use formwork_grammar::{CompiledGrammar, Limits, TokenIndex};
use formwork_vocab::{TokenMask, Vocabulary};
use std::time::Instant;

fn main() {
    formwork_alloc::keep_freed_memory();
    let mut args = std::env::args().skip(1).peekable();
    let lazy = args.next_if(|a| a == "--lazy").is_some();
    let key_order = if args.next_if(|a| a == "--listed").is_some() { formwork_schema::KeyOrder::Listed } else { formwork_schema::KeyOrder::Any };
    let shared = args.next_if(|a| a == "--shared").is_some();
    let tok = args.next().expect("usage: ttfm_phases [--lazy] [--listed] [--shared] TOKENIZER.json FILE...");
    let vocab = std::sync::Arc::new(Vocabulary::from_tokenizer_json_file(&tok, None).expect("tokenizer"));
    let index = TokenIndex::for_vocab(&vocab);
    let limits = Limits::default();
    for file in args {
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let schema = v.get("schema").cloned().unwrap_or(v);
        let arc = std::sync::Arc::new(schema.clone());
        let opts = formwork_schema::SchemaOptions { key_order, ..Default::default() };
        let (mut a, mut b, mut c) = (f64::MAX, f64::MAX, f64::MAX);
        let mut rules = 0;
        let mut presence = false;
        let mut refused = false;
        // The first round's total (compile and first mask), as `bench masks` times each
        // file once: cold caches and fresh memory included.
        let mut first = 0.0;
        let mut first_phases = (0.0, 0.0, 0.0);
        for round in 0..5 {
            let t0 = Instant::now();
            let compiled = if lazy {
                if shared { formwork_schema::compile_lazy_shared(arc.clone(), &opts) } else { formwork_schema::compile_lazy(&schema, &opts) }.map(|(g, _)| {
                    rules = g.grammar.rules().len();
                    (None, Some(g))
                })
            } else {
                formwork_schema::compile(&schema, &opts).map(|g| (Some(g), None))
            };
            let (g, lg) = match compiled {
                Ok(g) => g,
                Err(e) => {
                    println!("{file}: refused: {e}");
                    refused = true;
                    break;
                }
            };
            let t1 = Instant::now();
            if let Some(g) = &g {
                rules = g.rules().len();
                presence = formwork_grammar::gbnf::print(g).contains("; present ");
            }
            let t1b = Instant::now(); // the grammar phase starts here (the print is neither)
            let cg = match (g, lg) {
                (Some(g), _) => CompiledGrammar::with_index(&g, index.clone(), &limits),
                (_, Some(lg)) => CompiledGrammar::lazy(lg, index.clone(), &limits),
                _ => unreachable!(),
            };
            let cg = match cg {
                Ok(c) => c,
                Err(e) => {
                    println!("{file}: refused: {e}");
                    refused = true;
                    break;
                }
            };
            let t2 = Instant::now();
            let mut m = cg.matcher();
            let mut mask = TokenMask::new(vocab.len());
            m.compute_mask(&mut mask);
            let t3 = Instant::now();
            if round == 0 {
                first = ((t1 - t0) + (t3 - t1b)).as_secs_f64() * 1e3;
                first_phases = ((t1 - t0).as_secs_f64() * 1e3, (t2 - t1b).as_secs_f64() * 1e3, (t3 - t2).as_secs_f64() * 1e3);
            }
            a = a.min((t1 - t0).as_secs_f64() * 1e3);
            b = b.min((t2 - t1b).as_secs_f64() * 1e3);
            c = c.min((t3 - t2).as_secs_f64() * 1e3);
        }
        if refused {
            continue;
        }
        let tag = if presence { "  (presence clauses)" } else { "" };
        println!("{:>8.2} ms schema  {:>8.2} ms grammar  {:>8.2} ms first mask  {first:>8.2} ms first round ({:.2} + {:.2} + {:.2})  {rules:>6} rules  {file}{tag}", a, b, c, first_phases.0, first_phases.1, first_phases.2);
    }
}
