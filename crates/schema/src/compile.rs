//! The recursive compiler: a conjunction of schema locations becomes a rule (memoized, so
//! recursion closes); `$ref`/`allOf` are flattened, the combinators (`anyOf`, `oneOf`,
//! `if`/`then`/`else`, dependencies, `not`) rewritten into conjunctions, and what is left
//! dispatched by type: numbers and strings to their emitters (`crate::number`,
//! `crate::string`), arrays and objects to the children here, which recurse into their
//! members through [`Compiler::schema`].
//!
//! The arrows point down: this module uses the compiler's state (`crate::compiler`) and the
//! leaf emitters; none of them uses this module.

use crate::compiler::{CompileResult, Compiler, MemoKey};
use crate::conjunct::*;
use crate::exprs::*;
use crate::json_types::*;
use crate::resolve::escape_ptr;
use crate::{SchemaError, SchemaErrorKind, SchemaOptions, Warning, Whitespace};
use formwork_grammar::{Expr, Grammar};
use serde_json::{Map, Value};
use std::sync::Arc;

mod array;
mod lazy;
mod object;

/// Most parts one alternative of an overlapping `oneOf` (a branch and the negations of the
/// branches it may overlap) may distribute into (see `Compiler::conjunction`): the product
/// of the negations' widths. (Before, at most 6 branches, each negation of width ≤ 2 in
/// practice.)
const MAX_ONEOF_PARTS: usize = 64;

pub use lazy::{compile_lazy, compile_lazy_shared};

/// Compiles `schema` to a grammar rooted at `root`.
pub fn compile(schema: &Value, opts: &SchemaOptions) -> Result<Grammar, SchemaError> {
    compile_with_warnings(schema, opts).map(|(g, _)| g)
}

/// [`compile`], also returning the keywords that lenient mode left unenforced.
pub fn compile_with_warnings(schema: &Value, opts: &SchemaOptions) -> Result<(Grammar, Vec<Warning>), SchemaError> {
    check_size(schema, opts)?;
    let mut cx = Compiler::new(schema, std::borrow::Cow::Borrowed(opts));
    compile_root(&mut cx)?;
    let g = cx.b.build("root").map_err(|e| err(SchemaErrorKind::Grammar(e.to_string()), ""))?;
    tracing::debug!(rules = g.rules().len(), warnings = cx.warnings.len(), "compiled JSON schema");
    Ok((g, cx.warnings))
}

/// Refuses a schema over `Limits::max_source_bytes`.
fn check_size(schema: &Value, opts: &SchemaOptions) -> Result<(), SchemaError> {
    let size = serialized_size(schema, opts.limits.max_source_bytes);
    if size > opts.limits.max_source_bytes {
        return Err(err(
            SchemaErrorKind::Limit { limit: "max_source_bytes", why: format!("the schema is more than {} bytes (the limit) as compact JSON", opts.limits.max_source_bytes) },
            "",
        ));
    }
    Ok(())
}

/// Compiles the root of `cx`'s schema and defines rule `root`.
fn compile_root(cx: &mut Compiler<'_>) -> Result<(), SchemaError> {
    let opts = cx.opts.clone();
    cx.force_first = opts.force_first_key.clone();
    let root = cx.root_part();
    let body = cx.schema(vec![root])?;
    if let Some(k) = opts.force_first_key.as_ref().filter(|_| !cx.force_first_applied) {
        return Err(err(
            SchemaErrorKind::Invalid {
                keyword: "properties".into(),
                why: format!("the key to put first, `{k}`, is not a property of the root object"),
            },
            "",
        ));
    }
    // (`ws` is empty unless the style is flexible.)
    let ws = if opts.root_whitespace { cx.ws.clone() } else { Expr::empty() };
    cx.b.define("root", Expr::seq([ws.clone(), body, ws]));
    Ok(())
}

/// The length of `v` serialized as compact JSON (as `serde_json::to_vec` writes it), counted
/// without building the text, and only up to just past `limit` (a larger schema is refused
/// anyway). Counted over the tree rather than through `serde_json`'s serializer, which
/// escapes a string in three writes and a loop over its bytes: counting over the tree took
/// the schema compile's instructions down 6.9 % on half A's 30 largest files and 4.7 % on
/// half B's at stop 54, for a check every compile makes.
fn serialized_size(v: &Value, limit: usize) -> usize {
    let mut n = 0;
    json_len(v, limit, &mut n);
    n
}

/// Adds `v`'s compact JSON length to `n`; `false` once `n` is past `limit`.
fn json_len(v: &Value, limit: usize, n: &mut usize) -> bool {
    match v {
        Value::Null | Value::Bool(true) => *n += 4,
        Value::Bool(false) => *n += 5,
        // Numbers are few in a schema: their text as the serializer writes it.
        Value::Number(x) => *n += x.to_string().len(),
        Value::String(s) => *n += string_len(s),
        Value::Array(a) => {
            *n += 2 + a.len().saturating_sub(1);
            for x in a {
                if !json_len(x, limit, n) {
                    return false;
                }
            }
        }
        Value::Object(o) => {
            // Braces, a colon per member and the commas between them.
            *n += 2 + 2 * o.len() - usize::from(!o.is_empty());
            for (k, x) in o {
                *n += string_len(k);
                if !json_len(x, limit, n) {
                    return false;
                }
            }
        }
    }
    *n <= limit
}

/// A string's length as a JSON string: its quotes, and its bytes with `"`, `\` and the
/// control characters escaped (`\n` and four others in two characters, the rest as
/// `\u00XX`); nothing else is escaped.
fn string_len(s: &str) -> usize {
    let special = |b: u8| b < 0x20 || b == b'"' || b == b'\\';
    // Nearly every string has nothing to escape: counted in runs of at most 255 bytes into a
    // byte-wide count, a loop the compiler vectorizes (descriptions make most of a large
    // schema's bytes).
    let count: usize = s
        .as_bytes()
        .chunks(255)
        .map(|run| run.iter().fold(0u8, |c, &b| c + u8::from(b < 0x20) + u8::from(b == b'"') + u8::from(b == b'\\')) as usize)
        .sum();
    if count == 0 {
        return s.len() + 2;
    }
    let extra: usize = s
        .bytes()
        .filter(|&b| special(b))
        .map(|b| match b {
            b'"' | b'\\' | b'\x08' | b'\t' | b'\n' | b'\x0c' | b'\r' => 1,
            _ => 5,
        })
        .sum();
    s.len() + 2 + extra
}

const ANNOTATIONS_AND_HANDLED: &[&str] = &[
    // handled
    "type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties", "propertyNames",
    "minProperties", "maxProperties", "items", "prefixItems", "additionalItems", "minItems", "maxItems", "contains",
    "minContains", "maxContains", "uniqueItems", "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "anyOf", "oneOf", "allOf", "not", "if", "then", "else",
    "dependentRequired", "dependentSchemas", "dependencies", "$ref", "$defs", "definitions", "$anchor", "$id", "id",
    "$schema", "$dynamicAnchor", "x-formwork-not-values", "x-formwork-not-pattern", "x-formwork-non-integral",
    "x-formwork-some-key", "x-formwork-not-multiple-of",
];

/// Keywords that constrain values but are not enforced.
const REFUSED: &[(&str, &str)] = &[
    ("unevaluatedProperties", "depends on which subschemas evaluated each property at run time"),
    ("unevaluatedItems", "depends on which subschemas evaluated each item at run time"),
    ("$dynamicRef", "dynamic scopes are not supported"),
    ("$recursiveRef", "dynamic scopes are not supported"),
];

impl Compiler<'_> {
    /// The grammar for a conjunction of schemas; one rule per distinct conjunction of real
    /// locations (so recursion terminates).
    pub fn schema(&mut self, parts: Vec<Conjunct>) -> CompileResult<Expr> {
        let at = parts.first().map(|p| p.at.clone()).unwrap_or_default();
        self.check_limits(&at)?;
        let key: Option<MemoKey> = parts.iter().map(|p| p.key()).collect::<Option<Vec<_>>>().map(|parts| MemoKey {
            parts,
            // Indentation depends on the level: one rule per level (capped, past which the
            // layout is compact and the same at every level, so recursion still closes).
            level: match self.opts.whitespace {
                Whitespace::Pretty { .. } => self.level.min(crate::layout::PRETTY_MAX_LEVEL),
                _ => 0,
            },
        });
        if let Some(k) = &key {
            if let Some(&id) = self.memo.get(k) {
                return Ok(if self.nothing_rules.contains(&id) { nothing() } else { Expr::Rule(id) });
            }
        }
        if self.depth >= self.opts.limits.max_nesting {
            return Err(err(
                SchemaErrorKind::Limit { limit: "max_nesting", why: format!("schemas nest deeper than {}", self.opts.limits.max_nesting) },
                at,
            ));
        }
        match key {
            Some(k) => {
                let base = if at.is_empty() { "schema".to_string() } else { rule_name(&at) };
                let name = self.b.fresh_name(&base);
                let id = self.b.rule_id(&name);
                self.memo.insert(k, id);
                if self.lazy.is_some() && self.may_defer(&parts) {
                    self.defer(id, name, parts);
                    return Ok(Expr::Rule(id));
                }
                if self.define_location(&name, parts)? {
                    // Matches nothing: said as such, so that callers drop what holds it (an
                    // object member whose value matches nothing is no member).
                    self.nothing_rules.insert(id);
                    return Ok(nothing());
                }
                Ok(Expr::Rule(id))
            }
            None => {
                self.depth += 1;
                let body = self.conjunction(parts);
                self.depth -= 1;
                body
            }
        }
    }

    /// Compiles the location of `parts` one level of nesting down and defines it as rule
    /// `name` (now, or when a deferred rule is built: `lazy`); true when it matches nothing.
    pub(crate) fn define_location(&mut self, name: &str, parts: Vec<Conjunct>) -> CompileResult<bool> {
        self.depth += 1;
        let body = self.conjunction(parts);
        self.depth -= 1;
        let body = body?;
        let none = is_nothing(&body);
        self.b.define(name, body);
        Ok(none)
    }

    /// Expands `$ref` and `allOf` into a flat list; `Ok(None)` means the conjunction is empty
    /// (a `false` schema).
    fn flatten(&mut self, parts: Vec<Conjunct>) -> CompileResult<Option<Vec<Conjunct>>> {
        let mut out: Vec<Conjunct> = Vec::new();
        let mut queue: std::collections::VecDeque<Conjunct> = parts.into();
        let mut seen: rustc_hash::FxHashSet<crate::conjunct::PartKey> = Default::default();
        while let Some(mut p) = queue.pop_front() {
            let max = self.opts.limits.max_elements;
            if out.len() + queue.len() > max {
                return Err(err(SchemaErrorKind::Limit { limit: "max_elements", why: format!("allOf/$ref expansion has more than {max} conjuncts") }, p.at.clone()));
            }
            match p.value() {
                Value::Bool(true) => continue,
                Value::Bool(false) => return Ok(None),
                Value::Object(_) => {}
                _ => return Err(invalid("schema", "a schema must be an object or a boolean", p.at.clone())),
            }
            if let Some(k) = p.key() {
                if !seen.insert(k) {
                    continue; // a conjunction is idempotent
                }
            }
            let mut children: Vec<Conjunct> = Vec::new();
            if !p.consumed.contains(Consumed::REF) && p.obj().is_some_and(|o| o.contains_key("$ref")) {
                let target = self.resolve_ref(&p, "$ref")?;
                p.consumed |= Consumed::REF;
                if self.draft(&p).ref_overrides_siblings() {
                    p.consumed |= Consumed::REF_ONLY;
                }
                children.push(target);
            }
            if !p.consumed.contains(Consumed::ALLOF) {
                if let Some(all) = p.get("allOf") {
                    let n = all.as_array().ok_or_else(|| invalid("allOf", "must be an array", p.kw_ptr("allOf")))?.len();
                    for i in 0..n {
                        children.push(p.sub(&format!("/allOf/{i}")));
                    }
                    p.consumed |= Consumed::ALLOF;
                }
            }
            // Depth-first, so properties keep the order in which the schema lists them.
            for c in children.into_iter().rev() {
                queue.push_front(c);
            }
            out.push(p);
        }
        Ok(Some(out))
    }

    /// Does the conjunction hold a schema and its negation: a part `{"not": {"$ref": r}}` (as
    /// a negation leaves below the negated instance, see `negate`) beside the whole of `r`'s
    /// target? `S` and not `S` match nothing, and saying so here spares distributing `S`'s
    /// combinators over the negation (the exact form of a `oneOf` whose overlapping branches
    /// share their properties' definitions meets this in every alternative: each branch
    /// conjoined with "some property fails" of the other).
    fn contradicts(&mut self, parts: &[Conjunct]) -> CompileResult<bool> {
        // Whole: nothing of it distributed but its `$ref`/`allOf`, which the flattened
        // conjunction holds as parts of their own.
        let whole = Consumed::REF | Consumed::ALLOF | Consumed::REF_ONLY;
        for p in parts {
            if p.consumed.contains(Consumed::NOT) {
                continue;
            }
            let Some(Value::Object(n)) = p.get("not") else { continue };
            if n.len() != 1 || !n.contains_key("$ref") {
                continue;
            }
            let Ok(target) = self.resolve_ref(&p.sub("/not"), "$ref") else { continue };
            if !target.real {
                continue;
            }
            let t: *const Value = target.value();
            if parts.iter().any(|q| q.real && q.doc == target.doc && whole.contains(q.consumed) && std::ptr::eq(q.value(), t)) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Compiles a conjunction of parts: `$ref` and `allOf` expanded ([`flatten`](Self::flatten)),
    /// then the first combinator left (`anyOf`, `oneOf`, `if`, dependencies, `not`)
    /// distributed over its branches, each branch a conjunction again; with none left, the
    /// parts go to [`flat_conjunction`](Self::flat_conjunction).
    fn conjunction(&mut self, parts: Vec<Conjunct>) -> CompileResult<Expr> {
        let Some(mut parts) = self.flatten(parts)? else { return Ok(nothing()) };
        if self.contradicts(&parts)? {
            return Ok(nothing());
        }
        if parts.is_empty() {
            let root = Arc::new(Value::Object(Map::new()));
            parts.push(Conjunct { node: Conjunct::locate(&root, ""), root, ptr: String::new(), doc: 0, at: String::new(), real: false, derived: false, consumed: Consumed::empty(), content: None });
        }
        // Conditions on which keys an object has stay with the object (see `presence`).
        {
            let (flags, object) = crate::presence::plan(&parts);
            if flags.iter().any(|f| !f.is_empty()) {
                for (p, f) in parts.iter_mut().zip(flags) {
                    p.consumed |= f;
                }
                if object {
                    let mut s = self.synth(serde_json::json!({"type": "object"}), &parts[0], "required");
                    s.derived = false;
                    parts.push(s);
                }
            }
        }
        // Parts whose types do not meet allow nothing: found before distributing, so that a
        // branch dead by its type does not distribute the combinators left.
        let mut met = JsonTypes::all();
        for p in &parts {
            if let Some(t) = p.get("type").and_then(crate::json_types::type_bits) {
                met &= t;
            }
        }
        if met.is_empty() {
            return Ok(nothing());
        }
        // Distribute the first combinator found.
        for i in 0..parts.len() {
            let p = parts[i].clone();
            if p.obj().is_none() {
                continue;
            }
            if !p.consumed.contains(Consumed::ANYOF) && p.get("anyOf").is_some() {
                let n = p.get("anyOf").and_then(|a| a.as_array()).ok_or_else(|| invalid("anyOf", "must be an array", p.kw_ptr("anyOf")))?.len();
                parts[i].consumed |= Consumed::ANYOF;
                let mut alts = Vec::new();
                for j in 0..n {
                    let mut v = parts.clone();
                    v.push(p.sub(&format!("/anyOf/{j}")));
                    alts.push(self.schema(v)?);
                }
                return Ok(alt_of(alts));
            }
            if !p.consumed.contains(Consumed::ONEOF) && p.get("oneOf").is_some() {
                return self.one_of(parts, i);
            }
            if !p.consumed.contains(Consumed::IF) && p.get("if").is_some() {
                parts[i].consumed |= Consumed::IF;
                // `if`/`then`/`else` came with draft 7: before it they are unknown keywords,
                // which constrain nothing.
                if matches!(self.draft(&p), crate::Draft::Draft4 | crate::Draft::Draft6) {
                    continue;
                }
                let (has_then, has_else) = (p.get("then").is_some(), p.get("else").is_some());
                if !has_then && !has_else {
                    continue;
                }
                let cond = p.sub("/if");
                let neg = match crate::negate::negate(self, &cond) {
                    Ok(n) => n,
                    Err(e) => {
                        self.refuse("if", format!("its negation is needed for `else` and cannot be expressed: {}", e), p.kw_ptr("if"))?;
                        return self.schema(parts);
                    }
                };
                let mut a = parts.clone();
                a.push(cond);
                if has_then {
                    a.push(p.sub("/then"));
                }
                let mut b = parts.clone();
                b.push(neg);
                if has_else {
                    b.push(p.sub("/else"));
                }
                let ea = self.schema(a)?;
                let eb = self.schema(b)?;
                return Ok(alt_of(vec![ea, eb]));
            }
            if !p.consumed.contains(Consumed::DEPS) && ["dependentRequired", "dependentSchemas", "dependencies"].iter().any(|k| p.get(k).is_some()) {
                parts[i].consumed |= Consumed::DEPS;
                let mut all = Vec::new();
                for kw in ["dependentRequired", "dependentSchemas", "dependencies"] {
                    let Some(m) = p.get(kw) else { continue };
                    let m = m.as_object().ok_or_else(|| invalid(kw, "must be an object", p.kw_ptr(kw)))?;
                    for (k, d) in m {
                        let absent = serde_json::json!({"properties": {k.clone(): false}});
                        let present = match d {
                            Value::Array(names) => {
                                let mut req = vec![Value::String(k.clone())];
                                req.extend(names.iter().cloned());
                                serde_json::json!({"required": req})
                            }
                            _ => serde_json::json!({"allOf": [{"required": [k]}, {"$ref": format!("#{}/{}/{}", p.ptr, escape_ptr(kw), escape_ptr(k))}]}),
                        };
                        if !p.real && !d.is_array() {
                            self.refuse(kw, "dependent schemas inside a derived schema", p.kw_ptr(kw))?;
                            continue;
                        }
                        all.push(serde_json::json!({"anyOf": [absent, present]}));
                    }
                }
                if all.len() > 8 {
                    self.refuse("dependentRequired", "more than 8 dependencies in one object", p.kw_ptr("dependentRequired"))?;
                    return self.schema(parts);
                }
                let mut s = self.synth(serde_json::json!({"allOf": all}), &p, "dependentRequired");
                s.derived = false;
                // The `$ref`s above are relative to the document root.
                parts.push(s);
                return self.schema(parts);
            }
            if !p.consumed.contains(Consumed::NOT) && p.get("not").is_some() {
                parts[i].consumed |= Consumed::NOT;
                let inner = p.sub("/not");
                match crate::negate::negate(self, &inner) {
                    Ok(n) => parts.push(n),
                    Err(e) => {
                        self.refuse("not", format!("cannot express the negation: {e}"), p.kw_ptr("not"))?;
                    }
                }
                return self.schema(parts);
            }
        }
        self.flat_conjunction(parts)
    }

    /// Part `i`'s `oneOf`, distributed: the union of its live branches, each conjoined with
    /// the other parts, when they are proven pairwise disjoint; else the exact form, each
    /// branch with the negations of the branches it may overlap; else refused.
    fn one_of(&mut self, mut parts: Vec<Conjunct>, i: usize) -> CompileResult<Expr> {
        let p = parts[i].clone();
        let n = p.get("oneOf").and_then(|a| a.as_array()).ok_or_else(|| invalid("oneOf", "must be an array", p.kw_ptr("oneOf")))?.len();
        parts[i].consumed |= Consumed::ONEOF;
        let branches: Vec<Conjunct> = (0..n).map(|j| p.sub(&format!("/oneOf/{j}"))).collect();
        let mut sigs = Vec::new();
        for br in &branches {
            sigs.push(crate::negate::signature(self, &parts, br)?);
        }
        let live: Vec<usize> = (0..n).filter(|&j| !sigs[j].empty).collect();
        // disjoint[a][b], by branch index.
        let mut disjoint = vec![vec![true; n]; n];
        for a in 0..live.len() {
            for b in a + 1..live.len() {
                let d = crate::negate::disjoint(self, &sigs[live[a]], &sigs[live[b]]);
                disjoint[live[a]][live[b]] = d;
                disjoint[live[b]][live[a]] = d;
            }
        }
        let overlapping = (0..live.len()).any(|a| (a + 1..live.len()).any(|b| !disjoint[live[a]][live[b]]));
        // Exact form: each branch with the negations of the branches it may overlap
        // (a branch proven disjoint from all the others is never negated). A
        // negation is a disjunction, and a conjunction of several distributes into
        // the product of their widths: each alternative may distribute into at most
        // MAX_ONEOF_PARTS parts.
        let mut why = String::new();
        if overlapping {
            // negs[i][j]: branch j negated for alternative i. When branch i is a closed
            // object, its keys are the universe of the negation (an
            // `additionalProperties` can then be negated); else one negation serves
            // every alternative. Negations are kept by branch and universe
            // (`Compiler::negations`), for every place this `oneOf` is compiled.
            let mut negs: Vec<Vec<Option<Conjunct>>> = vec![vec![None; n]; n];
            'outer: for &i in &live {
                let universe = crate::negate::closed_keys(self, &branches[i])?;
                for &j in live.iter().filter(|&&j| j != i && !disjoint[i][j]) {
                    let memo = branches[j].key().map(|k| (k, universe.clone()));
                    let neg = match memo.as_ref().and_then(|m| self.negations.get(m)) {
                        Some(c) => Ok(c.clone()),
                        None => crate::negate::negate_within(self, &branches[j], universe.clone()),
                    };
                    if let (Ok(neg), Some(m)) = (&neg, memo) {
                        self.negations.entry(m).or_insert_with(|| neg.clone());
                    }
                    match neg {
                        Ok(neg) => negs[i][j] = Some(neg),
                        Err(e) => {
                            why = format!("; the exact form needs the negation of branch {j}, which cannot be expressed: {e}");
                            break 'outer;
                        }
                    }
                }
            }
            // The alternatives of a negation that can meet branch `i`'s types.
            let width = |c: &Conjunct, types: JsonTypes| {
                c.value().get("anyOf").and_then(Value::as_array).map_or(1, |a| {
                    a.iter().filter(|x| x.get("type").and_then(crate::json_types::type_bits).is_none_or(|t| t.intersects(types))).count().max(1)
                })
            };
            if why.is_empty() {
                for &i in &live {
                    let parts_of_i = live
                        .iter()
                        .filter(|&&j| j != i && !disjoint[i][j])
                        .fold(1usize, |acc, &j| acc.saturating_mul(negs[i][j].as_ref().map_or(1, |c| width(c, sigs[i].types))));
                    if parts_of_i > MAX_ONEOF_PARTS {
                        why = format!("; the exact form of branch {i} (it and the negations of the branches it may overlap) distributes into {parts_of_i} parts (at most {MAX_ONEOF_PARTS})");
                        break;
                    }
                }
            }
            if why.is_empty() {
                let mut alts = Vec::new();
                for &i in &live {
                    let mut v = parts.clone();
                    v.push(branches[i].clone());
                    for &j in live.iter().filter(|&&j| j != i && !disjoint[i][j]) {
                        v.push(negs[i][j].clone().expect("negated above: it overlaps a branch"));
                    }
                    alts.push(self.schema(v)?);
                }
                return Ok(alt_of(alts));
            }
        }
        for a in 0..live.len() {
            for b in a + 1..live.len() {
                if !disjoint[live[a]][live[b]] {
                    self.refuse(
                        "oneOf",
                        format!("branches {} and {} may both match the same instance (formwork enforces oneOf only when branches are provably disjoint (by type, by constant values, by a key one requires and the other forbids, by closed objects that allow no key in common, or by the types of a required property), or when the branches that overlap can be negated){why}", live[a], live[b]),
                        p.kw_ptr("oneOf"),
                    )?;
                }
            }
        }
        // Reached only when no two live branches may overlap (else refused above).
        if !overlapping {
            parts[i].consumed |= Consumed::ONEOF_DISJOINT;
        }
        let mut alts = Vec::new();
        for j in live {
            let mut v = parts.clone();
            v.push(branches[j].clone());
            alts.push(self.schema(v)?);
        }
        Ok(alt_of(alts))
    }

    /// Compiles a flat conjunction (no combinators left): the keyword check, then one
    /// alternative per JSON type the parts allow, each by its type module.
    fn flat_conjunction(&mut self, parts: Vec<Conjunct>) -> CompileResult<Expr> {
        // Keyword check.
        for p in &parts {
            let Some(o) = p.obj() else { continue };
            for k in o.keys() {
                if let Some((_, why)) = REFUSED.iter().find(|(r, _)| r == k) {
                    // `unevaluated*: true` or `{}` constrains nothing.
                    if matches!(o.get(k), Some(Value::Bool(true))) || o.get(k).and_then(|v| v.as_object()).is_some_and(|m| m.is_empty()) {
                        continue;
                    }
                    self.refuse(k, *why, p.kw_ptr(k))?;
                }
            }
            let _ = ANNOTATIONS_AND_HANDLED;
        }
        // Types.
        let mut types = JsonTypes::all();
        for p in &parts {
            if let Some(t) = p.get("type") {
                types &= type_bits(t).ok_or_else(|| invalid("type", "must be a type name or an array of them", p.kw_ptr("type")))?;
            }
            // Written only by negations: numbers must not be integers.
            if p.get("x-formwork-non-integral") == Some(&Value::Bool(true)) {
                types &= !JsonTypes::INT;
            }
        }
        // enum / const: exact, through the validators.
        let mut cands: Option<Vec<Value>> = None;
        for p in &parts {
            for kw in ["enum", "const"] {
                let Some(v) = p.get(kw) else { continue };
                let list: Vec<Value> = if kw == "const" {
                    vec![v.clone()]
                } else {
                    v.as_array().ok_or_else(|| invalid("enum", "must be an array", p.kw_ptr("enum")))?.clone()
                };
                cands = Some(match cands {
                    None => list,
                    Some(c) => c.into_iter().filter(|x| list.iter().any(|y| json_eq(x, y))).collect(),
                });
            }
        }
        let mut excluded: Vec<Value> = Vec::new();
        for p in &parts {
            if let Some(Value::Array(v)) = p.get("x-formwork-not-values") {
                excluded.extend(v.iter().cloned());
            }
        }
        if let Some(c) = cands {
            let mut out = Vec::new();
            for v in c {
                if !types.intersects(value_type(&v)) || excluded.iter().any(|e| json_eq(e, &v)) {
                    continue;
                }
                if self.value_ok(&parts, &v)? {
                    out.push(self.literal(&v));
                }
            }
            return Ok(alt_of(out));
        }
        let mut alts = Vec::new();
        if types.intersects(JsonTypes::NULL) && !excluded.iter().any(|e| e.is_null()) {
            alts.push(Expr::lit("null"));
        }
        if types.intersects(JsonTypes::BOOL) {
            for (b, s) in [(true, "true"), (false, "false")] {
                if !excluded.iter().any(|e| e == &Value::Bool(b)) {
                    alts.push(Expr::lit(s));
                }
            }
        }
        if types.contains(JsonTypes::FRAC) && !types.intersects(JsonTypes::INT) {
            alts.push(crate::number::non_integral(self, &parts, &excluded)?);
        } else if types.intersects(JsonTypes::INT | JsonTypes::FRAC) {
            alts.push(crate::number::compile(self, &parts, !types.intersects(JsonTypes::FRAC), &excluded)?);
        }
        if types.intersects(JsonTypes::STR) {
            alts.push(crate::string::compile(self, &parts, &excluded)?);
        }
        if types.intersects(JsonTypes::ARR) {
            if excluded.iter().any(|e| e.is_array()) {
                self.refuse("not", "excluding particular array values", parts[0].at.clone())?;
            }
            let seps = self.seps();
            alts.push(self.nested(|cx| array::compile(cx, &parts, &seps))?);
        }
        if types.intersects(JsonTypes::OBJ) {
            if excluded.iter().any(|e| e.is_object()) {
                self.refuse("not", "excluding particular object values", parts[0].at.clone())?;
            }
            let seps = self.seps();
            alts.push(self.nested(|cx| object::compile(cx, &parts, &seps))?);
        }
        Ok(alt_of(alts))
    }

}

fn rule_name(ptr: &str) -> String {
    // The last 40 characters of the pointer, alphanumerics lowercased and the rest as dashes,
    // trimmed of dashes at both ends; read from the end, so that a long pointer into a large
    // schema is not mapped whole for every rule. Bytes, not chars: every character outside
    // ASCII maps to one dash, so a UTF-8 sequence is its lead byte's dash and its
    // continuation bytes are passed over (this runs once per schema location: decoding
    // chars and collecting them twice was a twentieth of a large schema's compile).
    let mut tail: Vec<u8> = Vec::with_capacity(40);
    for &b in ptr.as_bytes().iter().rev() {
        if b & 0xC0 == 0x80 {
            continue;
        }
        let c = if b.is_ascii_alphanumeric() { b.to_ascii_lowercase() } else { b'-' };
        if c == b'-' && tail.is_empty() {
            continue;
        }
        tail.push(c);
        if tail.len() == 40 {
            break;
        }
    }
    while tail.last() == Some(&b'-') {
        tail.pop();
    }
    if tail.is_empty() {
        return "schema".into();
    }
    tail.reverse();
    String::from_utf8(tail).expect("ASCII")
}

#[cfg(test)]
mod rule_name_tests {
    /// The name the pointer's whole mapping gives (what `rule_name` computes from the end).
    fn whole(ptr: &str) -> String {
        let s: String = ptr.trim_start_matches('/').chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
        let s = s.trim_matches('-');
        let s = if s.len() > 40 { s[s.len() - 40..].trim_start_matches('-') } else { s };
        if s.is_empty() { "schema".into() } else { s.to_string() }
    }

    #[test]
    fn rule_names_are_the_tail_of_the_whole_mapping() {
        let long = format!("/definitions/{}/properties/x", "a".repeat(70));
        let dashes = format!("/definitions/Abc/{}", "~".repeat(70));
        for ptr in ["", "/", "/properties/Name", "/a/é日本/b-c", long.as_str(), dashes.as_str(), "/x/ééééééééééééééééééééééééééééééééééééééééééééééééé/y", "/-/--/"] {
            assert_eq!(super::rule_name(ptr), whole(ptr), "{ptr:?}");
        }
    }
}

#[cfg(test)]
mod size_tests {
    use super::serialized_size;
    use serde_json::{json, Value};

    /// What `serde_json` writes, the length the limit is defined by.
    fn written(v: &Value) -> usize {
        serde_json::to_vec(v).unwrap().len()
    }

    #[test]
    fn counts_what_serde_json_writes() {
        let every_control: String = (0u8..0x20).map(char::from).collect();
        let cases = [
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(-17),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(1.5),
            json!(-0.0),
            json!(1e300),
            json!(2.5e-8),
            json!(""),
            json!("plain"),
            json!("quote \" and backslash \\ and slash /"),
            json!(every_control),
            json!("\u{7f} é 𝄞 \u{2028}"),
            json!([]),
            json!({}),
            json!([[], {}, [1], {"a": []}]),
            json!({"k\n": "v\t", "": {"": ""}, "n": [1, 2.25, null, false]}),
        ];
        for v in &cases {
            assert_eq!(serialized_size(v, usize::MAX), written(v), "{v}");
        }
    }

    #[test]
    fn counts_every_schema_of_the_test_suite_and_maskbench() {
        let data = formwork_testkit::shared_data_dir();
        let mut seen = 0;
        for dir in ["json-schema-test-suite/tests/draft2020-12", "json-schema-test-suite/tests/draft7", "maskbench-dev"] {
            let Ok(entries) = std::fs::read_dir(data.join(dir)) else { continue };
            for e in entries.flatten() {
                let Ok(text) = std::fs::read_to_string(e.path()) else { continue };
                let Ok(v) = serde_json::from_str::<Value>(&text) else { continue };
                assert_eq!(serialized_size(&v, usize::MAX), written(&v), "{}", e.path().display());
                seen += 1;
            }
        }
        assert!(seen > 100, "only {seen} files read under {}", data.display());
    }

    #[test]
    fn stops_just_past_the_limit() {
        let v = json!({"a": "x".repeat(1000), "b": ["y".repeat(1000)]});
        let full = written(&v);
        assert_eq!(serialized_size(&v, full), full);
        let cut = serialized_size(&v, 500);
        assert!(cut > 500 && cut < full, "{cut} of {full}");
    }
}
