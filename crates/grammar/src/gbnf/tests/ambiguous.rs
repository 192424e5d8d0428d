//! Random ambiguous grammars against the reference oracle: the same readings reached through
//! different rules (which the matcher keeps as one stack over a join of their parents; see
//! `matcher::automaton::join`), nested, with bounded and unbounded repetitions. For every
//! string of up to five symbols the matcher accepts exactly what the oracle accepts, and
//! along each accepted string every token's place in the mask agrees with a commit of it.

use super::oracle;
use crate::matcher::CompiledGrammar;
use crate::{gbnf, Limits};
use formwork_testkit::Rng;
use formwork_vocab::{TokenMask, Vocabulary};
use std::sync::Arc;

const SYMBOLS: &[u8] = b"ab()]";

/// A random grammar of five rules; rule `i` refers only to rules after it except through a
/// bracket, so no rule reaches itself without reading a byte (the oracle does not follow
/// such cycles, and the matcher refuses left recursion).
fn random_grammar(rng: &mut Rng) -> String {
    let n = 5;
    let mut out = String::new();
    for i in 0..n {
        let name = if i == 0 { "root".to_string() } else { format!("r{i}") };
        let alts: Vec<String> = (0..1 + rng.below(3))
            .map(|_| {
                let items: Vec<String> = (0..1 + rng.below(3))
                    .map(|_| {
                        let later = (i + 1..n).collect::<Vec<_>>();
                        match rng.below(9) {
                            0 => "\"a\"".into(),
                            1 => "\"b\"".into(),
                            2 => "[ab]*".into(),
                            3 => "[ab]{0,3}".into(),
                            // Recursion through a bracket: nesting, read two ways.
                            4 => format!("\"(\" r{} \")\"", 1 + rng.below(n as u64 - 1)),
                            5 => format!("\"(\" r{} \"]\"", 1 + rng.below(n as u64 - 1)),
                            6 | 7 if !later.is_empty() => format!("r{}", rng.pick(&later)),
                            _ if !later.is_empty() => format!("(\"a\" | r{})?", rng.pick(&later)),
                            _ => "\"a\"?".into(),
                        }
                    })
                    .collect();
                items.join(" ")
            })
            .collect();
        out.push_str(&format!("{name} ::= {}\n", alts.join(" | ")));
    }
    out
}

fn all_strings(max: usize) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut layer = vec![String::new()];
    for _ in 0..max {
        layer = layer.iter().flat_map(|s| SYMBOLS.iter().map(move |&c| format!("{s}{}", c as char))).collect();
        out.extend(layer.iter().cloned());
    }
    out
}

#[test]
fn random_ambiguous_grammars_agree_with_the_oracle() {
    let mut toks: Vec<String> = SYMBOLS.iter().map(|&c| (c as char).to_string()).collect();
    toks.extend(["ab", "ba", "((", "))", "a)", "b]", ")]", "])", "(a", "ab)", "(((", "aaaa"].map(String::from));
    let v = Arc::new(Vocabulary::from_strings(&toks, &["</s>"]));
    let strings = all_strings(5);
    let mut rng = Rng(0x005e_ed0f_a1b2);
    let (mut grammars, mut accepted) = (0, 0);
    for _ in 0..60 {
        let text = random_grammar(&mut rng);
        let g = gbnf::parse(&text, &Limits::default()).unwrap_or_else(|e| panic!("{text}: {e}"));
        let Ok(cg) = CompiledGrammar::new(&g, v.clone(), &Limits::default()) else { continue };
        grammars += 1;
        let mut mask = TokenMask::new(v.len());
        for s in &strings {
            let want = oracle::accepts(&g, s);
            let mut m = cg.matcher();
            let got = m.commit_bytes(s.as_bytes()).is_ok() && m.is_accepting();
            assert_eq!(got, want, "grammar:\n{text}input {s:?}");
            if !want {
                continue;
            }
            accepted += 1;
            // Masks along the accepted string agree with commits, token by token.
            let mut m = cg.matcher();
            for i in 0..=s.len() {
                m.compute_mask(&mut mask);
                for t in v.ids() {
                    let mut c = m.clone();
                    let ok = c.commit(t).is_ok();
                    assert_eq!(mask.contains(t), ok, "grammar:\n{text}token {:?} after {:?}", toks.get(t.0 as usize), &s[..i]);
                }
                if i < s.len() {
                    m.commit_bytes(&s.as_bytes()[i..=i]).unwrap();
                }
            }
        }
    }
    assert!(grammars >= 40, "only {grammars} of 60 random grammars compiled");
    assert!(accepted >= 500, "only {accepted} accepted strings: the grammars are too narrow to test much");
}
