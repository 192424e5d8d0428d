//! The grammar IR.
//!
//! A [`Grammar`] is a list of named rules; each rule's body is an [`Expr`] tree. Text is
//! Unicode: literals are strings and classes are code-point ranges; the matcher lowers them
//! to UTF-8 bytes. Every front end (GBNF, the JSON grammar, JSON Schema, regex) produces
//! this IR, and [`Grammar`] values exist only through [`GrammarBuilder::build`], which
//! checks the invariants below.
//!
//! ## Invariants of a built [`Grammar`]
//! - every [`Expr::Rule`] refers to a rule of this grammar (ids index `rules`);
//! - rule names are unique; `root` is a valid rule;
//! - classes are normalized: ranges sorted, non-overlapping, non-adjacent, non-empty
//!   (a negated GBNF class is resolved to its complement at construction);
//! - `Alt` has at least one branch; `Repeat` has `min <= max`.
//!
//! `Seq(vec![])` is the empty string; `Class(vec![])` matches nothing.

use formwork_vocab::TokenId;
use std::fmt;

/// Index of a rule in [`Grammar::rules`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RuleId(pub u32);

impl RuleId {
    /// The id as an index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A token named by a grammar (GBNF `<[123]>` or `<|im_end|>`), in [`Expr::Token`] and
/// [`Expr::NotToken`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TokenRef {
    /// By id.
    Id(TokenId),
    /// By name, resolved against the vocabulary when the grammar is compiled.
    Name(String),
}

/// A grammar expression.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    /// Exactly this text.
    Literal(String),
    /// One code point in one of these inclusive ranges (normalized; see module docs).
    Class(Vec<(char, char)>),
    /// Each in turn. Empty means the empty string.
    Seq(Vec<Expr>),
    /// Any one of these (at least one).
    Alt(Vec<Expr>),
    /// `expr` repeated `min..=max` times (`max: None` = unbounded).
    Repeat {
        /// The repeated expression.
        expr: Box<Expr>,
        /// Least count.
        min: u32,
        /// Greatest count, or unbounded.
        max: Option<u32>,
    },
    /// A reference to another rule.
    Rule(RuleId),
    /// One special token, produced only where the grammar names it.
    Token(TokenRef),
    /// Any one token of the vocabulary except this one (GBNF `!<[123]>`, llama.cpp's
    /// negated token reference), matched as a whole token: text or special, never an
    /// end-of-sequence token (those only end an input the grammar accepts) nor an unused
    /// slot. Text written byte by byte never matches it (a byte-level check without a
    /// vocabulary treats it, like [`Expr::Token`], as matching nothing).
    NotToken(TokenRef),
    /// Members in any order, each listed one at most once: a JSON object's body (see
    /// [`Unordered`]). Not expressible in GBNF (a permutation language has no small
    /// context-free grammar); the matcher builds the rules for each set of members seen
    /// on first use.
    Unordered(Box<Unordered>),
}

/// The language of [`Expr::Unordered`]: zero or more members separated by `sep`, where each
/// listed member appears at most once and every required one appears, any number of `extra`
/// members may appear (when given), the count of members (listed and extra) is within
/// `min..=max`, and the set of listed members present satisfies every clause of
/// `presence`. Members must not match the empty string (they start with a key), and
/// listed members and `extra` should be disjoint languages (distinct keys), so that each
/// member of an input is one listed member or an extra one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Unordered {
    /// The listed members (a key, `:` and its value), with whether each is required.
    pub members: Vec<(Expr, bool)>,
    /// Members beyond the listed ones (additional properties), repeatable; `None`: none.
    pub extra: Option<Expr>,
    /// Between two members (`ws "," ws`).
    pub sep: Expr,
    /// Fewest members in all.
    pub min: u32,
    /// Most members in all (`None`: unbounded).
    pub max: Option<u32>,
    /// Conditions on which listed members are present, all of which must hold when the
    /// group ends: each clause is satisfied by any one of its terms. A JSON object's
    /// `anyOf` of `required` lists, its dependencies and `not: {required: ...}` are such
    /// clauses, kept here instead of distributing the object over them. Empty: none.
    pub presence: Vec<Vec<Presence>>,
}

/// One term of a presence clause (see [`Unordered::presence`]): these listed members (by
/// index) are present and those are absent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Presence {
    /// Members that must be present.
    pub present: Vec<u32>,
    /// Members that must be absent.
    pub absent: Vec<u32>,
}

impl Unordered {
    /// The expressions inside, in order: members, extra, separator.
    pub fn parts(&self) -> impl Iterator<Item = &Expr> {
        self.members.iter().map(|(e, _)| e).chain(self.extra.iter()).chain(std::iter::once(&self.sep))
    }
}

impl Expr {
    /// The empty string.
    pub fn empty() -> Expr {
        Expr::Seq(Vec::new())
    }

    /// A literal.
    pub fn lit(s: impl Into<String>) -> Expr {
        Expr::Literal(s.into())
    }

    /// A class from arbitrary ranges (normalized here; `negated` takes the complement over
    /// all Unicode scalar values).
    pub fn class(ranges: impl IntoIterator<Item = (char, char)>, negated: bool) -> Expr {
        let mut r = normalize_ranges(ranges.into_iter().collect());
        if negated {
            r = complement(&r);
        }
        Expr::Class(r)
    }

    /// Any single code point (GBNF `.`).
    pub fn any_char() -> Expr {
        Expr::Class(vec![('\0', char::MAX)])
    }

    /// `e?`
    pub fn opt(e: Expr) -> Expr {
        Expr::Repeat { expr: Box::new(e), min: 0, max: Some(1) }
    }

    /// `e*`
    pub fn star(e: Expr) -> Expr {
        Expr::Repeat { expr: Box::new(e), min: 0, max: None }
    }

    /// `e+`
    pub fn plus(e: Expr) -> Expr {
        Expr::Repeat { expr: Box::new(e), min: 1, max: None }
    }

    /// `e{min,max}`
    pub fn repeat(e: Expr, min: u32, max: Option<u32>) -> Expr {
        Expr::Repeat { expr: Box::new(e), min, max }
    }

    /// A sequence, flattening nested sequences and dropping empty ones.
    pub fn seq(items: impl IntoIterator<Item = Expr>) -> Expr {
        let mut out = Vec::new();
        for e in items {
            match e {
                Expr::Seq(inner) => out.extend(inner),
                e => out.push(e),
            }
        }
        if out.len() == 1 {
            out.pop().unwrap()
        } else {
            Expr::Seq(out)
        }
    }

    /// An alternation (a single branch is returned as is). Panics on zero branches: use
    /// `Expr::Class(vec![])` for "matches nothing".
    pub fn alt(items: impl IntoIterator<Item = Expr>) -> Expr {
        let mut out: Vec<Expr> = items.into_iter().collect();
        assert!(!out.is_empty(), "Expr::alt needs at least one branch");
        if out.len() == 1 {
            out.pop().unwrap()
        } else {
            Expr::Alt(out)
        }
    }
}

/// Sorts and merges ranges (dropping inverted ones).
pub fn normalize_ranges(mut r: Vec<(char, char)>) -> Vec<(char, char)> {
    r.retain(|(a, b)| a <= b);
    r.sort();
    let mut out: Vec<(char, char)> = Vec::with_capacity(r.len());
    for (a, b) in r {
        if let Some(last) = out.last_mut() {
            if (a as u32) <= (last.1 as u32).saturating_add(1) || (last.1 == '\u{D7FF}' && a == '\u{E000}') {
                if b > last.1 {
                    last.1 = b;
                }
                continue;
            }
        }
        out.push((a, b));
    }
    out
}

/// Is `r` what [`normalize_ranges`] makes of it (ranges non-empty, sorted, neither
/// overlapping nor adjacent)? Checked without building the normalized copy.
pub fn is_normalized(r: &[(char, char)]) -> bool {
    r.iter().all(|(a, b)| a <= b)
        && r.windows(2).all(|w| {
            let (p, q) = (w[0], w[1]);
            (q.0 as u32) > (p.1 as u32).saturating_add(1) && !(p.1 == '\u{D7FF}' && q.0 == '\u{E000}')
        })
}

/// The complement of normalized ranges over all Unicode scalar values.
pub fn complement(r: &[(char, char)]) -> Vec<(char, char)> {
    fn next(c: char) -> Option<char> {
        match c {
            '\u{D7FF}' => Some('\u{E000}'),
            char::MAX => None,
            c => char::from_u32(c as u32 + 1),
        }
    }
    fn prev(c: char) -> Option<char> {
        match c {
            '\u{E000}' => Some('\u{D7FF}'),
            '\0' => None,
            c => char::from_u32(c as u32 - 1),
        }
    }
    let mut out = Vec::new();
    let mut lo = Some('\0');
    for &(a, b) in r {
        if let (Some(l), Some(p)) = (lo, prev(a)) {
            if l <= p {
                out.push((l, p));
            }
        }
        lo = next(b);
    }
    if let Some(l) = lo {
        out.push((l, char::MAX));
    }
    out
}

/// A named rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Rule {
    /// The rule's name (unique in its grammar).
    pub name: String,
    /// Its body.
    pub expr: Expr,
}

/// A checked grammar; see the module docs for its invariants.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Grammar {
    rules: Vec<Rule>,
    root: RuleId,
}

impl Grammar {
    /// The rules, indexed by [`RuleId`].
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// One rule.
    pub fn rule(&self, id: RuleId) -> &Rule {
        &self.rules[id.index()]
    }

    /// The start rule.
    pub fn root(&self) -> RuleId {
        self.root
    }

    /// A stable 64-bit hash of the grammar, for cache keys.
    pub fn fingerprint(&self) -> u64 {
        // The Debug form is canonical for a built grammar; FNV-1a keeps it stable across runs.
        let s = format!("{:?}", self);
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in s.bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h
    }
}

impl Grammar {
    /// A grammar of `rules` rooted at `root`, checked as [`GrammarBuilder::build`] checks
    /// (for parts of a grammar lowered on their own, module `matcher::lower::deferred`).
    pub(crate) fn from_rules(rules: Vec<Rule>, root: RuleId) -> Result<Grammar, IrError> {
        let mut stack = Vec::new();
        for r in &rules {
            check(&r.expr, &r.name, rules.len(), &mut stack)?;
        }
        Ok(Grammar { rules, root })
    }
}

/// An error building a grammar.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IrError {
    /// A rule was declared but never defined.
    #[error("rule `{0}` is used but never defined")]
    Undefined(String),
    /// A rule was defined twice.
    #[error("rule `{0}` is defined twice")]
    Duplicate(String),
    /// The root rule is missing.
    #[error("no `{0}` rule: a grammar needs a start rule")]
    NoRoot(String),
    /// An empty alternation, or a repetition with min > max.
    #[error("malformed expression in rule `{rule}`: {what}")]
    Malformed {
        /// The rule.
        rule: String,
        /// What was wrong.
        what: String,
    },
}

/// Builds a [`Grammar`]: declare rules by name (forward references allowed), define them,
/// then [`build`](GrammarBuilder::build) with the root's name.
#[derive(Default, Debug)]
pub struct GrammarBuilder {
    names: Vec<String>,
    bodies: Vec<Option<Expr>>,
    /// Names come from untrusted schemas and grammars: a seeded hasher (foldhash), fast but
    /// not open to chosen collisions.
    by_name: foldhash::HashMap<String, RuleId>,
    duplicate: Option<String>,
    /// Per base name given to [`fresh_name`](GrammarBuilder::fresh_name): the suffix to try
    /// next, so that n fresh names from one base cost O(n), not O(n²).
    next_fresh: std::cell::RefCell<foldhash::HashMap<String, u32>>,
}

impl GrammarBuilder {
    /// A new, empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// The id for `name`, declaring it if new.
    pub fn rule_id(&mut self, name: &str) -> RuleId {
        if let Some(&id) = self.by_name.get(name) {
            return id;
        }
        let id = RuleId(self.names.len() as u32);
        self.names.push(name.to_string());
        self.bodies.push(None);
        self.by_name.insert(name.to_string(), id);
        id
    }

    /// A fresh rule name starting with `base` that is not yet used (for generated helper rules).
    pub fn fresh_name(&self, base: &str) -> String {
        if !self.by_name.contains_key(base) {
            return base.to_string();
        }
        // Names are only ever added, so a suffix found taken stays taken: start from the
        // last one this base gave out.
        let mut next = self.next_fresh.borrow_mut();
        let i = next.entry(base.to_string()).or_insert(1);
        loop {
            let n = format!("{base}-{i}");
            *i += 1;
            if !self.by_name.contains_key(&n) {
                return n;
            }
        }
    }

    /// Defines `name` (declaring it if new). Defining a rule twice is reported by `build`.
    pub fn define(&mut self, name: &str, expr: Expr) -> RuleId {
        let id = self.rule_id(name);
        if self.bodies[id.index()].is_some() && self.duplicate.is_none() {
            self.duplicate = Some(name.to_string());
        }
        self.bodies[id.index()] = Some(expr);
        id
    }

    /// True when `name` has a body.
    pub fn is_defined(&self, name: &str) -> bool {
        self.by_name.get(name).is_some_and(|id| self.bodies[id.index()].is_some())
    }

    /// Number of rules declared so far.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when no rule is declared.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Checks the invariants and returns the grammar rooted at `root`.
    pub fn build(self, root: &str) -> Result<Grammar, IrError> {
        if let Some(d) = self.duplicate {
            return Err(IrError::Duplicate(d));
        }
        let root = *self.by_name.get(root).ok_or_else(|| IrError::NoRoot(root.to_string()))?;
        let n = self.names.len();
        let mut rules = Vec::with_capacity(n);
        for (name, body) in self.names.into_iter().zip(self.bodies) {
            let expr = body.ok_or_else(|| IrError::Undefined(name.clone()))?;
            rules.push(Rule { name, expr });
        }
        // One walk per rule checks its invariants and references (a large schema's grammar
        // has hundreds of thousands of nodes; the walk is bound by reading them).
        let mut stack = Vec::new();
        for r in &rules {
            check(&r.expr, &r.name, n, &mut stack)?;
        }
        Ok(Grammar { rules, root })
    }
}

impl GrammarBuilder {
    /// [`build`](Self::build), keeping the builder for more rules: the grammar takes the
    /// rules' bodies (not their names), and rules declared and defined later continue its
    /// numbering (for grammars with deferred rules, see [`LazyGrammar`](crate::LazyGrammar)).
    pub fn build_so_far(&mut self, root: &str) -> Result<Grammar, IrError> {
        if let Some(d) = &self.duplicate {
            return Err(IrError::Duplicate(d.clone()));
        }
        let root = *self.by_name.get(root).ok_or_else(|| IrError::NoRoot(root.to_string()))?;
        let n = self.names.len();
        let mut rules = Vec::with_capacity(n);
        for (name, body) in self.names.iter().zip(&mut self.bodies) {
            let expr = body.take().ok_or_else(|| IrError::Undefined(name.clone()))?;
            rules.push(Rule { name: name.clone(), expr });
        }
        let mut stack = Vec::new();
        for r in &rules {
            check(&r.expr, &r.name, n, &mut stack)?;
        }
        Ok(Grammar { rules, root })
    }

    /// Takes rule `id`'s body, with its name (`None` when it has none).
    pub fn take_rule(&mut self, id: RuleId) -> Option<Rule> {
        let expr = self.bodies.get_mut(id.index())?.take()?;
        Some(Rule { name: self.names[id.index()].clone(), expr })
    }
}

/// Checks `e`, of rule `rule`, in a grammar of `n` rules; `stack` is scratch.
fn check<'e>(e: &'e Expr, rule: &str, n: usize, stack: &mut Vec<&'e Expr>) -> Result<(), IrError> {
    // Iterative walk: user grammars may be deeply nested.
    stack.clear();
    stack.push(e);
    while let Some(e) = stack.pop() {
        match e {
            Expr::Rule(id) if id.index() >= n => {
                return Err(IrError::Malformed { rule: rule.into(), what: format!("reference to unknown rule #{}", id.0) })
            }
            Expr::Alt(v) if v.is_empty() => {
                return Err(IrError::Malformed { rule: rule.into(), what: "empty alternation".into() })
            }
            Expr::Alt(v) | Expr::Seq(v) => stack.extend(v),
            Expr::Repeat { expr, min, max } => {
                if max.is_some_and(|m| m < *min) {
                    return Err(IrError::Malformed {
                        rule: rule.into(),
                        what: format!("repetition {{{min},{}}} has min > max", max.unwrap()),
                    });
                }
                stack.push(expr)
            }
            Expr::Class(r) => {
                if !is_normalized(r) {
                    return Err(IrError::Malformed { rule: rule.into(), what: "class not normalized".into() });
                }
            }
            Expr::Unordered(u) => {
                if u.max.is_some_and(|m| m < u.min) {
                    return Err(IrError::Malformed { rule: rule.into(), what: "unordered group with min > max".into() });
                }
                let n = u.members.len() as u32;
                if u.presence.iter().flatten().any(|t| t.present.iter().chain(&t.absent).any(|&i| i >= n)) {
                    return Err(IrError::Malformed { rule: rule.into(), what: "unordered group with a presence term naming no member".into() });
                }
                stack.extend(u.parts())
            }
            _ => {}
        }
    }
    Ok(())
}

impl fmt::Display for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_resolves_forward_references() {
        let mut b = GrammarBuilder::new();
        let item = b.rule_id("item");
        b.define("root", Expr::seq([Expr::lit("["), Expr::star(Expr::Rule(item)), Expr::lit("]")]));
        b.define("item", Expr::class([('a', 'z')], false));
        let g = b.build("root").unwrap();
        assert_eq!(g.rules().len(), 2);
        assert_eq!(g.rule(g.root()).name, "root");
    }

    #[test]
    fn builder_reports_undefined_and_duplicates() {
        let mut b = GrammarBuilder::new();
        let x = b.rule_id("x");
        b.define("root", Expr::Rule(x));
        assert_eq!(b.build("root"), Err(IrError::Undefined("x".into())));
        let mut b = GrammarBuilder::new();
        b.define("root", Expr::lit("a"));
        b.define("root", Expr::lit("b"));
        assert_eq!(b.build("root"), Err(IrError::Duplicate("root".into())));
        assert!(matches!(GrammarBuilder::new().build("root"), Err(IrError::NoRoot(_))));
    }

    #[test]
    fn classes_normalize_and_complement() {
        assert_eq!(Expr::class([('b', 'c'), ('a', 'a'), ('x', 'z')], false), Expr::Class(vec![('a', 'c'), ('x', 'z')]));
        let Expr::Class(r) = Expr::class([('\0', 'a')], true) else { panic!() };
        assert_eq!(r, vec![('b', char::MAX)]);
        assert_eq!(complement(&complement(&[('a', 'z')])), vec![('a', 'z')]);
    }

    #[test]
    fn is_normalized_agrees_with_normalize_ranges() {
        let cases: Vec<Vec<(char, char)>> = vec![
            vec![],
            vec![('a', 'c'), ('x', 'z')],
            vec![('a', 'c'), ('d', 'z')],
            vec![('a', 'c'), ('c', 'z')],
            vec![('x', 'z'), ('a', 'c')],
            vec![('c', 'a')],
            vec![('a', 'a'), ('a', 'a')],
            vec![('\0', '\u{D7FF}'), ('\u{E000}', char::MAX)],
            vec![('\0', '\u{D7FE}'), ('\u{E000}', char::MAX)],
            vec![('a', 'b'), ('d', 'e'), ('g', 'g')],
        ];
        for c in cases {
            assert_eq!(is_normalized(&c), normalize_ranges(c.clone()) == c, "{c:?}");
        }
    }
}
