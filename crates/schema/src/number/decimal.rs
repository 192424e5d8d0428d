//! Decimals `I.F` (no exponent) between decimal bounds, exactly, for numbers of at most
//! [`MAX_DIGITS`] digits.
//!
//! The validator compares binary doubles: the instance and the bound are each rounded to the
//! nearest `f64`. Rounding is monotone, and two different decimals of at most 15 significant
//! digits never round to the same double, so for such decimals (the instance here, the
//! bound written in its shortest round-trip form) the decimal comparison and the binary one
//! agree. A bound with more significant digits is first moved inward to an integer, which
//! is exact. Longer instances (which could round onto a bound) are not generated.

use crate::exprs::alt_of;
use formwork_grammar::Expr;

/// Most digits (integer and fraction parts together) of a generated decimal.
pub(crate) const MAX_DIGITS: usize = 15;

/// A non-negative decimal bound: integer part and fraction digits (no trailing zeros), and
/// whether it is strict.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Bound {
    pub int: u128,
    pub frac: Vec<u8>,
    pub strict: bool,
}

impl Bound {
    /// The bound `|v|` (`strict` as given), or `None` when its integer part is longer than any
    /// generated decimal's. `lower`: it bounds from below (a bound of more than
    /// [`MAX_DIGITS`] significant digits is then moved up to an integer, else down).
    pub(crate) fn of(v: f64, strict: bool, lower: bool) -> Option<Bound> {
        let s = format!("{}", v.abs());
        let (i, f) = s.split_once('.').unwrap_or((&s, ""));
        let frac: Vec<u8> = f.trim_end_matches('0').bytes().map(|b| b - b'0').collect();
        if i.len() > MAX_DIGITS {
            return None;
        }
        let int: u128 = i.parse().ok()?;
        let sig = format!("{i}{}", f.trim_end_matches('0')).trim_start_matches('0').len();
        if sig > MAX_DIGITS && !frac.is_empty() {
            // Move inward to an integer: above a lower bound, below an upper one.
            return Some(if lower { Bound { int: int + 1, frac: Vec::new(), strict: false } } else { Bound { int, frac: Vec::new(), strict: false } });
        }
        Some(Bound { int, frac, strict })
    }
}

fn digit_range(a: u8, b: u8) -> Expr {
    Expr::class([((b'0' + a) as char, (b'0' + b) as char)], false)
}

/// Fraction digit strings `s` of length `need..=m` (`need` 0 or 1) with `s >= lo` and
/// `s <= hi` as fractions (`s` padded with zeros); a side that is `None` is already decided.
fn frac(lo: Option<(&[u8], bool)>, hi: Option<(&[u8], bool)>, m: usize, need: usize) -> Expr {
    let mut alts = Vec::new();
    // End here: the rest of `s` is zeros.
    let end_ok = need == 0 && lo.is_none_or(|(f, strict)| f.is_empty() && !strict) && hi.is_none_or(|(f, strict)| !(f.is_empty() && strict));
    if end_ok {
        alts.push(Expr::empty());
    }
    if m == 0 {
        return alt_of(alts);
    }
    let (l0, h0) = (lo.map(|(f, _)| f.first().copied().unwrap_or(0)), hi.map(|(f, _)| f.first().copied().unwrap_or(0)));
    let first = l0.unwrap_or(0);
    let last = h0.unwrap_or(9);
    if first > last {
        return alt_of(alts);
    }
    // Digits strictly between the tight ones leave both sides decided.
    let free_lo = if l0.is_some() { first + 1 } else { first };
    let free_hi = if h0.is_some() { last.wrapping_sub(1) } else { last };
    if h0 != Some(0) && free_lo <= free_hi && free_hi <= 9 {
        alts.push(Expr::seq([digit_range(free_lo, free_hi), Expr::repeat(digit_range(0, 9), 0, Some(m as u32 - 1))]));
    }
    match (l0, h0) {
        (Some(a), Some(b)) if a == b => alts.push(Expr::seq([digit_range(a, a), frac(rest(lo), rest(hi), m - 1, 0)])),
        _ => {
            if let Some(a) = l0 {
                alts.push(Expr::seq([digit_range(a, a), frac(rest(lo), None, m - 1, 0)]));
            }
            if let Some(b) = h0 {
                alts.push(Expr::seq([digit_range(b, b), frac(None, rest(hi), m - 1, 0)]));
            }
        }
    }
    alt_of(alts)
}

/// `side` past its first digit.
fn rest(side: Option<(&[u8], bool)>) -> Option<(&[u8], bool)> {
    side.map(|(f, s)| (f.get(1..).unwrap_or(f), s))
}

fn len_of(n: u128) -> usize {
    n.to_string().len()
}

/// Non-negative decimals `I.F` (at least one fraction digit, at most `max_frac`, at most
/// [`MAX_DIGITS`] digits in all) in the interval from `lo` (`None`: 0, inclusive) to `hi`
/// (`None`: unbounded).
pub(crate) fn magnitudes(lo: Option<&Bound>, hi: Option<&Bound>, max_frac: Option<u32>) -> Expr {
    let zero = Bound { int: 0, frac: Vec::new(), strict: false };
    let lo = lo.unwrap_or(&zero);
    let room = |i: u128| MAX_DIGITS.saturating_sub(len_of(i)).min(max_frac.map_or(usize::MAX, |d| d as usize));
    let dot = || Expr::lit(".");
    let mut alts = Vec::new();
    let lo_side = Some((&lo.frac[..], lo.strict));
    match hi {
        Some(h) if h.int < lo.int => return crate::exprs::nothing(),
        Some(h) if h.int == lo.int => {
            let m = room(lo.int);
            if m > 0 {
                alts.push(Expr::seq([Expr::lit(lo.int.to_string()), dot(), frac(lo_side, Some((&h.frac[..], h.strict)), m, 1)]));
            }
            return alt_of(alts);
        }
        _ => {}
    }
    let m = room(lo.int);
    if m > 0 {
        alts.push(Expr::seq([Expr::lit(lo.int.to_string()), dot(), frac(lo_side, None, m, 1)]));
    }
    if let Some(h) = hi {
        let m = room(h.int);
        if m > 0 {
            alts.push(Expr::seq([Expr::lit(h.int.to_string()), dot(), frac(None, Some((&h.frac[..], h.strict)), m, 1)]));
        }
    }
    // Integer parts strictly between, by length.
    let (a, b) = (lo.int + 1, hi.map(|h| h.int.saturating_sub(1)));
    for n in 1..MAX_DIGITS {
        let (first, last) = (if n == 1 { 0 } else { 10u128.pow(n as u32 - 1) }, 10u128.pow(n as u32) - 1);
        let (x, y) = (first.max(a), b.map_or(last, |b| b.min(last)));
        let m = room(first);
        if x > y || m == 0 {
            continue;
        }
        alts.push(Expr::seq([super::uint_range(x, Some(y)), dot(), Expr::repeat(digit_range(0, 9), 1, Some(m as u32))]));
    }
    alt_of(alts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::number::tests::matches;

    /// Accepted decimals satisfy the bounds as doubles; short ones are accepted exactly when
    /// they do.
    #[test]
    // 3.14159 is a bound with candidates on both sides of it (3.14159, 3.141589), not π.
    #[allow(clippy::approx_constant)]
    fn magnitudes_agree_with_double_comparisons() {
        let vals = [0.0, 0.1, 0.25, 1.0, 2.5, 3.14159, 1e-5, 0.30000000000000004, 10.0, 99.99];
        let mut cands: Vec<String> = Vec::new();
        for i in [0u32, 1, 2, 3, 9, 10, 99, 100] {
            for f in ["0", "00", "1", "09", "1", "25", "249", "251", "3", "30000000000000004", "3000000000000", "14159", "141589", "00001", "000010", "99", "999999999999"] {
                cands.push(format!("{i}.{f}"));
            }
        }
        for (lv, hv) in vals.iter().flat_map(|&a| vals.iter().map(move |&b| (a, b))).filter(|(a, b)| a <= b) {
            for (ls, hs) in [(false, false), (true, false), (false, true), (true, true)] {
                for (use_lo, use_hi) in [(true, true), (true, false), (false, true)] {
                    let lo = use_lo.then(|| Bound::of(lv, ls, true).unwrap());
                    let hi = use_hi.then(|| Bound::of(hv, hs, false).unwrap());
                    let e = magnitudes(lo.as_ref(), hi.as_ref(), None);
                    for c in &cands {
                        let x: f64 = c.parse().unwrap();
                        let ok = (!use_lo || if ls { x > lv } else { x >= lv }) && (!use_hi || if hs { x < hv } else { x <= hv });
                        let got = matches(&e, c);
                        let short = c.len() - 1 <= MAX_DIGITS;
                        let long_bound = (use_lo && lv == 0.30000000000000004) || (use_hi && hv == 0.30000000000000004);
                        if got {
                            assert!(ok, "{c} accepted for {lv}/{ls} .. {hv}/{hs} ({use_lo}, {use_hi})");
                        } else if short && !long_bound {
                            assert!(!ok, "{c} rejected for {lv}/{ls} .. {hv}/{hs} ({use_lo}, {use_hi})");
                        }
                    }
                }
            }
        }
    }
}
