//! Property test: for random strings a grammar accepts (random derivations of the IR),
//! every token of their tokenization is in the mask at its step and EOS is allowed at the
//! end — on the tiny vocabulary, a synthetic vocabulary of short multi-byte tokens, and
//! SmolLM2 with its real tokenizer. Also: masks agree with `commit`, and rollback restores
//! masks.

use formwork_grammar::json::{grammar as json_grammar, JsonGrammarOptions};
use formwork_grammar::{accepts, gbnf, CompiledGrammar, Expr, Grammar, Limits, TokenIndex};
use formwork_testkit::{greedy_tokenize, SharedTokenizer};
use formwork_vocab::{TokenId, TokenMask, Vocabulary};
use proptest::prelude::*;
use std::sync::{Arc, OnceLock};

// A small deterministic RNG (xorshift64*), seeded by proptest.
use formwork_testkit::Rng;

fn refs(e: &Expr) -> usize {
    match e {
        Expr::Rule(_) => 1,
        Expr::Seq(v) | Expr::Alt(v) => v.iter().map(refs).sum(),
        Expr::Repeat { expr, min, .. } => refs(expr) * (*min as usize).max(1),
        _ => 0,
    }
}

/// A random string derived from `e`; past `depth` 6, the derivation takes the branch with
/// the fewest rule references and the least repetition so it ends.
fn derive(g: &Grammar, e: &Expr, rng: &mut Rng, depth: usize, out: &mut String) {
    match e {
        Expr::Literal(s) => out.push_str(s),
        Expr::Class(r) => {
            let (a, b) = r[rng.below(r.len() as u64) as usize];
            // Prefer small code points so the tiny vocabularies cover them.
            let span = (b as u32 - a as u32).min(if rng.below(4) == 0 { 0x2000 } else { 0x60 });
            let mut c = a as u32 + rng.below(span as u64 + 1) as u32;
            while char::from_u32(c).is_none() {
                c += 1;
            }
            out.push(char::from_u32(c).unwrap());
        }
        Expr::Seq(v) => v.iter().for_each(|x| derive(g, x, rng, depth, out)),
        Expr::Alt(v) => {
            let x = if depth > 6 {
                v.iter().min_by_key(|x| refs(x)).unwrap()
            } else {
                &v[rng.below(v.len() as u64) as usize]
            };
            derive(g, x, rng, depth + 1, out)
        }
        Expr::Repeat { expr, min, max } => {
            let hi = max.unwrap_or(min + 4).min(min + 4);
            let n = if depth > 6 {
                *min
            } else {
                min + rng.below((hi - min + 1) as u64) as u32
            };
            for _ in 0..n {
                derive(g, expr, rng, depth + 1, out);
            }
        }
        Expr::Rule(r) => derive(g, &g.rule(*r).expr, rng, depth + 1, out),
        Expr::Token(_) | Expr::NotToken(_) => {}
        Expr::Unordered(_) => unreachable!("GBNF grammars have no unordered groups"),
    }
}

fn grammars() -> &'static Vec<Grammar> {
    static G: OnceLock<Vec<Grammar>> = OnceLock::new();
    G.get_or_init(|| {
        let l = Limits::default();
        vec![
            json_grammar(&JsonGrammarOptions::default()),
            json_grammar(&JsonGrammarOptions {
                root_object_only: false,
                max_ws_run: Some(2),
                ..Default::default()
            }),
            gbnf::parse(
                "root ::= item (\", \" item)*\nitem ::= [a-z]+ | \"<\" [0-9]{1,3} \">\" | \"é\"+",
                &l,
            )
            .unwrap(),
            gbnf::parse(
                "root ::= (\"ab\" | \"a\" | \"b\")* \"!\"? [^\\x00-\\x1F]{0,5}",
                &l,
            )
            .unwrap(),
        ]
    })
}

fn synthetic_vocab() -> Arc<Vocabulary> {
    static V: OnceLock<Arc<Vocabulary>> = OnceLock::new();
    V.get_or_init(|| {
        let alphabet: Vec<&str> = vec![
            "{", "}", "[", "]", "\"", ":", ",", " ", "\n", "a", "b", "e", "0", "1", "-", ".", "é",
            "\\", "<", ">", "!", "u", "t", "r", "f", "n", "l", "s", "x", "z",
        ];
        let mut toks: Vec<Vec<u8>> = Vec::new();
        for a in &alphabet {
            toks.push(a.as_bytes().to_vec());
            for b in &alphabet {
                toks.push([a.as_bytes(), b.as_bytes()].concat());
            }
        }
        for b in 0u8..=255 {
            toks.push(vec![b]);
        }
        for w in ["true", "false", "null", "\": \"", "\", \"", "\"}", "{\""] {
            toks.push(w.as_bytes().to_vec());
        }
        Arc::new(Vocabulary::from_strings(&toks, &["</s>"]))
    })
    .clone()
}

fn index_of(v: Arc<Vocabulary>) -> Arc<TokenIndex> {
    TokenIndex::for_vocab(&v)
}

fn check(cg: &Arc<CompiledGrammar>, toks: &[TokenId], text: &str) -> Result<(), TestCaseError> {
    let mut m = cg.matcher();
    let mut mask = TokenMask::new(cg.vocab().len());
    let mut masks = Vec::new();
    for &t in toks {
        m.compute_mask(&mut mask);
        prop_assert!(mask.contains(t), "token {} of {:?} not allowed", t, text);
        prop_assert!(m.is_allowed(t));
        masks.push(mask.clone());
        m.commit(t).unwrap();
    }
    m.compute_mask(&mut mask);
    prop_assert!(
        cg.vocab().eos_tokens().iter().all(|&e| mask.contains(e)),
        "EOS not allowed after {:?}",
        text
    );
    // Rolling back restores each earlier mask.
    if !toks.is_empty() {
        let k = toks.len() / 2;
        m.rollback(toks.len() - k).unwrap();
        m.compute_mask(&mut mask);
        prop_assert_eq!(&mask, &masks[k]);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn accepted_strings_pass_through_masks(seed in any::<u64>(), which in 0usize..4) {
        let g = &grammars()[which];
        let mut rng = Rng(seed | 1);
        let mut s = String::new();
        derive(g, &g.rule(g.root()).expr, &mut rng, 0, &mut s);
        prop_assert_eq!(accepts(g, s.as_bytes(), &Limits::default()), Ok(true), "derived {:?}", s);
        for v in [Arc::new(formwork_testkit::tiny_vocab()), synthetic_vocab()] {
            let Some(toks) = greedy_tokenize(&v, s.as_bytes()) else { continue };
            let cg = CompiledGrammar::with_index(g, index_of(v.clone()), &Limits::default()).unwrap();
            check(&cg, &toks, &s)?;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn accepted_strings_pass_through_smollm2_masks(seed in any::<u64>(), which in 0usize..4) {
        static CG: OnceLock<Vec<Arc<CompiledGrammar>>> = OnceLock::new();
        let cgs = CG.get_or_init(|| {
            let v = SharedTokenizer::Smollm2.vocab();
            let ix = TokenIndex::new(v);
            grammars().iter().map(|g| CompiledGrammar::with_index(g, ix.clone(), &Limits::default()).unwrap()).collect()
        });
        let g = &grammars()[which];
        let mut rng = Rng(seed | 1);
        let mut s = String::new();
        derive(g, &g.rule(g.root()).expr, &mut rng, 0, &mut s);
        prop_assume!(!s.bytes().any(|b| b < 0x20 && !b"\t\n\r".contains(&b)));
        let toks = SharedTokenizer::Smollm2.tokenize(&s);
        check(&cgs[which], &toks, &s)?;
    }
}
