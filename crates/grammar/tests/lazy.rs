//! Grammars with deferred rules ([`LazyGrammar`]) against the same grammar built up front:
//! the same masks at every step of many random walks, the same shortest completions, and a
//! deferred rule that cannot be built matches nothing.

use formwork_grammar::{CompiledGrammar, Expansion, Expr, Grammar, GrammarBuilder, LazyGrammar, Limits, Rule, RuleId, RuleSource, TokenIndex, Unordered};
use formwork_vocab::{TokenId, TokenMask, Vocabulary};
use std::sync::Arc;

/// A JSON-like grammar whose rules are declared in this order: root, ws, value, obj, arr,
/// str, num (the base), then a helper of `obj` and `pair` (made by expanding `obj`).
fn whole() -> Grammar {
    let mut b = GrammarBuilder::new();
    for n in ["root", "ws", "value", "obj", "arr", "str", "num", "obj-b", "pair"] {
        b.rule_id(n);
    }
    let r = |b: &mut GrammarBuilder, n: &str| Expr::Rule(b.rule_id(n));
    let (ws, value, obj, arr, st, num, objb, pair) =
        (r(&mut b, "ws"), r(&mut b, "value"), r(&mut b, "obj"), r(&mut b, "arr"), r(&mut b, "str"), r(&mut b, "num"), r(&mut b, "obj-b"), r(&mut b, "pair"));
    b.define("root", Expr::seq([ws.clone(), value.clone(), ws.clone()]));
    b.define("ws", Expr::repeat(Expr::class([(' ', ' '), ('\n', '\n')], false), 0, Some(3)));
    b.define("value", Expr::alt([obj, arr.clone(), st.clone(), num]));
    let member = |k: &str, v: Expr| Expr::seq([Expr::lit(format!("\"{k}\"")), ws.clone(), Expr::lit(":"), ws.clone(), v]);
    b.define(
        "obj",
        Expr::seq([
            Expr::lit("{"),
            ws.clone(),
            Expr::Unordered(Box::new(Unordered {
                members: vec![(member("a", value.clone()), true), (member("b", objb), false), (member("c", pair), false)],
                extra: None,
                sep: Expr::seq([ws.clone(), Expr::lit(","), ws.clone()]),
                min: 0,
                max: None,
                presence: Vec::new(),
            })),
            ws.clone(),
            Expr::lit("}"),
        ]),
    );
    let items = Expr::seq([value.clone(), Expr::repeat(Expr::seq([ws.clone(), Expr::lit(","), ws.clone(), value.clone()]), 0, Some(5))]);
    b.define("arr", Expr::seq([Expr::lit("["), ws.clone(), Expr::opt(items), ws.clone(), Expr::lit("]")]));
    b.define("str", Expr::seq([Expr::lit("\""), Expr::repeat(Expr::class([('a', 'z'), ('é', 'é')], false), 0, Some(8)), Expr::lit("\"")]));
    b.define("num", Expr::plus(Expr::class([('0', '9')], false)));
    b.define("obj-b", Expr::alt([st, Expr::lit("true")]));
    b.define("pair", Expr::seq([Expr::lit("("), value, Expr::lit(" "), arr, Expr::lit(")")]));
    b.build("root").unwrap()
}

const OBJ: u32 = 3;
const ARR: u32 = 4;
const OBJ_B: u32 = 7;
const PAIR: u32 = 8;

/// Hands out the rules of [`whole`] as a schema compiler would: `obj` with its helper and
/// a new deferred `pair`; `arr` and `pair` alone. `broken` rules fail.
struct Source {
    g: Grammar,
    broken: Vec<u32>,
    asked: Arc<std::sync::Mutex<Vec<u32>>>,
}

impl RuleSource for Source {
    fn expand(&mut self, rule: RuleId) -> Result<Expansion, String> {
        self.asked.lock().unwrap().push(rule.0);
        if self.broken.contains(&rule.0) {
            return Err("broken on purpose".into());
        }
        let one = |id: u32| (RuleId(id), self.g.rule(RuleId(id)).clone());
        Ok(match rule.0 {
            OBJ => Expansion { rules: vec![one(OBJ), one(OBJ_B)], deferred: vec![(RuleId(PAIR), "pair".into())] },
            ARR | PAIR => Expansion { rules: vec![one(rule.0)], deferred: Vec::new() },
            r => panic!("rule #{r} was never deferred"),
        })
    }
}

/// The base grammar: rules 0..7 of [`whole`], `obj` and `arr` deferred.
fn lazy(broken: Vec<u32>) -> (LazyGrammar, Arc<std::sync::Mutex<Vec<u32>>>) {
    let g = whole();
    let mut b = GrammarBuilder::new();
    for r in &g.rules()[..7] {
        b.rule_id(&r.name);
    }
    for (i, r) in g.rules()[..7].iter().enumerate() {
        let body = if i as u32 == OBJ || i as u32 == ARR { Expr::empty() } else { r.expr.clone() };
        b.define(&r.name, body);
    }
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let base = b.build("root").unwrap();
    let source = Source { g, broken, asked: asked.clone() };
    (LazyGrammar { grammar: base, deferred: vec![RuleId(OBJ), RuleId(ARR)], source: Box::new(source) }, asked)
}

fn vocab() -> Arc<Vocabulary> {
    let mut words: Vec<String> = "{}[]():, \n\"abcxyz0123456789é".chars().map(String::from).collect();
    for w in ["{\"", "\"a\"", "\"b\":", "\"c\": ", ", \"", "true", "[(", ") ", "\"}", "12", "ab\"", "}]", "] ", "( [", "\"\"", "é\""] {
        words.push(w.into());
    }
    let refs: Vec<&str> = words.iter().map(|s| s.as_str()).collect();
    Arc::new(Vocabulary::from_strings(&refs, &["</s>"]))
}

struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

#[test]
fn a_lazy_grammar_gives_the_masks_of_the_whole_grammar() {
    let vocab = vocab();
    let index = TokenIndex::for_vocab(&vocab);
    let limits = Limits::default();
    let eager = CompiledGrammar::with_index(&whole(), index.clone(), &limits).unwrap();
    let (lg, asked) = lazy(Vec::new());
    let lazy = CompiledGrammar::lazy(lg, index, &limits).unwrap();
    let mut rng = Lcg(7);
    let (mut a, mut b) = (TokenMask::new(vocab.len()), TokenMask::new(vocab.len()));
    let mut steps = 0;
    for walk in 0..300 {
        let (mut me, mut ml) = (eager.matcher(), lazy.matcher());
        let mut text: Vec<u8> = Vec::new();
        for _ in 0..40 {
            me.compute_mask(&mut a);
            ml.compute_mask(&mut b);
            let (x, y): (Vec<u32>, Vec<u32>) = (a.iter_ones().map(|t| t.0).collect(), b.iter_ones().map(|t| t.0).collect());
            assert_eq!(x, y, "walk {walk}: masks differ after {:?}", String::from_utf8_lossy(&text));
            assert_eq!(me.shortest_completion(), ml.shortest_completion());
            assert_eq!(me.min_completion_len(), ml.min_completion_len());
            for t in [0u32, 5, 12, 20, 25, 30, 40] {
                assert_eq!(me.min_completion_len_after(TokenId(t)), ml.min_completion_len_after(TokenId(t)), "after token {t}");
            }
            let choices: Vec<u32> = x.into_iter().filter(|&t| vocab.is_text(TokenId(t))).collect();
            if choices.is_empty() {
                break;
            }
            let t = TokenId(choices[rng.next(choices.len())]);
            text.extend_from_slice(vocab.token_bytes(t));
            me.commit(t).unwrap();
            ml.commit(t).unwrap();
            assert_eq!(me.is_accepting(), ml.is_accepting());
            steps += 1;
        }
    }
    assert!(steps > 3000, "the walks were too short to say much: {steps} steps");
    let asked = asked.lock().unwrap();
    // Each deferred rule is built once, `pair` only after `obj` declared it.
    let mut sorted = asked.clone();
    sorted.sort();
    assert_eq!(sorted, vec![OBJ, ARR, PAIR]);
}

#[test]
fn nothing_is_built_before_it_is_reached() {
    let vocab = vocab();
    let index = TokenIndex::for_vocab(&vocab);
    let (lg, asked) = lazy(Vec::new());
    let cg = CompiledGrammar::lazy(lg, index, &Limits::default()).unwrap();
    let mut m = cg.matcher();
    let mut mask = TokenMask::new(vocab.len());
    // The first state reaches `value`'s alternatives, `obj` and `arr` among them.
    m.compute_mask(&mut mask);
    let mut first = asked.lock().unwrap().clone();
    first.sort();
    assert_eq!(first, vec![OBJ, ARR]);
    m.commit_bytes(b"12").unwrap();
    m.compute_mask(&mut mask);
    assert_eq!(asked.lock().unwrap().len(), 2, "a number reaches no other deferred rule");
    m.commit_bytes(b"3").unwrap();
    assert!(m.is_accepting());
}

#[test]
fn completions_build_only_the_deferred_rules_they_need() {
    let vocab = vocab();
    let (lg, asked) = lazy(Vec::new());
    let cg = CompiledGrammar::lazy(lg, TokenIndex::for_vocab(&vocab), &Limits::default()).unwrap();
    let mut m = cg.matcher();
    m.commit_bytes(b"{\"a\":1").unwrap();
    // `pair` (member `c`) is optional: the shortest way out skips it, unbuilt.
    assert_eq!(m.shortest_completion().as_deref(), Some(&b"}"[..]));
    let mut built = asked.lock().unwrap().clone();
    built.sort();
    assert_eq!(built, vec![OBJ, ARR]);
    // Reaching `pair` builds it (the random walks check the tables after such steps).
    m.commit_bytes(b",\"c\":(").unwrap();
    assert_eq!(asked.lock().unwrap().len(), 3);
}

#[test]
fn a_completion_builds_the_deferred_rules_it_requires() {
    // `root ::= "<" need ">"`, `need` deferred: the first completion must build it to know
    // its length, and must not build `spare`, which only an optional part reaches.
    struct Two {
        need: RuleId,
        spare: RuleId,
        asked: Arc<std::sync::Mutex<Vec<RuleId>>>,
    }
    impl RuleSource for Two {
        fn expand(&mut self, rule: RuleId) -> Result<Expansion, String> {
            self.asked.lock().unwrap().push(rule);
            let body = if rule == self.need {
                Expr::seq([Expr::lit("[n"), Expr::opt(Expr::Rule(self.spare)), Expr::lit("]")])
            } else {
                Expr::seq([Expr::lit("{spare"), Expr::star(Expr::lit("x")), Expr::lit("}")])
            };
            Ok(Expansion { rules: vec![(rule, Rule { name: format!("r{}", rule.0), expr: body })], deferred: Vec::new() })
        }
    }
    let mut b = GrammarBuilder::new();
    let (need, spare) = (b.rule_id("need"), b.rule_id("spare"));
    b.define("root", Expr::seq([Expr::lit("<"), Expr::Rule(need), Expr::lit(">")]));
    b.define("need", Expr::empty());
    b.define("spare", Expr::empty());
    let grammar = b.build("root").unwrap();
    let vocab = vocab();
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let lg = LazyGrammar { grammar, deferred: vec![need, spare], source: Box::new(Two { need, spare, asked: asked.clone() }) };
    let cg = CompiledGrammar::lazy(lg, TokenIndex::for_vocab(&vocab), &Limits::default()).unwrap();
    let m = cg.matcher();
    assert!(asked.lock().unwrap().is_empty(), "the first state is `<` alone");
    assert_eq!(m.min_completion_len(), Some(5));
    assert_eq!(m.shortest_completion().as_deref(), Some(&b"<[n]>"[..]));
    assert_eq!(*asked.lock().unwrap(), vec![need], "`spare` is optional: never built");
}

#[test]
fn a_deferred_rule_that_fails_to_build_matches_nothing() {
    let vocab = vocab();
    let index = TokenIndex::for_vocab(&vocab);
    let (lg, _) = lazy(vec![ARR]);
    let cg = CompiledGrammar::lazy(lg, index, &Limits::default()).unwrap();
    let mut m = cg.matcher();
    let mut mask = TokenMask::new(vocab.len());
    m.compute_mask(&mut mask);
    let allowed: Vec<String> = mask.iter_ones().map(|t| vocab.token_text(t)).collect();
    let allowed: Vec<&str> = allowed.iter().map(|s| s.as_str()).collect();
    assert!(!allowed.contains(&"["), "`[` starts only the broken rule: {allowed:?}");
    assert!(allowed.contains(&"{") && allowed.contains(&"1"), "{allowed:?}");
    // `obj` still works; `pair` needs `arr`, so it matches nothing either.
    m.commit_bytes(b"{\"a\":1}").unwrap();
    assert!(m.is_accepting());
    let mut m = cg.matcher();
    m.commit_bytes(b"{\"c\":(1").unwrap();
    assert!(m.commit_bytes(b" [").is_err());
}

#[test]
fn a_deferred_rule_that_starts_with_the_grammar_around_it_is_refused() {
    // `arr` made to start with `value`: `value -> arr -> value` at the left edge, a cycle
    // through the seam that the part's own check cannot see.
    struct Bad;
    impl RuleSource for Bad {
        fn expand(&mut self, rule: RuleId) -> Result<Expansion, String> {
            let body = Expr::seq([Expr::Rule(RuleId(2)), Expr::lit("!")]);
            Ok(Expansion { rules: vec![(rule, Rule { name: "arr".into(), expr: body })], deferred: Vec::new() })
        }
    }
    let (mut lg, _) = lazy(Vec::new());
    lg.source = Box::new(Bad);
    let vocab = vocab();
    let cg = CompiledGrammar::lazy(lg, TokenIndex::for_vocab(&vocab), &Limits::default()).unwrap();
    let mut m = cg.matcher();
    let mut mask = TokenMask::new(vocab.len());
    m.compute_mask(&mut mask);
    assert!(m.commit_bytes(b"1!").is_err(), "the refused rule matched");
    let mut m = cg.matcher();
    m.commit_bytes(b"1").unwrap();
    assert!(m.is_accepting());
}

#[test]
fn a_deferred_rule_is_bounded_as_the_whole_grammar_would_be_not_by_the_families_built_so_far() {
    // `root ::= {unordered k0..k11} "=" need`, `need` deferred. An unordered group's family
    // rules are built as inputs reach them, beyond what `Limits::max_rules` bounds in the
    // lowering; they must not count against the deferred part, or a long object would make
    // every later deferred rule match nothing (a valid output rejected halfway).
    struct Need;
    impl RuleSource for Need {
        fn expand(&mut self, rule: RuleId) -> Result<Expansion, String> {
            Ok(Expansion { rules: vec![(rule, Rule { name: "need".into(), expr: Expr::lit("[n]") })], deferred: Vec::new() })
        }
    }
    let lazy = |limits: &Limits| {
        let mut b = GrammarBuilder::new();
        let need = b.rule_id("need");
        let members: Vec<(Expr, bool)> = (0..12).map(|i| (Expr::lit(format!("k{i}:1")), false)).collect();
        let group = Expr::Unordered(Box::new(Unordered { members, extra: None, sep: Expr::lit(","), min: 0, max: None, presence: Vec::new() }));
        b.define("root", Expr::seq([Expr::lit("{"), group, Expr::lit("}="), Expr::Rule(need)]));
        b.define("need", Expr::empty());
        let grammar = b.build("root").unwrap();
        let lg = LazyGrammar { grammar, deferred: vec![need], source: Box::new(Need) };
        CompiledGrammar::lazy(lg, TokenIndex::for_vocab(&vocab()), limits)
    };
    // The smallest rule limit the base grammar lowers under, and a little room for the part.
    let fits = (1..10_000).find(|&n| lazy(&Limits { max_rules: n, ..Limits::default() }).is_ok()).expect("the base grammar lowers");
    let cg = lazy(&Limits { max_rules: fits + 4, ..Limits::default() }).unwrap();
    let mut m = cg.matcher();
    let members: Vec<String> = (0..12).rev().map(|i| format!("k{i}:1")).collect();
    m.commit_bytes(format!("{{{}}}=", members.join(",")).as_bytes()).unwrap();
    m.commit_bytes(b"[n]").expect("the deferred rule is built after the group's families");
    assert!(m.is_accepting());
}
