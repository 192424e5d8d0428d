//! Strings: JSON encodings of character sets, lengths, patterns, formats, excluded values.
//!
//! The schema constrains *decoded* strings; the grammar generates their JSON encoding. A set of
//! code points becomes [`enc_class`]: the raw characters that JSON allows unescaped, plus the
//! escape sequences of the members that need one (`\"`, `\\`, `\n`..., `\u00XX` for other
//! controls) and `\/` for `/`. Every accepted encoding decodes to a member, so constraints on
//! decoded strings carry over exactly; `\u` escapes of printable characters are only accepted
//! where the string is otherwise unconstrained (a documented subset elsewhere).

use crate::chars::{any_chars, excluding};
use crate::compiler::{Compiler, CompileResult};
use crate::conjunct::Conjunct;
use crate::exprs::{invalid, nothing, seq_of};
use crate::json_types::as_count;
use crate::format::Treatment;
use formwork_grammar::Expr;
use serde_json::Value;

struct StrKw {
    min: u64,
    max: Option<u64>,
    patterns: Vec<(String, String)>,
    formats: Vec<(String, String)>,
    /// Patterns the string must not match, with the keyword they come from: a negated
    /// `pattern` or `format` (`x-formwork-not-pattern`, which only negations write), or a
    /// pattern's negative lookahead (see [`crate::regex::split_lookaheads`]).
    not_patterns: Vec<(String, String, &'static str)>,
}

fn collect(cx: &mut Compiler, parts: &[Conjunct]) -> CompileResult<StrKw> {
    let mut k = StrKw { min: 0, max: None, patterns: Vec::new(), formats: Vec::new(), not_patterns: Vec::new() };
    for p in parts {
        if let Some(v) = p.get("minLength") {
            let n = as_count(v).ok_or_else(|| invalid("minLength", "must be a non-negative integer", p.kw_ptr("minLength")))?;
            k.min = k.min.max(n);
        }
        if let Some(v) = p.get("maxLength") {
            let n = as_count(v).ok_or_else(|| invalid("maxLength", "must be a non-negative integer", p.kw_ptr("maxLength")))?;
            k.max = Some(k.max.map_or(n, |m| m.min(n)));
        }
        if let Some(v) = p.get("pattern") {
            let s = v.as_str().ok_or_else(|| invalid("pattern", "must be a string", p.kw_ptr("pattern")))?;
            // Leading lookaheads become patterns of their own, to match or not to match.
            let (musts, must_nots) = crate::regex::split_lookaheads(s).unwrap_or_else(|| (vec![s.to_string()], vec![]));
            for s in musts {
                if !k.patterns.iter().any(|(q, _)| *q == s) {
                    k.patterns.push((s, p.kw_ptr("pattern")));
                }
            }
            for s in must_nots {
                if !k.not_patterns.iter().any(|(q, _, _)| *q == s) {
                    k.not_patterns.push((s, p.kw_ptr("pattern"), "pattern"));
                }
            }
        }
        if let Some(Value::Array(v)) = p.get("x-formwork-not-pattern") {
            for s in v.iter().filter_map(Value::as_str) {
                if !k.not_patterns.iter().any(|(q, _, _)| q == s) {
                    k.not_patterns.push((s.to_string(), p.at.clone(), "not"));
                }
            }
        }
        if let Some(v) = p.get("format") {
            if let Some(s) = v.as_str() {
                match crate::format::treatment(s, &cx.opts) {
                    Treatment::Annotation(why) => cx.warnings.push(crate::Warning { keyword: "format".into(), pointer: p.kw_ptr("format"), why }),
                    Treatment::Asserted => {
                        if !k.formats.iter().any(|(q, _)| q == s) {
                            k.formats.push((s.to_string(), p.kw_ptr("format")));
                        }
                    }
                    Treatment::Refused(why) => cx.refuse("format", why, p.kw_ptr("format"))?,
                }
            }
        }
    }
    let _ = cx;
    Ok(k)
}

/// The grammar of strings allowed by the conjunction.
pub(crate) fn compile(cx: &mut Compiler, parts: &[Conjunct], excluded: &[Value]) -> CompileResult<Expr> {
    let k = collect(cx, parts)?;
    let q = Expr::lit("\"");
    if k.max.is_some_and(|m| m < k.min) {
        return Ok(nothing());
    }
    let mut excl: Vec<String> = excluded.iter().filter_map(|v| v.as_str().map(String::from)).collect();
    // All regular constraints as (pattern source, pointer), formats first.
    let mut regs: Vec<(String, String, &'static str)> = Vec::new();
    for (f, at) in &k.formats {
        if let Some(r) = crate::format::regex_for(f) {
            regs.push((r.to_string(), at.clone(), "format"));
        }
    }
    for (p, at) in &k.patterns {
        regs.push((p.clone(), at.clone(), "pattern"));
    }
    let mut negs = k.not_patterns;
    if !excl.is_empty() && (!regs.is_empty() || !negs.is_empty() || k.min > 0 || k.max.is_some()) {
        // Excluded strings beside other constraints: one more pattern not to match, the
        // alternation of the excluded strings, anchored at both ends.
        negs.push((crate::regex::literal_alternation(&excl), parts[0].at.clone(), "not"));
        excl.clear();
    }
    if !negs.is_empty() {
        // Patterns it must not match (negations): one product automaton, accepting where
        // every positive pattern and the length bounds accept and no negative one does.
        if regs.len() + negs.len() <= 8 {
            if let Some(body) = crate::regex::string_body_all_but(cx, &regs, &negs, k.min, k.max)? {
                return Ok(seq_of(vec![q.clone(), body, q]));
            }
        }
        let what = if negs[0].2 == "pattern" { "a negative lookahead" } else { "a negated pattern, format or excluded strings" };
        cx.refuse(negs[0].2, format!("{what} together with more than 8 patterns, or over the automaton size bounds"), negs[0].1.clone())?;
    }
    if !excl.is_empty() {
        let body = excluding(cx, &excl, "not")?;
        return Ok(seq_of(vec![q.clone(), body, q]));
    }
    if regs.is_empty() {
        let body = any_chars(cx, k.min, k.max)?;
        return Ok(seq_of(vec![q.clone(), body, q]));
    }
    if regs.len() > 1 && regs.len() <= 8 {
        // Several patterns/formats: their intersection, as one automaton.
        if let Some(body) = crate::regex::string_body_all(cx, &regs, k.min, k.max)? {
            return Ok(seq_of(vec![q.clone(), body, q]));
        }
        let (_, at, kw) = &regs[1];
        cx.refuse(kw, "more than one pattern/format on the same string, and their intersection is over the automaton size bounds", at.clone())?;
    } else if regs.len() > 1 {
        let (_, at, kw) = &regs[1];
        cx.refuse(kw, "more than 8 patterns/formats on the same string", at.clone())?;
    }
    let (src, at, kw) = regs[0].clone();
    // A pattern whose own grammar cannot carry the length bounds (a partly anchored one):
    // the product of the pattern and the bounds, when they are small.
    if crate::regex::bounds_need_product(cx, &src, k.min, k.max, kw, &at) {
        if let Some(body) = crate::regex::string_body_all(cx, &regs, k.min, k.max)? {
            return Ok(seq_of(vec![q.clone(), body, q]));
        }
    }
    let body = crate::regex::string_body(cx, &src, k.min, k.max, &at, kw)?;
    Ok(seq_of(vec![q.clone(), body, q]))
}
