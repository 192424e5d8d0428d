//! Numbers: digit-level range grammars, `multipleOf`, excluded values.
//!
//! Integers are exact over `[lo, hi]` (bounds beyond ±10^18 are tightened to it — a subset)
//! in canonical syntax only (`-?(0|[1-9][0-9]*)`; `1.0` is an integer in JSON Schema but is
//! not generated — a documented subset). Numbers with bounds accept integers exactly and
//! decimals `I.F` of at most 15 digits exactly (module `decimal`: there the decimal and the
//! binary comparison with a bound agree; no exponent). Unbounded numbers follow RFC 8259 in
//! full.

use crate::compiler::{Compiler, CompileResult};
use crate::conjunct::Conjunct;
use crate::exprs::{alt_of, invalid, is_nothing, nothing, zero_fraction};
use decimal::{magnitudes, Bound};
use formwork_grammar::Expr;
use serde_json::Value;

mod decimal;

const CAP: i128 = 1_000_000_000_000_000_000;

fn digit() -> Expr {
    Expr::class([('0', '9')], false)
}

fn dclass(a: u8, b: u8) -> Expr {
    Expr::class([((b'0' + a) as char, (b'0' + b) as char)], false)
}

/// Same-length digit strings between `a` and `b` (inclusive), `a.len() == b.len()`.
fn same_len(a: &[u8], b: &[u8]) -> Expr {
    if a.is_empty() {
        return Expr::empty();
    }
    if a[0] == b[0] {
        return Expr::seq([dclass(a[0], a[0]), same_len(&a[1..], &b[1..])]);
    }
    let n = a.len() - 1;
    let all_zero = a[1..].iter().all(|&d| d == 0);
    let all_nine = b[1..].iter().all(|&d| d == 9);
    let lo_d = if all_zero { a[0] } else { a[0] + 1 };
    let hi_d = if all_nine { b[0] } else { b[0] - 1 };
    let mut alts = Vec::new();
    if !all_zero {
        alts.push(Expr::seq([dclass(a[0], a[0]), same_len(&a[1..], &vec![9; n])]));
    }
    if lo_d <= hi_d {
        alts.push(Expr::seq([dclass(lo_d, hi_d), Expr::repeat(digit(), n as u32, Some(n as u32))]));
    }
    if !all_nine {
        alts.push(Expr::seq([dclass(b[0], b[0]), same_len(&vec![0; n], &b[1..])]));
    }
    Expr::alt(alts)
}

fn digits(n: u128) -> Vec<u8> {
    n.to_string().bytes().map(|b| b - b'0').collect()
}

/// Canonical non-negative integers in `[a, b]` (`b: None` = unbounded).
pub(crate) fn uint_range(a: u128, b: Option<u128>) -> Expr {
    if b.is_some_and(|b| b < a) {
        return nothing();
    }
    let da = digits(a);
    let mut alts = Vec::new();
    let max_len = b.map(|b| digits(b).len()).unwrap_or(da.len());
    for len in da.len()..=max_len {
        let lo = if len == da.len() { da.clone() } else if len == 1 { vec![0] } else { [vec![1], vec![0; len - 1]].concat() };
        let hi = match b {
            Some(b) if digits(b).len() == len => digits(b),
            _ => vec![9; len],
        };
        // No leading zeros for multi-digit numbers.
        let lo = if len > 1 && lo[0] == 0 { [vec![1], vec![0; len - 1]].concat() } else { lo };
        if lo <= hi {
            alts.push(same_len(&lo, &hi));
        }
    }
    if b.is_none() {
        alts.push(Expr::seq([dclass(1, 9), Expr::repeat(digit(), da.len() as u32, None)]));
    }
    alt_of(alts)
}

/// Canonical integers in `[lo, hi]`.
pub(crate) fn int_range(lo: Option<i128>, hi: Option<i128>) -> Expr {
    if let (Some(l), Some(h)) = (lo, hi) {
        if l > h {
            return nothing();
        }
    }
    let mut alts = Vec::new();
    // Non-negative part.
    if hi.is_none_or(|h| h >= 0) {
        let a = lo.map_or(0, |l| l.max(0)) as u128;
        alts.push(uint_range(a, hi.map(|h| h as u128)));
    }
    // Negative part: magnitudes in [max(1, -hi), -lo].
    if lo.is_none_or(|l| l < 0) {
        let a = hi.map_or(1, |h| (-h).max(1)) as u128;
        let b = lo.map(|l| (-l) as u128);
        let m = uint_range(a, b);
        if !crate::exprs::is_nothing(&m) {
            alts.push(Expr::seq([Expr::lit("-"), m]));
        }
    }
    alt_of(alts)
}

/// The full RFC 8259 number.
pub(crate) fn json_number() -> Expr {
    Expr::seq([
        Expr::opt(Expr::lit("-")),
        Expr::alt([Expr::lit("0"), Expr::seq([dclass(1, 9), Expr::star(digit())])]),
        Expr::opt(Expr::seq([Expr::lit("."), Expr::plus(digit())])),
        Expr::opt(Expr::seq([Expr::class([('e', 'e'), ('E', 'E')], false), Expr::opt(Expr::class([('+', '+'), ('-', '-')], false)), Expr::plus(digit())])),
    ])
}

#[derive(Default)]
struct NumKw {
    lo: Option<(f64, bool)>,
    hi: Option<(f64, bool)>,
    mult: Vec<(f64, String)>,
    /// Integers the number must not be a multiple of (a negated integer `multipleOf`,
    /// `x-formwork-not-multiple-of`), with where they come from.
    not_mult: Vec<(u128, String)>,
}

fn tighter_lo(a: Option<(f64, bool)>, b: (f64, bool)) -> Option<(f64, bool)> {
    match a {
        None => Some(b),
        Some(x) => Some(if b.0 > x.0 || (b.0 == x.0 && b.1) { b } else { x }),
    }
}
fn tighter_hi(a: Option<(f64, bool)>, b: (f64, bool)) -> Option<(f64, bool)> {
    match a {
        None => Some(b),
        Some(x) => Some(if b.0 < x.0 || (b.0 == x.0 && b.1) { b } else { x }),
    }
}

fn collect(parts: &[Conjunct]) -> CompileResult<NumKw> {
    let mut k = NumKw::default();
    for p in parts {
        let num = |kw: &str| -> CompileResult<Option<f64>> {
            match p.get(kw) {
                None => Ok(None),
                Some(Value::Bool(_)) => Ok(None),
                Some(v) => v.as_f64().map(Some).ok_or_else(|| invalid(kw, "must be a number", p.kw_ptr(kw))),
            }
        };
        let ex_bool = |kw: &str| p.get(kw) == Some(&Value::Bool(true));
        if let Some(m) = num("minimum")? {
            k.lo = tighter_lo(k.lo, (m, ex_bool("exclusiveMinimum")));
        }
        if let Some(m) = num("maximum")? {
            k.hi = tighter_hi(k.hi, (m, ex_bool("exclusiveMaximum")));
        }
        if let Some(m) = num("exclusiveMinimum")? {
            k.lo = tighter_lo(k.lo, (m, true));
        }
        if let Some(m) = num("exclusiveMaximum")? {
            k.hi = tighter_hi(k.hi, (m, true));
        }
        if let Some(m) = num("multipleOf")? {
            if m <= 0.0 {
                return Err(invalid("multipleOf", "must be positive", p.kw_ptr("multipleOf")));
            }
            k.mult.push((m, p.kw_ptr("multipleOf")));
        }
        if let Some(m) = p.get(crate::derived::NOT_MULTIPLE_OF) {
            let m = m.as_u64().filter(|&m| m > 0).ok_or_else(|| invalid("not", "a negated multipleOf must be a positive integer", p.at.clone()))?;
            k.not_mult.push((u128::from(m), p.at.clone()));
        }
    }
    Ok(k)
}

/// Least integer allowed by a lower bound.
fn int_lo(lo: Option<(f64, bool)>) -> Option<i128> {
    lo.map(|(v, ex)| {
        let c = v.ceil();
        let c = if ex && c == v { c + 1.0 } else { c };
        (c.clamp(-1e30, 1e30) as i128).max(-CAP)
    })
    .map(|v| v.min(CAP + 1))
}
/// Greatest integer allowed by an upper bound.
fn int_hi(hi: Option<(f64, bool)>) -> Option<i128> {
    hi.map(|(v, ex)| {
        let f = v.floor();
        let f = if ex && f == v { f - 1.0 } else { f };
        (f.clamp(-1e30, 1e30) as i128).min(CAP)
    })
    .map(|v| v.max(-CAP - 1))
}

fn cap_unbounded(lo: Option<(f64, bool)>, hi: Option<(f64, bool)>) -> (Option<i128>, Option<i128>) {
    // A bound beyond ±CAP is replaced by ±CAP (a subset); an absent bound stays absent.
    (int_lo(lo), int_hi(hi))
}

/// Numbers allowed by the conjunction (`int_only`: type integer).
/// Numbers that are not integers (a negated `integer`): written without an exponent, with a
/// fraction holding a nonzero digit (`-?(0|[1-9][0-9]*)\.[0-9]*[1-9][0-9]*`). Whether a
/// number with an exponent is integral depends on the exponent's value, which a grammar
/// cannot weigh against the digits in general, so those are left out: a narrowing (never an
/// invalid number). Bounds, multiples and excluded numbers are refused here.
pub(crate) fn non_integral(cx: &mut Compiler, parts: &[Conjunct], excluded: &[Value]) -> CompileResult<Expr> {
    let k = collect(parts)?;
    if k.lo.is_some() || k.hi.is_some() || !k.mult.is_empty() || excluded.iter().any(Value::is_number) {
        cx.refuse("not", "non-integral numbers (a negated `integer`) together with bounds, multiples or excluded numbers", parts[0].at.clone())?;
    }
    Ok(non_integral_body())
}

/// Numbers with a fraction that has a non-zero digit (so never equal to an integer), in
/// plain decimal notation.
fn non_integral_body() -> Expr {
    let digit = || Expr::class([('0', '9')], false);
    let int_part = Expr::alt([Expr::lit("0"), Expr::seq([Expr::class([('1', '9')], false), Expr::star(digit())])]);
    Expr::seq([Expr::opt(Expr::lit("-")), int_part, Expr::lit("."), Expr::star(digit()), Expr::class([('1', '9')], false), Expr::star(digit())])
}

pub(crate) fn compile(cx: &mut Compiler, parts: &[Conjunct], int_only: bool, excluded: &[Value]) -> CompileResult<Expr> {
    let k = collect(parts)?;
    let (ilo, ihi) = cap_unbounded(k.lo, k.hi);
    let excl_ints: Vec<i128> = excluded.iter().filter_map(|v| v.as_i64().map(|i| i as i128).or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i128))).collect();
    if !int_only && excluded.iter().any(|v| v.is_number() && v.as_f64().is_some_and(|f| f.fract() != 0.0)) {
        cx.refuse("not", "excluding particular non-integral numbers", parts[0].at.clone())?;
    }
    // multipleOf
    let mut int_step: u128 = 1;
    let mut int_mult = false;
    let mut frac_digits: Option<u32> = None; // multipleOf 10^-d
    for (m, at) in &k.mult {
        if m.fract() == 0.0 && *m < 1e15 {
            let m = *m as u128;
            int_mult = true;
            int_step = lcm(int_step, m);
            if int_step > 1_000_000 {
                cx.refuse("multipleOf", "a multiple larger than 10^6", at.clone())?;
                int_step = 1;
            }
        } else if let Some(d) = (1..=9u32).find(|&d| ((m * 10f64.powi(d as i32)) - 1.0).abs() < 1e-9) {
            frac_digits = Some(frac_digits.map_or(d, |x: u32| x.min(d)));
        } else {
            cx.refuse("multipleOf", format!("multipleOf {m} is supported only for integers and powers of ten"), at.clone())?;
        }
    }
    if !k.not_mult.is_empty() {
        return not_multiples(cx, &k, int_only, int_step, frac_digits, excluded);
    }
    let frac_allowed = !int_only && !int_mult && excl_ints.is_empty();
    // Integers.
    let ints = if int_step > 1 {
        ints_multiple(cx, ilo, ihi, int_step, &excl_ints, &parts[0])?
    } else {
        ranges_minus(ilo, ihi, &excl_ints)
    };
    // `3.0` is the integer 3 in JSON Schema: integers may carry a zero fraction (unless the
    // caller generates, and wants canonical integers).
    let ints = if crate::exprs::is_nothing(&ints) || cx.opts.canonical_integers {
        ints
    } else {
        Expr::seq([ints, zero_fraction()])
    };
    if !frac_allowed {
        // Excluded integers leave every non-integral number, when nothing else bounds them.
        if !int_only && !int_mult && k.lo.is_none() && k.hi.is_none() && frac_digits.is_none() {
            return Ok(alt_of(vec![ints, non_integral_body()]));
        }
        return Ok(ints);
    }
    if k.lo.is_none() && k.hi.is_none() {
        return Ok(match frac_digits {
            None => alt_of(vec![json_number()]),
            Some(d) => Expr::seq([int_range(None, None), Expr::opt(Expr::seq([Expr::lit("."), Expr::repeat(digit(), 1, Some(d))]))]),
        });
    }
    // Decimals: magnitudes of the non-negative ones in [max(lo, 0), hi], of the negative ones
    // in [max(-hi, 0), -lo].
    let mut alts = vec![ints];
    let zero_or = |b: Option<(f64, bool)>, lower: bool| -> Option<Option<Bound>> {
        // Some(None): no bound on this side for decimals; None: no decimal on this side.
        match b {
            None => Some(None),
            Some((v, strict)) => match Bound::of(v, strict, lower) {
                Some(b) => Some(Some(b)),
                None if lower => None,
                None => Some(None),
            },
        }
    };
    let pos_lo = k.lo.map(|(v, s)| if v < 0.0 { (0.0, false) } else { (v, s) });
    if k.hi.is_none_or(|(v, _)| v >= 0.0) {
        if let (Some(lo), Some(hi)) = (zero_or(pos_lo, true), zero_or(k.hi, false)) {
            alts.push(magnitudes(lo.as_ref(), hi.as_ref(), frac_digits));
        }
    }
    if k.lo.is_none_or(|(v, _)| v < 0.0) {
        let neg_lo = k.hi.map(|(v, s)| if v > 0.0 { (0.0, false) } else { (-v, s) });
        let neg_hi = k.lo.map(|(v, s)| (-v, s));
        if let (Some(lo), Some(hi)) = (zero_or(neg_lo, true), zero_or(neg_hi, false)) {
            let m = magnitudes(lo.as_ref(), hi.as_ref(), frac_digits);
            if !crate::exprs::is_nothing(&m) {
                alts.push(Expr::seq([Expr::lit("-"), m]));
            }
        }
    }
    Ok(alt_of(alts))
}

fn ranges_minus(lo: Option<i128>, hi: Option<i128>, excl: &[i128]) -> Expr {
    let mut cuts: Vec<i128> = excl.iter().copied().filter(|&e| lo.is_none_or(|l| e >= l) && hi.is_none_or(|h| e <= h)).collect();
    cuts.sort();
    cuts.dedup();
    let mut alts = Vec::new();
    let mut cur = lo;
    for c in cuts {
        alts.push(int_range(cur, Some(c - 1)));
        cur = Some(c + 1);
    }
    alts.push(int_range(cur, hi));
    alt_of(alts)
}

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}
fn lcm(a: u128, b: u128) -> u128 {
    a / gcd(a, b) * b
}

/// The multiples of `step` in `[lo, hi]` but the `excl`uded ones: listed when there are at
/// most 2,000, else the divisibility automaton (which cannot leave out particular values:
/// refused when an excluded value is among the multiples in range).
fn ints_multiple(cx: &mut Compiler, lo: Option<i128>, hi: Option<i128>, step: u128, excl: &[i128], at: &Conjunct) -> CompileResult<Expr> {
    let s = step as i128;
    if let (Some(l), Some(h)) = (lo, hi) {
        let first = l.div_euclid(s) * s + if l.rem_euclid(s) == 0 { 0 } else { s };
        let count = if h < first { 0 } else { (h - first) / s + 1 };
        if count <= 2000 {
            let v: Vec<Expr> = (0..count).map(|i| first + i * s).filter(|v| !excl.contains(v)).map(|v| Expr::lit(v.to_string())).collect();
            return Ok(alt_of(v));
        }
    }
    if excl.iter().any(|&e| e % s == 0 && lo.is_none_or(|l| e >= l) && hi.is_none_or(|h| e <= h)) {
        cx.refuse("not", "excluding particular multiples beside multipleOf over a wide range", at.at.clone())?;
    }
    let nonneg_only = lo.is_some_and(|l| l == 0);
    if !(lo.is_none() || nonneg_only) || hi.is_some() {
        cx.refuse("multipleOf", "multipleOf with a wide or one-sided range other than minimum 0", at.kw_ptr("multipleOf"))?;
    }
    Ok(divisibility_where(cx, step, "", &|r| r == 0, nonneg_only))
}

/// Integers whose magnitude's remainder modulo `step` is accepted by `accept`, as an
/// automaton over the magnitude's digits: rule `mod{step}{tag}-{r}` is "the digits read so
/// far leave remainder `r`" (`tag` names the accepting set, one rule family per set).
fn divisibility_where(cx: &mut Compiler, step: u128, tag: &str, accept: &dyn Fn(u128) -> bool, nonneg_only: bool) -> Expr {
    let names: Vec<String> = (0..step).map(|r| format!("mod{step}{tag}-{r}")).collect();
    if !cx.b.is_defined(&names[0]) {
        let ids: Vec<_> = names.iter().map(|n| cx.b.rule_id(n)).collect();
        for r in 0..step {
            let mut alts = Vec::new();
            if accept(r) {
                alts.push(Expr::empty());
            }
            let mut groups: Vec<(u8, u8, usize)> = Vec::new();
            for d in 0..10u8 {
                let t = ((r * 10 + d as u128) % step) as usize;
                match groups.last_mut() {
                    Some(g) if g.2 == t && g.1 + 1 == d => g.1 = d,
                    _ => groups.push((d, d, t)),
                }
            }
            for (a, b, t) in groups {
                alts.push(Expr::seq([dclass(a, b), Expr::Rule(ids[t])]));
            }
            cx.b.define(&names[r as usize], Expr::alt(alts));
        }
    }
    let mut firsts = Vec::new();
    for d in 1..10u8 {
        let t = (d as u128 % step) as usize;
        let id = cx.b.rule_id(&names[t]);
        firsts.push(Expr::seq([dclass(d, d), Expr::Rule(id)]));
    }
    let mag = Expr::alt(firsts);
    let zero = accept(0).then(|| Expr::lit("0"));
    let signed = if nonneg_only { mag } else { Expr::seq([Expr::opt(Expr::lit("-")), mag]) };
    alt_of(zero.into_iter().chain([signed]).collect())
}

/// The numbers of the conjunction when it negates an integer `multipleOf` (`not_mult`):
/// integers that are multiples of `int_step` (1 without a `multipleOf`) and of none of
/// `not_mult`, plus, when fractions are allowed, every non-integral number (never a
/// multiple of an integer). Without bounds, one divisibility automaton modulo the least
/// common multiple; with bounds, the integers of a range of at most 2,000 are listed (its
/// non-integral numbers left out: a narrowing).
/// Refused beside excluded values, decimal steps, a modulus over 10^6, or wider bounds.
fn not_multiples(cx: &mut Compiler, k: &NumKw, int_only: bool, int_step: u128, frac_digits: Option<u32>, excl: &[Value]) -> CompileResult<Expr> {
    let at = k.not_mult[0].1.clone();
    let mut step = int_step;
    for (m, _) in &k.not_mult {
        step = lcm(step, *m);
        if step > 1_000_000 {
            cx.refuse("not", "the negation of multipleOf needs a modulus over 10^6", at)?;
            return Ok(nothing());
        }
    }
    if frac_digits.is_some() || excl.iter().any(Value::is_number) {
        cx.refuse("not", "the negation of multipleOf beside a decimal multipleOf or excluded numbers", at)?;
        return Ok(nothing());
    }
    let accept = |r: u128| r % int_step == 0 && k.not_mult.iter().all(|(m, _)| r % m != 0);
    let (lo, hi) = cap_unbounded(k.lo, k.hi);
    let ints = match (lo, hi) {
        (None, None) => {
            let tag = format!("n{}", k.not_mult.iter().map(|(m, _)| m.to_string()).collect::<Vec<_>>().join("n"));
            let tag = if int_step > 1 { format!("{tag}m{int_step}") } else { tag };
            divisibility_where(cx, step, &tag, &accept, false)
        }
        (Some(l), Some(h)) if h - l < 2000 => alt_of((l..=h).filter(|v| accept(v.unsigned_abs() % step)).map(|v| Expr::lit(v.to_string())).collect()),
        _ => {
            cx.refuse("not", "the negation of multipleOf with a wide or one-sided range", at)?;
            return Ok(nothing());
        }
    };
    let ints = if is_nothing(&ints) || cx.opts.canonical_integers { ints } else { Expr::seq([ints, zero_fraction()]) };
    if int_only || int_step > 1 || lo.is_some() || hi.is_some() {
        return Ok(ints);
    }
    Ok(alt_of(vec![ints, non_integral_body()]))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn matches(e: &Expr, s: &str) -> bool {
        // A tiny backtracking matcher over rule-free expressions, for these tests.
        fn m<'a>(e: &Expr, s: &'a str, k: &mut dyn FnMut(&'a str) -> bool) -> bool {
            match e {
                Expr::Literal(l) => s.strip_prefix(l.as_str()).is_some_and(|r| k(r)),
                Expr::Class(r) => {
                    let mut it = s.chars();
                    match it.next() {
                        Some(c) if r.iter().any(|&(a, b)| a <= c && c <= b) => k(it.as_str()),
                        _ => false,
                    }
                }
                Expr::Seq(v) => {
                    fn go<'a>(v: &[Expr], s: &'a str, k: &mut dyn FnMut(&'a str) -> bool) -> bool {
                        match v.split_first() {
                            None => k(s),
                            Some((h, t)) => m(h, s, &mut |r| go(t, r, k)),
                        }
                    }
                    go(v, s, k)
                }
                Expr::Alt(v) => v.iter().any(|x| m(x, s, k)),
                Expr::Repeat { expr, min, max } => {
                    fn rep<'a>(e: &Expr, s: &'a str, min: u32, max: Option<u32>, k: &mut dyn FnMut(&'a str) -> bool) -> bool {
                        if min == 0 && k(s) {
                            return true;
                        }
                        if max == Some(0) {
                            return false;
                        }
                        m(e, s, &mut |r| r.len() < s.len() && rep(e, r, min.saturating_sub(1), max.map(|x| x - 1), k))
                    }
                    rep(expr, s, *min, *max, k)
                }
                _ => false,
            }
        }
        m(e, s, &mut |r| r.is_empty())
    }

    #[test]
    fn integer_ranges_are_exact() {
        for (lo, hi) in [(Some(-123), Some(457)), (Some(5), None), (None, Some(-7)), (Some(0), Some(0)), (Some(10), Some(99))] {
            let e = int_range(lo, hi);
            for n in -1500i128..1500 {
                let want = lo.is_none_or(|l| n >= l) && hi.is_none_or(|h| n <= h);
                assert_eq!(matches(&e, &n.to_string()), want, "{n} in {lo:?}..{hi:?}");
            }
            assert!(!matches(&e, "007"));
        }
    }
}
