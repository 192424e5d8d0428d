//! Characters inside JSON strings: a set of code points as its JSON encodings
//! ([`enc_class`]: the raw characters JSON allows unescaped, plus the escapes of those that
//! need one), any character, bounded repetitions of a piece, and the strings that are none of
//! a list of names (a complement trie). The string type (`crate::string`), patterns
//! (`crate::regex`) and object keys build on these.

use crate::compiler::{Compiler, CompileResult};
use crate::exprs::alt_of;
use formwork_grammar::ir::normalize_ranges;
use formwork_grammar::Expr;

fn intersect(a: &[(char, char)], b: &[(char, char)]) -> Vec<(char, char)> {
    let mut out = Vec::new();
    for &(x, y) in a {
        for &(u, v) in b {
            let lo = x.max(u);
            let hi = y.min(v);
            if lo <= hi {
                out.push((lo, hi));
            }
        }
    }
    normalize_ranges(out)
}

fn contains(r: &[(char, char)], c: char) -> bool {
    r.iter().any(|&(a, b)| a <= c && c <= b)
}

/// All JSON encodings (raw or with a mandatory/short escape) of the characters in `ranges`.
pub(crate) fn enc_class(ranges: &[(char, char)]) -> Expr {
    // One character with a single encoding (most characters of most keys): itself.
    if let [(a, b)] = ranges {
        if a == b && PLAIN.iter().any(|&(lo, hi)| lo <= *a && *a <= hi) {
            return Expr::Class(vec![(*a, *a)]);
        }
    }
    let (raw, escaped) = enc_parts(ranges, true);
    alt_of(raw.into_iter().chain(escaped.map(|e| Expr::seq([Expr::lit("\\"), e]))).collect())
}

/// The encodings of the characters in `ranges`, in two parts: the raw characters, and what
/// follows the backslash of the escaped ones (the short escapes' letters, and with
/// `control_u`, `u00XX` for the control characters). The escapes share their backslash, so
/// a grammar state inside a string holds one stack for all of them.
fn enc_parts(ranges: &[(char, char)], control_u: bool) -> (Option<Expr>, Option<Expr>) {
    let raw_ok = [(' ', '!'), ('#', '['), (']', char::MAX)];
    let raw = intersect(ranges, &raw_ok);
    let raw = (!raw.is_empty()).then(|| Expr::Class(raw));
    let mut short: Vec<(char, char)> = Vec::new();
    for (c, e) in [('"', '"'), ('\\', '\\'), ('/', '/'), ('\u{8}', 'b'), ('\u{c}', 'f'), ('\n', 'n'), ('\r', 'r'), ('\t', 't')] {
        if contains(ranges, c) {
            short.push((e, e));
        }
    }
    let mut after: Vec<Expr> = Vec::new();
    if !short.is_empty() {
        after.push(Expr::Class(normalize_ranges(short)));
    }
    let mut control: Vec<Expr> = Vec::new();
    for hi in (0..2u32).filter(|_| control_u) {
        let mut lo_digits: Vec<(char, char)> = Vec::new();
        for lo in 0..16u32 {
            let c = char::from_u32(hi * 16 + lo).unwrap_or('\0');
            if contains(ranges, c) {
                let d = std::char::from_digit(lo, 16).unwrap_or('0');
                lo_digits.push((d, d));
                let u = d.to_ascii_uppercase();
                lo_digits.push((u, u));
            }
        }
        if !lo_digits.is_empty() {
            control.push(Expr::seq([Expr::lit(format!("{hi}")), Expr::Class(normalize_ranges(lo_digits))]));
        }
    }
    if !control.is_empty() {
        after.push(Expr::seq([Expr::lit("u00"), alt_of(control)]));
    }
    let escaped = (!after.is_empty()).then(|| alt_of(after));
    (raw, escaped)
}

/// One encoded code point of any kind, including `\uXXXX` escapes and surrogate pairs.
pub(crate) fn any_char() -> Expr {
    let hex = Expr::class([('0', '9'), ('a', 'f'), ('A', 'F')], false);
    let hex2 = Expr::repeat(hex.clone(), 2, Some(2));
    let non_d = Expr::class([('0', '9'), ('a', 'c'), ('A', 'C'), ('e', 'f'), ('E', 'F')], false);
    let d = Expr::class([('d', 'd'), ('D', 'D')], false);
    // `\u` then a code point outside the surrogates, or a high surrogate then `\u` and a
    // low one; the short escapes beside them (the `\u00XX` controls are among the first).
    let bmp_or_pair = Expr::alt([
        Expr::seq([non_d, Expr::repeat(hex.clone(), 3, Some(3))]),
        Expr::seq([
            d.clone(),
            Expr::alt([
                Expr::seq([Expr::class([('0', '7')], false), hex2.clone()]),
                Expr::seq([
                    Expr::class([('8', '9'), ('a', 'b'), ('A', 'B')], false),
                    hex2.clone(),
                    Expr::lit("\\u"),
                    d,
                    Expr::class([('c', 'f'), ('C', 'F')], false),
                    hex2,
                ]),
            ]),
        ]),
    ]);
    let (raw, short) = enc_parts(&[('\0', char::MAX)], false);
    let escaped = Expr::alt(short.into_iter().chain([Expr::seq([Expr::lit("u"), bmp_or_pair])]));
    Expr::alt(raw.into_iter().chain([Expr::seq([Expr::lit("\\"), escaped])]))
}

/// `x{min,max}`, split into nested repetitions when a bound exceeds `Limits::max_repeat`,
/// with blocks of [`block_size`] copies.
///
/// With `B = x{k}` and `e = q·k + r` (`r < k`), the lengths up to `e` are those below `q`
/// blocks, `B{0,q-1} x{0,k-1}`, or `q` blocks and at most `r` more, `B{q} x{0,r}`; the two
/// take different lengths, so a string has one reading (the matcher follows at most two
/// stacks, one per branch). Block counts above the limit are split again, recursively, so
/// any bound is expressible (`maxLength: 2147483647`, as code generators write it, is a few
/// thousand elements) where a single chain would be one rule per copy.
pub(crate) fn rep(cx: &Compiler, x: Expr, min: u64, max: Option<u64>) -> CompileResult<Expr> {
    let lim = cx.opts.limits.max_repeat as u64;
    if min <= lim && max.is_none_or(|m| m <= lim) {
        return Ok(Expr::repeat(x, min as u32, max.map(|m| m as u32)));
    }
    let k = block_size(min.max(max.unwrap_or(0)), lim);
    let head = rep_exact(&x, min, k, lim);
    let tail = match max {
        None => Expr::star(x),
        Some(m) => rep_upto(&x, m - min, k, lim),
    };
    Ok(Expr::seq([head, tail]))
}

/// Copies per block for a bound `n` above the limit `lim`: the `L`-th root of `n` for the
/// fewest levels `L` that bring it to at most 1,024, so that the blocks and the chains beside
/// them stay small (the lowering makes one rule per optional copy), but at least 256, so
/// that a state deep in a block is rarely within a token's length of the block's end (where
/// its mask cannot be shared with the loop's; see `repeats` in the grammar crate).
fn block_size(n: u64, lim: u64) -> u64 {
    let k = (2..=8).map(|l| (n as f64).powf(1.0 / l as f64).ceil() as u64).find(|&k| k <= 1024).unwrap_or(1024);
    k.clamp(256.min(lim), lim).max(2)
}

/// `x{n}`.
fn rep_exact(x: &Expr, n: u64, k: u64, lim: u64) -> Expr {
    if n <= lim {
        return Expr::repeat(x.clone(), n as u32, Some(n as u32));
    }
    let block = Expr::repeat(x.clone(), k as u32, Some(k as u32));
    Expr::seq([rep_exact(&block, n / k, k, lim), Expr::repeat(x.clone(), (n % k) as u32, Some((n % k) as u32))])
}

/// `x{0,e}`.
fn rep_upto(x: &Expr, e: u64, k: u64, lim: u64) -> Expr {
    if e <= lim {
        return Expr::repeat(x.clone(), 0, Some(e as u32));
    }
    let block = Expr::repeat(x.clone(), k as u32, Some(k as u32));
    let (q, r) = (e / k, e % k);
    let fewer = Expr::seq([rep_upto(&block, q - 1, k, lim), Expr::repeat(x.clone(), 0, Some(k as u32 - 1))]);
    let full = Expr::seq([rep_exact(&block, q, k, lim), Expr::repeat(x.clone(), 0, Some(r as u32))]);
    Expr::alt([fewer, full])
}

/// `any_char(){min,max}` (any string body of that many code points), as one rule shared by
/// every use in the grammar.
pub(crate) fn any_chars(cx: &mut Compiler, min: u64, max: Option<u64>) -> CompileResult<Expr> {
    let key = format!("any-chars {min} {max:?}");
    cx.shared(&key, "string-chars", |cx| {
        let one = cx.shared("any-char", "string-char", |_| Ok(any_char()))?;
        rep(cx, one, min, max)
    })
}

/// Strings of decoded characters none of which equals one of `names` (a complement trie), as
/// one rule per distinct set of names.
///
/// Structure is shared: below the node where only one name is left, the trie is the
/// complement of that name's remaining suffix, whatever the prefix and the other names, so
/// each distinct suffix is one rule for the whole grammar (Kubernetes-style schemas repeat
/// `apiVersion`, `kind`, `metadata`, ... in hundreds of open objects, one trie each). The
/// work per key set is then its branching nodes plus one rule reference per name, and each
/// distinct suffix is built and lowered once.
pub(crate) fn excluding(cx: &mut Compiler, names: &[String], base: &str) -> CompileResult<Expr> {
    let mut sorted: Vec<&String> = names.iter().collect();
    sorted.sort();
    sorted.dedup();
    let key = format!("excluding {}", serde_json::to_string(&sorted).unwrap_or_default());
    let tail = cx.shared("raw-chars", "string-raw-chars", |_| Ok(Expr::star(enc_class(&[('\0', char::MAX)]))))?;
    // Whatever starts with a character outside `PLAIN` (and `PLAIN` holds every character of
    // most keys): one shared rule instead of its encodings at every trie node.
    let outside = cx.shared("not-plain-then-raw-chars", "string-other-raw-chars", |_| {
        Ok(Expr::seq([enc_class(&formwork_grammar::ir::complement(&PLAIN)), tail.clone()]))
    })?;
    // Sorted and deduplicated: the names below a node are a contiguous run.
    let v: Vec<Vec<char>> = sorted.iter().map(|n| n.chars().collect()).collect();
    cx.shared(&key, &format!("{base}-excluding"), |cx| trie_node(cx, &v, 0, true, &tail, &outside))
}

/// Printable ASCII but `"`, `\` and `/`: characters with one JSON encoding (raw).
const PLAIN: [(char, char); 4] = [(' ', '!'), ('#', '.'), ('0', '['), (']', '~')];

/// The complement-trie node for the strings that start with the `depth`-character prefix
/// shared by all of `names` (sorted, distinct); `tail` is any string, `outside` any string
/// starting outside [`PLAIN`]. `share`: a node left with one name becomes the shared rule of
/// its suffix (false inside that rule's own chain).
fn trie_node(cx: &mut Compiler, names: &[Vec<char>], depth: usize, share: bool, tail: &Expr, outside: &Expr) -> CompileResult<Expr> {
    if share && names.len() == 1 {
        let suffix: String = names[0][depth..].iter().collect();
        let key = format!("excluding-suffix {}", serde_json::to_string(&suffix).unwrap_or_default());
        let one = [names[0][depth..].to_vec()];
        return cx.shared(&key, "key-excluding-suffix", |cx| trie_node(cx, &one, 0, false, tail, outside));
    }
    if let [name] = names {
        // One name (inside its suffix's rule): built from its end, without the grouping.
        // Past the name, any non-empty string; before each of its characters, the empty
        // string, a first character other than that one, or that one and the rest.
        let mut node = not_starting(cx, &[], tail, outside)?;
        for &c in name[depth..].iter().rev() {
            let other = not_starting(cx, &[c], tail, outside)?;
            node = alt_of(vec![Expr::empty(), other, Expr::seq([enc_class(&[(c, c)]), node])]);
        }
        return Ok(node);
    }
    let terminal = names.iter().any(|n| n.len() == depth);
    let mut alts = Vec::new();
    if !terminal {
        alts.push(Expr::empty());
    }
    // The names continuing below, grouped by their next character (contiguous: sorted).
    let below: Vec<&Vec<char>> = names.iter().filter(|n| n.len() > depth).collect();
    let mut children: Vec<char> = below.iter().map(|n| n[depth]).collect();
    children.dedup();
    alts.push(not_starting(cx, &children, tail, outside)?);
    let start = names.len() - below.len();
    let mut i = start;
    while i < names.len() {
        let c = names[i][depth];
        let mut j = i + 1;
        while j < names.len() && names[j][depth] == c {
            j += 1;
        }
        let sub = trie_node(cx, &names[i..j], depth + 1, share, tail, outside)?;
        alts.push(Expr::seq([enc_class(&[(c, c)]), sub]));
        i = j;
    }
    Ok(alt_of(alts))
}

/// Strings that do not start with one of `children` (sorted, distinct): the empty string
/// excluded, anything may follow the first character. One rule per set of next characters,
/// shared by every node with that set (most nodes of a suffix have one next character),
/// rather than a class and its alternatives at every node.
fn not_starting(cx: &mut Compiler, children: &[char], tail: &Expr, outside: &Expr) -> CompileResult<Expr> {
    let key = format!("not-starting {}", children.iter().collect::<String>());
    cx.shared(&key, "key-not-starting", |_| {
        let ranges: Vec<(char, char)> = children.iter().map(|&c| (c, c)).collect();
        let others = formwork_grammar::ir::complement(&normalize_ranges(ranges));
        let mut any = Vec::new();
        if children.iter().all(|&c| PLAIN.iter().any(|&(a, b)| a <= c && c <= b)) {
            // The others are the plain characters left (raw only) and everything outside.
            let plain_left = intersect(&others, &PLAIN);
            if !plain_left.is_empty() {
                any.push(Expr::seq([Expr::Class(plain_left), tail.clone()]));
            }
            any.push(outside.clone());
        } else {
            let first = enc_class(&others);
            if !crate::exprs::is_nothing(&first) {
                any.push(Expr::seq([first, tail.clone()]));
            }
        }
        Ok(alt_of(any))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use formwork_grammar::{matcher::accepts, GrammarBuilder, Limits};

    fn accepts_all(e: Expr, yes: &[&str], no: &[&str]) {
        let mut b = GrammarBuilder::new();
        b.define("root", e);
        let g = b.build("root").unwrap();
        for s in yes {
            assert!(accepts(&g, s.as_bytes(), &Limits::default()).unwrap(), "{s:?} is rejected");
        }
        for s in no {
            assert!(!accepts(&g, s.as_bytes(), &Limits::default()).unwrap(), "{s:?} is accepted");
        }
    }

    /// The complement trie holds every string over a small alphabet but the names: a name
    /// that is a prefix of another, the empty name, names sharing a suffix, and a name left
    /// alone under a branch (its suffix's shared rule).
    #[test]
    fn excluding_accepts_exactly_the_other_strings() {
        for names in [vec!["ab", "abc", "b", ""], vec!["cab", "ab", "bab"], vec!["a"], vec!["abca", "abcb", "ba"]] {
            let opts = crate::SchemaOptions::default();
            let mut cx = Compiler::new(&serde_json::json!({}), std::borrow::Cow::Borrowed(&opts));
            let names: Vec<String> = names.into_iter().map(String::from).collect();
            let e = excluding(&mut cx, &names, "key").unwrap();
            cx.b.define("root", e);
            let g = cx.b.build("root").unwrap();
            let mut strings = vec![String::new()];
            for len in 1..=5 {
                let mut next = Vec::new();
                for s in strings.iter().filter(|s| s.len() == len - 1) {
                    for c in ['a', 'b', 'c'] {
                        next.push(format!("{s}{c}"));
                    }
                }
                strings.extend(next);
            }
            for s in strings.iter().chain([&"a b".to_string(), &"\\\\".to_string()]) {
                let expected = !names.contains(s);
                assert_eq!(accepts(&g, s.as_bytes(), &Limits::default()).unwrap(), expected, "{s:?} with names {names:?}");
            }
        }
    }

    /// The escapes share their backslash; every encoding is still there, and nothing else.
    #[test]
    fn encodings_are_exact() {
        accepts_all(
            enc_class(&[('"', '"'), ('\n', '\n'), ('a', 'a'), ('\u{1f}', '\u{1f}')]),
            &["a", "\\\"", "\\n", "\\u000a", "\\u000A", "\\u001f", "\\u001F"],
            &["\"", "\n", "\\", "\\u000b", "\\u0022", "\\a", "b", "\\u00"],
        );
        accepts_all(
            any_char(),
            &["a", "é", "😀", "\\\"", "\\\\", "\\/", "\\b", "\\t", "\\u0000", "\\u00e9", "\\uFFFF", "\\ud83d\\ude00", "\\uD83D\\uDE00"],
            &["\"", "\\", "\\x", "\\u12", "\\ud83d", "\\ude00", "\\ud83d\\u0041", "\n"],
        );
    }
}
