//! `pattern` (ECMA-262) → grammar over JSON-encoded characters, through regex-syntax's HIR.
//!
//! ECMA-specific classes are rewritten first (`\d` is ASCII `[0-9]`, `\w` ASCII word
//! characters, `\s` the ECMA whitespace set, `.` excludes the four line terminators); then the
//! HIR is lowered: literals and classes to [`enc_class`], concatenation, alternation and
//! repetition to the same IR forms. Lookaheads right after a leading `^` are split off into
//! patterns of their own before this ([`split_lookaheads`]); other lookaround and
//! backreferences do not parse (refused);
//! word boundaries and anchors anywhere but the ends are refused. An unanchored side is
//! padded with "any characters". `minLength`/`maxLength` combine with a pattern when the
//! pattern's length range already lies inside them, or by tightening its one variable-length
//! single-character repetition. A pattern with an unanchored branch is then made
//! deterministic ([`dfa`]: same language, one rule per DFA state) when that is cheap, so the
//! matcher follows one stack instead of one per place the pattern might start.

use crate::compiler::{Compiler, CompileResult};
use crate::ecma::ecma_to_rust;
use crate::exprs::unsupported;
use crate::chars::{any_char, enc_class, rep};
use formwork_grammar::Expr;
use regex_syntax::hir::{Class, Hir, HirKind, Look};

mod dfa;


fn parse(src: &str) -> Result<Hir, String> {
    let rust = ecma_to_rust(src)?;
    regex_syntax::ParserBuilder::new().unicode(true).utf8(true).nest_limit(100).build().parse(&rust).map_err(|e| {
        let s = e.to_string();
        let last = s.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string();
        if src.contains("(?=") || src.contains("(?!") || src.contains("(?<=") || src.contains("(?<!") {
            "lookaround is not supported".to_string()
        } else {
            last
        }
    })
}

/// The ECMA-262 pattern that matches exactly the strings `names`: their alternation,
/// anchored at both ends, each with its syntax characters escaped (for excluding strings
/// in the product automaton of several patterns).
pub(crate) fn literal_alternation(names: &[String]) -> String {
    let mut out = String::from("^(?:");
    for (i, n) in names.iter().enumerate() {
        if i > 0 {
            out.push('|');
        }
        for c in n.chars() {
            if "\\^$.*+?()[]{}|/".contains(c) {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out.push_str(")$");
    out
}

/// A pattern that starts with lookaheads, `^(?=A)(?!B)C`, as the patterns a string must
/// match and those it must not: `^(?:A)` and `^C` it must match, `^(?:B)` not. With `^`
/// the pattern can only match at the start, where `(?=A)` asks that some prefix match `A`
/// (what the search for `^(?:A)` asks) and `(?!B)` that none match `B`; so the language
/// is the intersection of the first two and the complement of the third, which the
/// product automaton of several patterns computes exactly
/// (`string_body_all_but`). `None` when the pattern does not have that form: no leading
/// `^` and lookahead, an alternation at the top (the lookaheads would bind to its first
/// branch only), a lookahead or lookbehind anywhere else, or parentheses that do not
/// balance. Those stay refused as before.
pub(crate) fn split_lookaheads(src: &str) -> Option<(Vec<String>, Vec<String>)> {
    let rest = src.strip_prefix('^')?;
    let (mut musts, mut must_nots) = (vec![], vec![]);
    let mut rest = rest;
    while let Some(neg) = rest.strip_prefix("(?=").map(|_| false).or_else(|| rest.strip_prefix("(?!").map(|_| true)) {
        let close = group_end(rest)?;
        let body = &rest[3..close];
        (if neg { &mut must_nots } else { &mut musts }).push(format!("^(?:{body})"));
        rest = &rest[close + 1..];
    }
    if musts.is_empty() && must_nots.is_empty() {
        return None;
    }
    let main = format!("^{rest}");
    let parts = || musts.iter().chain(&must_nots).chain(std::iter::once(&main));
    if parts().any(|p| ["(?=", "(?!", "(?<=", "(?<!"].iter().any(|l| p.contains(l))) || top_level_alternation(src) {
        return None;
    }
    musts.push(main);
    Some((musts, must_nots))
}

/// The index of the `)` that closes the group opening at `s[0]`.
fn group_end(s: &str) -> Option<usize> {
    scan_groups(s, |i, c, depth| (c == b')' && depth == 0).then_some(i))
}

/// Whether `s` has a `|` outside every group and class.
fn top_level_alternation(s: &str) -> bool {
    scan_groups(s, |_, c, depth| (c == b'|' && depth == 0).then_some(())).is_some()
}

/// Calls `f(index, byte, depth)` for each `(`, `)` and `|` of `s` outside escapes and
/// character classes (where they are literal), with the group depth around it (a `)` is
/// outside the group it closes); the first `Some` it returns.
fn scan_groups<R>(s: &str, mut f: impl FnMut(usize, u8, i32) -> Option<R>) -> Option<R> {
    let b = s.as_bytes();
    let (mut depth, mut i, mut class) = (0i32, 0, false);
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'[' if !class => class = true,
            b']' if class => class = false,
            c @ (b'(' | b')' | b'|') if !class => {
                if c == b')' {
                    depth -= 1;
                }
                if let Some(r) = f(i, c, depth) {
                    return Some(r);
                }
                if c == b'(' {
                    depth += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Code-point length range.
fn clen(h: &Hir) -> (u64, Option<u64>) {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => (0, Some(0)),
        HirKind::Literal(l) => {
            let n = String::from_utf8_lossy(&l.0).chars().count() as u64;
            (n, Some(n))
        }
        HirKind::Class(_) => (1, Some(1)),
        HirKind::Repetition(r) => {
            let (a, b) = clen(&r.sub);
            let lo = a.saturating_mul(r.min as u64);
            let hi = match (b, r.max) {
                (Some(0), _) => Some(0),
                (Some(b), Some(m)) => Some(b.saturating_mul(m as u64)),
                _ => None,
            };
            (lo, hi)
        }
        HirKind::Capture(c) => clen(&c.sub),
        HirKind::Concat(v) => v.iter().fold((0, Some(0)), |(a, b), h| {
            let (x, y) = clen(h);
            (a.saturating_add(x), b.zip(y).map(|(b, y)| b.saturating_add(y)))
        }),
        HirKind::Alternation(v) => {
            let ls: Vec<_> = v.iter().map(clen).collect();
            let lo = ls.iter().map(|l| l.0).min().unwrap_or(0);
            let hi = ls.iter().try_fold(0u64, |acc, l| l.1.map(|x| acc.max(x)));
            (lo, hi)
        }
    }
}

fn is_start(h: &Hir) -> bool {
    matches!(h.kind(), HirKind::Look(Look::Start))
}
fn is_end(h: &Hir) -> bool {
    matches!(h.kind(), HirKind::Look(Look::End))
}

fn lower(cx: &Compiler, h: &Hir, kw: &str, at: &str) -> CompileResult<Expr> {
    Ok(match h.kind() {
        HirKind::Empty => Expr::empty(),
        HirKind::Literal(l) => {
            let s = String::from_utf8_lossy(&l.0);
            Expr::seq(s.chars().map(|c| enc_class(&[(c, c)])).collect::<Vec<_>>())
        }
        HirKind::Class(Class::Unicode(c)) => {
            let r: Vec<(char, char)> = c.iter().map(|r| (r.start(), r.end())).collect();
            enc_class(&r)
        }
        HirKind::Class(Class::Bytes(_)) => return Err(unsupported(kw, "byte classes are not supported", at)),
        HirKind::Look(l) => return Err(unsupported(kw, format!("the assertion {l:?} is only supported at the start or end of the pattern"), at)),
        HirKind::Repetition(r) => rep(cx, lower(cx, &r.sub, kw, at)?, r.min as u64, r.max.map(|m| m as u64))?,
        HirKind::Capture(c) => lower(cx, &c.sub, kw, at)?,
        HirKind::Concat(v) => Expr::seq(v.iter().map(|h| lower(cx, h, kw, at)).collect::<CompileResult<Vec<_>>>()?),
        HirKind::Alternation(v) => Expr::alt(v.iter().map(|h| lower(cx, h, kw, at)).collect::<CompileResult<Vec<_>>>()?),
    })
}

/// One top-level branch: anchoring and items.
struct Branch {
    start: bool,
    end: bool,
    items: Vec<Hir>,
}

fn branches(h: &Hir) -> Vec<Branch> {
    // A group around the whole pattern (`(^a$|^b$)`) is the pattern.
    let mut h = h;
    while let HirKind::Capture(c) = h.kind() {
        h = &c.sub;
    }
    let alts: Vec<Hir> = match h.kind() {
        HirKind::Alternation(v) => v.clone(),
        _ => vec![h.clone()],
    };
    alts.into_iter()
        .map(|a| {
            let mut items: Vec<Hir> = vec![a];
            let mut start = false;
            let mut end = false;
            // Groups and concatenations at either edge are opened (concatenation is
            // associative, and a group only captures), so anchors inside them reach the
            // edge: `^(\d{4}$)` is `^\d{4}$`.
            loop {
                if let Some(inner) = items.first().and_then(opened) {
                    items.splice(0..1, inner);
                    continue;
                }
                if let Some(inner) = items.last().and_then(opened) {
                    let n = items.len();
                    items.splice(n - 1..n, inner);
                    continue;
                }
                // An alternation at an edge whose alternatives all carry the anchor there
                // (`^(a$|bc$)`, and what regex-syntax makes of `^a$|^bc$` by factoring the
                // common `^` out): the anchor moves out of it.
                if let Some(stripped) = items.first().and_then(|h| strip_alternatives(h, true)) {
                    items[0] = stripped;
                    start = true;
                    continue;
                }
                if let Some(stripped) = items.last().and_then(|h| strip_alternatives(h, false)) {
                    let n = items.len();
                    items[n - 1] = stripped;
                    end = true;
                    continue;
                }
                if items.first().is_some_and(is_start) {
                    items.remove(0);
                    start = true;
                    continue;
                }
                if items.last().is_some_and(is_end) {
                    items.pop();
                    end = true;
                    continue;
                }
                break;
            }
            Branch { start, end, items }
        })
        .collect()
}

/// The items of a concatenation, or the inside of a group; `None` for anything else.
fn opened(h: &Hir) -> Option<Vec<Hir>> {
    match h.kind() {
        HirKind::Concat(v) => Some(v.clone()),
        HirKind::Capture(c) => Some(vec![(*c.sub).clone()]),
        _ => None,
    }
}

/// `h` without the anchor at its start (`at_start`) or end, when `h` is an alternation
/// every alternative of which has it there (through groups and concatenations).
fn strip_alternatives(h: &Hir, at_start: bool) -> Option<Hir> {
    let HirKind::Alternation(v) = h.kind() else { return None };
    v.iter().map(|a| strip_anchor(a, at_start)).collect::<Option<Vec<Hir>>>().map(Hir::alternation)
}

/// `h` without its leading `^` (or trailing `$`), looking through groups and
/// concatenations; `None` when it does not have one there.
fn strip_anchor(h: &Hir, at_start: bool) -> Option<Hir> {
    let is_anchor = |x: &Hir| if at_start { is_start(x) } else { is_end(x) };
    match h.kind() {
        _ if is_anchor(h) => Some(Hir::empty()),
        HirKind::Capture(c) => strip_anchor(&c.sub, at_start),
        HirKind::Concat(v) if !v.is_empty() => {
            let mut v = v.clone();
            let k = if at_start { 0 } else { v.len() - 1 };
            v[k] = strip_anchor(&v[k], at_start)?;
            Some(Hir::concat(v))
        }
        _ => None,
    }
}

/// The JSON string body (without quotes) for a pattern and length bounds.
pub(crate) fn string_body(cx: &mut Compiler, src: &str, min: u64, max: Option<u64>, at: &str, kw: &'static str) -> CompileResult<Expr> {
    let key = format!("string-body\u{0}{src}\u{0}{min}\u{0}{max:?}");
    cx.shared_leaf(&key, "pattern", |cx| string_body_uncached(cx, src, min, max, at, kw))
}

fn string_body_uncached(cx: &mut Compiler, src: &str, min: u64, max: Option<u64>, at: &str, kw: &'static str) -> CompileResult<Expr> {
    let (body, unanchored) = plain_body(cx, src, min, max, at, kw)?;
    // An unanchored side's "any characters" padding makes the matcher track every place the
    // pattern might start; the same language as a DFA is followed on one stack.
    if unanchored && !tests::dfa_off() {
        if let Some(d) = dfa::determinize(&body) {
            tracing::debug!(pattern = src, states = d.len(), "pattern lowered through a DFA");
            return Ok(dfa::emit(cx, &d, &format!("{src}\u{0}{min}\u{0}{max:?}")));
        }
    }
    Ok(body)
}

/// Most characters a length bound may count when it is intersected as an automaton of its
/// own (a state per character): beyond it the bounds go to the first pattern instead.
const MAX_INTERSECTED_LENGTH: u64 = 64;

/// The JSON string bodies that every one of `regs` (pattern or format sources, with their
/// pointers and keywords) matches, within `min..=max` characters: the product automaton of
/// their bodies, accepting where all accept. Small length bounds are one more automaton in
/// the product; larger ones bound the first pattern's own body. `None` when the product is
/// over the size bounds.
pub(crate) fn string_body_all(cx: &mut Compiler, regs: &[(String, String, &'static str)], min: u64, max: Option<u64>) -> CompileResult<Option<Expr>> {
    string_body_all_but(cx, regs, &[], min, max)
}

/// [`string_body_all`], and none of `negs` (patterns the string must not match) matches.
/// With no positive pattern, the strings within the bounds are the positive side.
pub(crate) fn string_body_all_but(cx: &mut Compiler, regs: &[(String, String, &'static str)], negs: &[(String, String, &'static str)], min: u64, max: Option<u64>) -> CompileResult<Option<Expr>> {
    let sources = |v: &[(String, String, &'static str)]| serde_json::to_string(&v.iter().map(|r| &r.0).collect::<Vec<_>>()).unwrap_or_default();
    let key = format!("all\u{0}{}\u{0}but\u{0}{}\u{0}{min}\u{0}{max:?}", sources(regs), sources(negs));
    cx.remembered(|cx| &mut cx.automaton_memo, key, |cx, key| string_body_all_but_uncached(cx, regs, negs, min, max, key))
}

fn string_body_all_but_uncached(cx: &mut Compiler, regs: &[(String, String, &'static str)], negs: &[(String, String, &'static str)], min: u64, max: Option<u64>, key: &str) -> CompileResult<Option<Expr>> {
    let mut bodies = Vec::new();
    let small = max.map_or(min <= MAX_INTERSECTED_LENGTH, |m| m <= MAX_INTERSECTED_LENGTH);
    for (k, (src, at, kw)) in regs.iter().enumerate() {
        let (lo, hi) = if k == 0 && !small { (min, max) } else { (0, None) };
        bodies.push(plain_body(cx, src, lo, hi, at, kw)?.0);
    }
    let bounded = min > 0 || max.is_some();
    if !negs.is_empty() {
        // The complement of a pattern is exact only among the encodings its grammar takes
        // (raw characters and the short escapes, `enc_class`): the positive side is held to
        // those too, so no other encoding of a forbidden string slips through.
        let (lo, hi) = if small || regs.is_empty() { (min, max) } else { (0, None) };
        bodies.push(rep(cx, enc_class(&[('\0', char::MAX)]), lo, hi)?);
    } else if small && bounded {
        bodies.push(rep(cx, any_char(), min, max)?);
    }
    let positive = (1u32 << bodies.len()) - 1;
    // A negative pattern must be exact: one formwork cannot lower is refused, and in lenient
    // mode left out (which widens; a widened negative body would narrow instead).
    for (src, at, kw) in negs {
        match try_plain_body(cx, src, 0, None, kw, at) {
            Ok((b, _)) => bodies.push(b),
            Err(why) => cx.refuse(kw, format!("the negation of {why}"), at.clone())?,
        }
    }
    let refs: Vec<&Expr> = bodies.iter().collect();
    let Some(d) = dfa::determinize_all(&refs, |m| m & positive == positive && m & !positive == 0, dfa::KEY_SUBSET_WORK) else { return Ok(None) };
    Ok(Some(dfa::emit(cx, &d, key)))
}

/// The JSON string bodies of a pattern (no length bounds) but those that decode to one of
/// `names` (in any encoding), as a DFA; `None` when that DFA is over the size bounds.
pub(crate) fn string_body_except(cx: &mut Compiler, src: &str, names: &[String], at: &str, kw: &'static str) -> CompileResult<Option<Expr>> {
    let key = format!("{src}\u{0}except\u{0}{}", serde_json::to_string(names).unwrap_or_default());
    cx.remembered(|cx| &mut cx.automaton_memo, key, |cx, key| string_body_except_uncached(cx, src, names, at, kw, key))
}

fn string_body_except_uncached(cx: &mut Compiler, src: &str, names: &[String], at: &str, kw: &'static str, key: &str) -> CompileResult<Option<Expr>> {
    let (body, _) = plain_body(cx, src, 0, None, at, kw)?;
    let Some(d) = dfa::determinize_minus(&body, &names_expr(names)) else { return Ok(None) };
    Ok(Some(dfa::emit(cx, &d, key)))
}

/// The JSON string bodies of pattern `src` that none of `others` (patterns) matches and that
/// decode to none of `names`, as a DFA; `None` when that DFA is over the size bounds.
pub(crate) fn string_body_only(cx: &mut Compiler, src: &str, others: &[String], names: &[String], at: &str, kw: &'static str) -> CompileResult<Option<Expr>> {
    let key = format!("{src}\u{0}only\u{0}{}\u{0}{}", serde_json::to_string(others).unwrap_or_default(), serde_json::to_string(names).unwrap_or_default());
    cx.remembered(|cx| &mut cx.automaton_memo, key, |cx, key| string_body_only_uncached(cx, src, others, names, at, kw, key))
}

fn string_body_only_uncached(cx: &mut Compiler, src: &str, others: &[String], names: &[String], at: &str, kw: &'static str, key: &str) -> CompileResult<Option<Expr>> {
    let (body, _) = plain_body(cx, src, 0, None, at, kw)?;
    let mut minus = Vec::new();
    for o in others {
        minus.push(plain_body(cx, o, 0, None, at, kw)?.0);
    }
    if !names.is_empty() {
        minus.push(names_expr(names));
    }
    if minus.is_empty() {
        return string_body_except(cx, src, names, at, kw);
    }
    let Some(d) = dfa::determinize_minus(&body, &crate::exprs::alt_of(minus)) else { return Ok(None) };
    Ok(Some(dfa::emit(cx, &d, key)))
}

/// Most patterns [`pattern_regions`] takes (it builds a DFA per non-empty subset).
pub(crate) const MAX_REGION_PATTERNS: usize = 4;

/// The key languages of `patternProperties` `pats` (at most [`MAX_REGION_PATTERNS`]): for each
/// non-empty set of them (bit `k` for `pats[k]`), the JSON string bodies that exactly those
/// patterns match and that decode to none of `names`, as DFA rules (empty regions left out).
/// With `rest`, also set 0: the keys no pattern matches and not in `names`, written with raw
/// characters and short escapes only (where a pattern's lowering accepts every encoding of
/// what it matches, so no key in another encoding of a pattern's match slips in).
/// `None` when a DFA is over the size bounds.
///
/// Memoized per schema by (`pats`, `names`, `rest`): the result does not depend on where the
/// object is. (A computation that recorded lenient-mode warnings is not memoized, so each
/// place still gets its own.)
pub(crate) fn pattern_regions(cx: &mut Compiler, pats: &[String], names: &[String], rest: bool, at: &str, kw: &'static str) -> CompileResult<Option<Vec<(u32, Expr)>>> {
    let key = format!("{}\u{0}{}\u{0}{rest}", serde_json::to_string(pats).unwrap_or_default(), serde_json::to_string(names).unwrap_or_default());
    cx.remembered(|cx| &mut cx.pattern_regions_memo, key, |cx, _| pattern_regions_uncached(cx, pats, names, rest, at, kw))
}

fn pattern_regions_uncached(cx: &mut Compiler, pats: &[String], names: &[String], rest: bool, at: &str, kw: &'static str) -> CompileResult<Option<Vec<(u32, Expr)>>> {
    debug_assert!(pats.len() <= MAX_REGION_PATTERNS);
    if let Some(literals) = pats.iter().map(|p| whole_literal(p)).collect::<Option<Vec<String>>>() {
        return literal_regions(cx, &literals, names, rest).map(Some);
    }
    if let [p] = pats {
        if matches_every_string(p) {
            // Every key matches (`.*`, `^[a-z]*`: a pattern that may match nothing, somewhere):
            // one region, the keys that are none of `names`, written as additional keys are
            // (raw characters and short escapes; see `chars::excluding`), as a complement trie
            // instead of a product automaton. No key is left for set 0.
            return Ok(Some(vec![(1, crate::chars::excluding(cx, names, "key")?)]));
        }
    }
    let mut exprs = Vec::new();
    for p in pats {
        exprs.push(plain_body(cx, p, 0, None, at, kw)?.0);
    }
    let all = (1u32 << pats.len()) - 1;
    // Bit `universe` (when `rest`): canonically encoded strings.
    let universe = 1u32 << exprs.len();
    exprs.push(Expr::star(enc_class(&[('\0', char::MAX)])));
    if !names.is_empty() {
        // A name that no pattern matches can fall only in set 0, the keys no pattern matches,
        // which are canonically written (the universe above): its canonical encodings are all
        // that set 0 must leave out. Every encoding of it (`\u` escapes, four hex digits each)
        // would multiply the product's states for nothing.
        let (matched, unmatched): (Vec<String>, Vec<String>) =
            names.iter().cloned().partition(|n| pats.iter().any(|p| cx.pattern_matches(p, n) != Some(false)));
        let canonical = unmatched.iter().map(|n| Expr::seq(n.chars().map(|c| enc_class(&[(c, c)])).collect::<Vec<_>>()));
        exprs.push(Expr::alt(matched.iter().map(|n| names_expr(std::slice::from_ref(n))).chain(canonical).collect::<Vec<_>>()));
    }
    let refs: Vec<&Expr> = exprs.iter().collect();
    // One product of all the expressions; each region only chooses its accepting states.
    let Some(product) = dfa::Product::new(&refs, dfa::KEY_SUBSET_WORK) else { return Ok(None) };
    let mut out = Vec::new();
    for set in if rest { 0 } else { 1 }..=all {
        let Some(d) = product.dfa(|m| m & !universe == set && (set != 0 || m & universe != 0)) else { return Ok(None) };
        if d.len() > 0 {
            let key = format!("{}\u{0}region {set}\u{0}{}", serde_json::to_string(pats).unwrap_or_default(), serde_json::to_string(names).unwrap_or_default());
            out.push((set, dfa::emit(cx, &d, &key)));
        }
    }
    Ok(Some(out))
}

/// The key regions of patterns that each match one whole string (`^billing_id$`, as
/// protobuf's JSON Schema generators write a field's names), without a DFA: distinct
/// literals never match the same key, so each literal is a region of its own (every encoding
/// of it, unless it is one of `names`), and the rest is every canonically written string
/// that is none of the literals and none of `names` ([`crate::chars::excluding`]). The same
/// languages as the DFA regions, at the cost of a trie.
fn literal_regions(cx: &mut Compiler, literals: &[String], names: &[String], rest: bool) -> CompileResult<Vec<(u32, Expr)>> {
    let mut out = Vec::new();
    if rest {
        let mut excluded: Vec<String> = names.to_vec();
        excluded.extend(literals.iter().cloned());
        out.push((0, crate::chars::excluding(cx, &excluded, "key")?));
    }
    for (k, lit) in literals.iter().enumerate() {
        if !names.contains(lit) {
            out.push((1u32 << k, names_expr(std::slice::from_ref(lit))));
        }
    }
    Ok(out)
}

/// Does the pattern match every string? True when one of its branches may match the empty
/// string and is unanchored on a side (it then matches there in any string).
fn matches_every_string(pattern: &str) -> bool {
    let Ok(h) = parse(pattern) else { return false };
    branches(&h).iter().any(|b| (!b.start || !b.end) && Hir::concat(b.items.clone()).properties().minimum_len() == Some(0))
}

/// The string a pattern matches when it matches exactly one: `^` and `$` around characters
/// that are not syntax in ECMA-262 (no escapes, classes, groups, alternations or quantifiers).
fn whole_literal(pattern: &str) -> Option<String> {
    let body = pattern.strip_prefix('^')?.strip_suffix('$')?;
    (!body.chars().any(|c| "\\.^$|?*+()[]{}/".contains(c) || c.is_control())).then(|| body.to_string())
}

/// Every encoding of every one of `names`.
fn names_expr(names: &[String]) -> Expr {
    Expr::alt(names.iter().map(|n| Expr::seq(n.chars().map(every_encoding).collect::<Vec<_>>())).collect::<Vec<_>>())
}

/// Every JSON encoding of `c` inside a string: raw or short escape ([`enc_class`]), and
/// `\uXXXX` (a surrogate pair beyond the BMP) with hex digits in either case.
fn every_encoding(c: char) -> Expr {
    let hex = |u: u32| {
        Expr::seq((0..4).rev().map(|i| {
            let d = std::char::from_digit((u >> (4 * i)) & 15, 16).unwrap_or('0');
            Expr::Class(formwork_grammar::ir::normalize_ranges(vec![(d, d), (d.to_ascii_uppercase(), d.to_ascii_uppercase())]))
        }).collect::<Vec<_>>())
    };
    let mut units = [0u16; 2];
    let esc = Expr::seq(c.encode_utf16(&mut units).iter().map(|&u| Expr::seq([Expr::lit("\\u"), hex(u as u32)])).collect::<Vec<_>>());
    Expr::alt([enc_class(&[(c, c)]), esc])
}

/// The body of [`string_body`] before the DFA, and whether a branch is unanchored.
fn plain_body(cx: &mut Compiler, src: &str, min: u64, max: Option<u64>, at: &str, kw: &'static str) -> CompileResult<(Expr, bool)> {
    match try_plain_body(cx, src, min, max, kw, at) {
        Ok(r) => Ok(r),
        Err(why) => {
            cx.refuse(kw, why, at.to_string())?;
            Ok((rep(cx, any_char(), min, max)?, false))
        }
    }
}

/// Does no string match both a pattern of `a` and one of `b`? Exact where it says `true`:
/// the intersection of the patterns' languages (their string bodies, which accept every
/// encoding of what they match), within the key automata's work bound. `false` when a
/// pattern has no translation here or the product is too big (not proven).
pub(crate) fn patterns_disjoint(cx: &mut Compiler, a: &[String], b: &[String]) -> bool {
    let mut side = |pats: &[String]| -> Option<Expr> {
        let mut alts = Vec::with_capacity(pats.len());
        for p in pats {
            alts.push(strict_body(cx, p)?);
        }
        Some(Expr::alt(alts))
    };
    let (Some(x), Some(y)) = (side(a), side(b)) else { return false };
    dfa::determinize_all(&[&x, &y], |m| m & 3 == 3, dfa::KEY_SUBSET_WORK).is_some_and(|d| d.len() == 0)
}

/// [`plain_body`] of a pattern (refusals ignored), for tests of the automata.
#[cfg(test)]
pub(crate) fn plain_body_for_tests(cx: &mut Compiler, src: &str) -> (Expr, bool) {
    plain_body(cx, src, 0, None, "", "pattern").expect("a pattern formwork lowers")
}

/// [`plain_body`] without refusing: `Err` is the reason a refusal would give.
fn try_plain_body(cx: &mut Compiler, src: &str, min: u64, max: Option<u64>, kw: &str, at: &str) -> Result<(Expr, bool), String> {
    let hir = parse(src).map_err(|why| format!("pattern {src:?}: {why}"))?;
    let mut alts = Vec::new();
    let bs = branches(&hir);
    let unanchored = bs.iter().any(|b| !(b.start && b.end));
    for b in bs {
        match branch_body(cx, &b, min, max, kw, at) {
            Ok(e) => alts.push(e),
            Err(e) => {
                return Err(format!("pattern {src:?}: {}", match &e.kind {
                    crate::SchemaErrorKind::Unsupported { why, .. } => why.clone(),
                    k => format!("{k:?}"),
                }));
            }
        }
    }
    Ok((crate::exprs::alt_of(alts), unanchored))
}

/// Does pattern `src`, alone on a string (no format, no length bounds), compile without a
/// refusal, to a language that is not empty? For the scan of deferrable locations
/// (`compiler::defer`), which must know up front.
pub(crate) fn supported_alone(cx: &mut Compiler, src: &str) -> bool {
    let matches_something = parse(src).is_ok_and(|h| h.properties().minimum_len().is_some());
    matches_something && strict_body(cx, src).is_some()
}

/// The string body of pattern `src` alone (no length bounds) as strict mode lowers it, with
/// no refusal and no lenient warning recorded: `None` where strict mode would refuse it.
fn strict_body(cx: &mut Compiler, src: &str) -> Option<Expr> {
    let lenient = std::mem::replace(&mut cx.opts.to_mut().lenient, false);
    let body = try_plain_body(cx, src, 0, None, "pattern", "").ok().map(|(e, _)| e);
    cx.opts.to_mut().lenient = lenient;
    body
}

/// Whether pattern `src` alone, without length bounds, has a grammar (so that its
/// intersection with small bounds can be tried when the bounds in its own grammar cannot).
pub(crate) fn bounds_need_product(cx: &mut Compiler, src: &str, min: u64, max: Option<u64>, kw: &str, at: &str) -> bool {
    let small = max.map_or(min <= MAX_INTERSECTED_LENGTH, |m| m <= MAX_INTERSECTED_LENGTH);
    small && (min > 0 || max.is_some()) && try_plain_body(cx, src, min, max, kw, at).is_err() && try_plain_body(cx, src, 0, None, kw, at).is_ok()
}

fn branch_body(cx: &mut Compiler, b: &Branch, min: u64, max: Option<u64>, kw: &str, at: &str) -> CompileResult<Expr> {
    let core: Vec<Expr> = b.items.iter().map(|h| lower(cx, h, kw, at)).collect::<CompileResult<_>>()?;
    let lens: Vec<(u64, Option<u64>)> = b.items.iter().map(clen).collect();
    let (lo, hi) = lens.iter().fold((0u64, Some(0u64)), |(a, b), &(x, y)| (a + x, b.zip(y).map(|(b, y)| b + y)));
    let pad = Expr::star(any_char());
    let no_len = min == 0 && max.is_none();
    let within = lo >= min && match (hi, max) {
        (_, None) => true,
        (Some(h), Some(m)) => h <= m,
        (None, Some(_)) => false,
    };
    if b.start && b.end && (no_len || within) {
        return Ok(Expr::seq(core));
    }
    if no_len {
        let mut v = Vec::new();
        if !b.start {
            v.push(pad.clone());
        }
        v.extend(core);
        if !b.end {
            v.push(pad);
        }
        return Ok(Expr::seq(v));
    }
    // Length bounds with a pattern.
    if hi == Some(lo) {
        // Fixed-length core: pad sides to reach the bounds.
        let f = lo;
        let lo_pad = min.saturating_sub(f);
        let hi_pad = max.map(|m| m.checked_sub(f));
        if let Some(None) = hi_pad {
            return Ok(crate::exprs::nothing());
        }
        let hi_pad = hi_pad.flatten();
        let body = Expr::seq(core);
        return match (b.start, b.end) {
            (true, true) => Ok(body),
            (true, false) => Ok(Expr::seq([body, rep(cx, any_char(), lo_pad, hi_pad)?])),
            (false, true) => Ok(Expr::seq([rep(cx, any_char(), lo_pad, hi_pad)?, body])),
            (false, false) => {
                let Some(h) = hi_pad.filter(|&h| h <= 64) else {
                    return Err(unsupported(kw, "an unanchored pattern with minLength/maxLength", at));
                };
                let mut alts = Vec::new();
                for a in 0..=h {
                    let rest_lo = lo_pad.saturating_sub(a);
                    alts.push(Expr::seq([rep(cx, any_char(), a, Some(a))?, body.clone(), rep(cx, any_char(), rest_lo, Some(h - a))?]));
                }
                Ok(Expr::alt(alts))
            }
        };
    }
    if !(b.start && b.end) {
        return Err(unsupported(kw, "a partly anchored variable-length pattern with minLength/maxLength", at));
    }
    // One variable single-character repetition: tighten it.
    let var: Vec<usize> = (0..lens.len()).filter(|&i| lens[i].1 != Some(lens[i].0)).collect();
    if var.len() == 1 {
        let i = var[0];
        if let HirKind::Repetition(r) = b.items[i].kind() {
            if clen(&r.sub) == (1, Some(1)) {
                let fixed: u64 = lens.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, l)| l.0).sum();
                let new_lo = (r.min as u64).max(min.saturating_sub(fixed));
                let new_hi = match (r.max, max) {
                    (Some(a), Some(m)) => Some((a as u64).min(m.saturating_sub(fixed))),
                    (Some(a), None) => Some(a as u64),
                    (None, Some(m)) => Some(m.saturating_sub(fixed)),
                    (None, None) => None,
                };
                if max.is_some_and(|m| m < fixed) || new_hi.is_some_and(|h| h < new_lo) {
                    return Ok(crate::exprs::nothing());
                }
                let sub = lower(cx, &r.sub, kw, at)?;
                let mut v = core;
                v[i] = rep(cx, sub, new_lo, new_hi)?;
                return Ok(Expr::seq(v));
            }
        }
    }
    Err(unsupported(kw, "this pattern combined with minLength/maxLength (formwork can intersect them only when the pattern has one variable single-character repetition)", at))
}

#[cfg(not(test))]
mod tests {
    /// The DFA lowering is always on outside tests.
    pub(super) fn dfa_off() -> bool {
        false
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    thread_local! {
        /// Tests compare the DFA lowering with the plain one by turning it off.
        pub(crate) static NO_DFA: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    pub(super) fn dfa_off() -> bool {
        NO_DFA.with(|c| c.get())
    }

    #[test]
    fn lookaround_does_not_parse() {
        assert!(parse("(?=a)b").is_err());
    }

    #[test]
    fn leading_lookaheads_split_into_patterns() {
        let split = |s: &str| split_lookaheads(s);
        assert_eq!(
            split(r"^(?=[^=]+$)(?!\s+$)(.|\n)+$"),
            Some((vec![r"^(?:[^=]+$)".to_string(), r"^(.|\n)+$".to_string()], vec![r"^(?:\s+$)".to_string()]))
        );
        // Parentheses inside classes and escaped ones do not close the group.
        assert_eq!(
            split(r"^(?![ \t\n]*\(default(.*)\))[\s\S]*"),
            Some((vec![r"^[\s\S]*".to_string()], vec![r"^(?:[ \t\n]*\(default(.*)\))".to_string()]))
        );
        assert_eq!(split(r"^(?=[)(])x"), Some((vec![r"^(?:[)(])".to_string(), "^x".to_string()], vec![])));
        // Not that form: no anchor, no lookahead, an alternation at the top, lookarounds
        // elsewhere, unbalanced.
        for s in [r"(?=a)b", r"^ab", r"^(?=a)b|c", r"^(?!a)b(?=c)", r"^(?<!a)b", r"^(?=a(?!b))c", r"^(?=a"] {
            assert_eq!(split(s), None, "{s}");
        }
    }

    #[test]
    fn lengths_in_code_points() {
        let h = parse("^a[bc]{2,3}é$").unwrap();
        assert_eq!(clen(&h), (4, Some(5)));
    }
}
