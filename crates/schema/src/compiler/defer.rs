//! Which schema locations may be compiled on first reach (lazy compilation, see
//! `crate::compile::lazy`), decided up front by a scan of the document that compiles
//! nothing.
//!
//! A location is *deferrable* when compiling it later can neither refuse nor warn, nor
//! change what the grammar built now may assume about it:
//! - **safe**: it and every location it reaches (through `properties`,
//!   `additionalProperties`, `items` and `$ref`) use only keywords whose compilation never
//!   refuses and never warns: `type`, `properties`, `required`, `additionalProperties`,
//!   `items` (one schema), `maxItems`, `minItems: 0`, `minLength`/`maxLength` (min ≤ max),
//!   `minimum`/`maximum` and their exclusive forms (no `multipleOf`), a `pattern` alone on
//!   its string whose syntax formwork supports (checked by parsing it), `enum` or `const`
//!   beside `type` alone, `format` where it is known or left as an annotation (its
//!   warning is found by the scan and said up front), `anyOf` and `oneOf` with no
//!   constraining sibling whose branches all have a `type` (pairwise disjoint for `oneOf`),
//!   a `$ref` into the same document with no constraining sibling, and annotations (any
//!   other keyword the compiler ignores). Safety is the greatest fixpoint
//!   over the reference graph, so recursive definitions are safe;
//! - **productive**: it matches something (the least fixpoint: an object is productive when
//!   the schemas of its required properties are, so `A` requiring an `A` is not; a
//!   combinator when one of its branches is);
//! - **opens with a terminal**: its type is exactly `object` or `array` (through `$ref`s),
//!   so its rule starts with `{` or `[` and no left recursion can pass through it.
//!
//! Documents with `$id`/`$anchor` below the root (whose references depend on where they
//! are) and references into other documents are never deferred. Verdicts are memoized by node, so
//! the scan reads each part of the document once.

use crate::compiler::Compiler;
use crate::format::Treatment;
use crate::json_types::{type_bits, JsonTypes};
use crate::resolve::Loc;
use foldhash::HashMap;
use serde_json::Value;

/// The locations deferred so far, for lazy compilation (`crate::compile::lazy`).
#[derive(Default)]
pub(crate) struct Deferrals {
    /// By rule: what compiling it needs.
    pub items: HashMap<u32, Deferred>,
    /// The rules deferred since the last look, with their names.
    pub fresh: Vec<(formwork_grammar::RuleId, String)>,
    /// Does a pattern alone on a string compile without a refusal, to a language that is not
    /// empty? Given by the layer that compiles patterns (`crate::regex`, above this one);
    /// without it no location with a `pattern` is deferred.
    pub pattern_ok: Option<PatternCheck>,
}

/// See [`Deferrals::pattern_ok`].
pub(crate) type PatternCheck = fn(&mut Compiler<'_>, &str) -> bool;

/// A location deferred: its rule's name, its parts, and the nesting it was reached at.
pub(crate) struct Deferred {
    pub name: String,
    pub parts: Vec<crate::conjunct::Conjunct>,
    pub level: u32,
    pub depth: usize,
}

/// Largest `enum` a deferrable location may have.
const MAX_ENUM: usize = 256;

/// The scan's memo (see the module docs), by the address of a node of document 0.
#[derive(Default)]
pub(crate) struct Scan {
    verdicts: HashMap<usize, Verdict>,
    /// The nodes scanned whose compilation warns, with the reason (see
    /// [`Compiler::scan_warnings`]).
    warned: Vec<(usize, String)>,
}

#[derive(Clone, Copy, Debug)]
struct Verdict {
    safe: bool,
    productive: bool,
}

/// What one node says on its own.
struct Local<'r> {
    ok: bool,
    /// Nodes it reaches.
    succ: Vec<&'r Value>,
    /// Productive without looking further.
    alone: bool,
    /// May be an object (or is a bare `$ref`), so productive when `required` all are.
    object: bool,
    /// The nodes that must match something for it to (required properties, a `$ref`'s target).
    required: Vec<usize>,
    /// One of `required` is enough (the branches of `anyOf`/`oneOf`).
    any: bool,
    /// The warning compiling it gives (a `format` not enforced).
    warn: Option<String>,
}

/// Keywords a deferrable location may not use: those the compiler enforces beyond the safe
/// set, those it refuses, and those that change how references resolve.
const UNSAFE: &[&str] = &[
    "allOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas", "dependencies",
    "patternProperties", "propertyNames", "minProperties", "maxProperties", "prefixItems", "additionalItems", "contains",
    "minContains", "maxContains", "uniqueItems",
    "multipleOf", "$anchor", "$id", "id", "$dynamicAnchor", "$dynamicRef", "$recursiveRef",
    "$recursiveAnchor", "unevaluatedProperties", "unevaluatedItems", "x-formwork-not-values", "x-formwork-not-pattern",
    "x-formwork-non-integral", "x-formwork-first", "x-formwork-some-key", "x-formwork-not-multiple-of",
];

/// The keywords of a node that the scan reads (the others are `UNSAFE` or annotations).
#[derive(Default)]
struct Kw<'r> {
    types: Option<&'r Value>,
    enums: Option<&'r Value>,
    properties: Option<&'r Value>,
    required: Option<&'r Value>,
    extra: Option<&'r Value>,
    items: Option<&'r Value>,
    min_items: Option<&'r Value>,
    max_items: Option<&'r Value>,
    min_len: Option<&'r Value>,
    max_len: Option<&'r Value>,
    format: Option<&'r Value>,
    reference: Option<&'r Value>,
    pattern: Option<&'r Value>,
    /// `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`.
    bounds: [Option<&'r Value>; 4],
    /// `anyOf` or `oneOf` (a node with both is not deferrable).
    branches: Option<&'r Value>,
    one_of: bool,
}

impl Compiler<'_> {
    /// May location `v` (a node of document 0) be compiled on first reach? See the module
    /// docs.
    pub(crate) fn deferrable(&mut self, v: &Value) -> bool {
        if self.res.docs[0].ids_below_root {
            return false;
        }
        let root = self.res.docs[0].value.clone();
        let mut scan = std::mem::take(&mut self.scan);
        let ok = Some(scan.verdict(self, &root, v)).is_some_and(|x| x.safe && x.productive) && self.opens(&root, v);
        self.scan = scan;
        ok
    }

    /// The warnings that compiling the scanned locations gives (unenforced formats), each
    /// at its pointer: a deferred location compiles after [`compile_lazy`](crate::compile_lazy)
    /// returns, so its warnings are said up front. Every scanned location is one the
    /// compiler reaches, so these are warnings eager compilation gives too.
    pub(crate) fn scan_warnings(&mut self) -> Vec<crate::Warning> {
        if self.scan.warned.is_empty() {
            return Vec::new();
        }
        let want: HashMap<usize, &str> = self.scan.warned.iter().map(|(k, w)| (*k, w.as_str())).collect();
        let root = self.res.docs[0].value.clone();
        let mut out = Vec::new();
        let mut stack: Vec<(&Value, String)> = vec![(&root, String::new())];
        while let Some((v, ptr)) = stack.pop() {
            if let Some(why) = want.get(&(v as *const Value as usize)) {
                out.push(crate::Warning { keyword: "format".into(), pointer: format!("{ptr}/format"), why: why.to_string() });
            }
            match v {
                Value::Object(o) => stack.extend(o.iter().map(|(k, x)| (x, format!("{ptr}/{}", crate::resolve::escape_ptr(k))))),
                Value::Array(a) => stack.extend(a.iter().enumerate().map(|(i, x)| (x, format!("{ptr}/{i}")))),
                _ => {}
            }
        }
        out
    }

    /// Does `v`'s rule start with `{` or `[` (its type exactly `object` or `array`, through
    /// bare `$ref`s)?
    fn opens<'r>(&mut self, root: &'r Value, mut v: &'r Value) -> bool {
        for _ in 0..16 {
            let Some(o) = v.as_object() else { return false };
            if let Some(r) = o.get("$ref") {
                match r.as_str().and_then(|r| self.target(root, r)) {
                    Some(t) => v = t,
                    None => return false,
                }
                continue;
            }
            return matches!(o.get("type").and_then(|t| t.as_str()), Some("object" | "array"));
        }
        false
    }

    /// The node reference `r` points to in document 0.
    fn target<'r>(&mut self, root: &'r Value, r: &str) -> Option<&'r Value> {
        // A plain pointer into this document (it has no `$id` below the root, or nothing is
        // deferred).
        if let Some(ptr) = r.strip_prefix('#').filter(|p| (p.is_empty() || p.starts_with('/')) && !p.contains('%')) {
            return crate::resolve::pointer(root, ptr);
        }
        let base = self.res.base_at(&Loc { doc: 0, ptr: String::new() });
        let loc = self.res.resolve(&base, r)?;
        if loc.doc != 0 {
            return None;
        }
        crate::resolve::pointer(root, &loc.ptr)
    }

    /// What node `v` says on its own.
    fn local<'r>(&mut self, root: &'r Value, v: &'r Value, targets: &mut HashMap<&'r str, Option<&'r Value>>) -> Local<'r> {
        let id = |v: &Value| v as *const Value as usize;
        let mut l = Local { ok: true, succ: Vec::new(), alone: false, object: false, required: Vec::new(), any: false, warn: None };
        let o = match v {
            Value::Bool(b) => {
                l.alone = *b;
                return l;
            }
            Value::Object(o) => o,
            _ => {
                l.ok = false;
                return l;
            }
        };
        // One pass over the keys (each lookup in a JSON object hashes the key).
        let mut k = Kw::default();
        let mut constraining = 0;
        for (key, x) in o {
            let slot = match key.as_str() {
                "type" => &mut k.types,
                "enum" => &mut k.enums,
                "properties" => &mut k.properties,
                "required" => &mut k.required,
                "additionalProperties" => &mut k.extra,
                "items" => &mut k.items,
                "minItems" => &mut k.min_items,
                "maxItems" => &mut k.max_items,
                "minLength" => &mut k.min_len,
                "maxLength" => &mut k.max_len,
                "format" => &mut k.format,
                "$ref" => &mut k.reference,
                "pattern" => &mut k.pattern,
                "const" => &mut k.enums,
                "minimum" => &mut k.bounds[0],
                "maximum" => &mut k.bounds[1],
                "exclusiveMinimum" => &mut k.bounds[2],
                "exclusiveMaximum" => &mut k.bounds[3],
                "anyOf" | "oneOf" => {
                    k.one_of = key == "oneOf";
                    &mut k.branches
                }
                key if UNSAFE.contains(&key) => {
                    l.ok = false;
                    return l;
                }
                _ => continue,
            };
            *slot = Some(x);
            constraining += 1;
        }
        if let Some(r) = k.reference {
            // Bare references only: siblings would be a conjunction (or, in older drafts,
            // ignored), and either may be empty.
            let t = match r.as_str() {
                Some(r) => *targets.entry(r).or_insert_with(|| self.target(root, r)),
                None => None,
            };
            match t {
                Some(t) if constraining == 1 => {
                    l.succ.push(t);
                    l.required.push(id(t));
                    l.object = true;
                }
                _ => l.ok = false,
            }
            return l;
        }
        if let Some(branches) = k.branches {
            // Alone (no sibling to distribute over), each branch typed, and for `oneOf` the
            // types pairwise disjoint: the compiler proves such branches disjoint from their
            // types and compiles them as a union.
            let alone = constraining == 1;
            let mut seen = JsonTypes::empty();
            for b in branches.as_array().into_iter().flatten() {
                match b.get("type").and_then(type_bits) {
                    Some(t) if alone && !(k.one_of && t.intersects(seen)) => seen |= t,
                    _ => l.ok = false,
                }
                l.succ.push(b);
                l.required.push(id(b));
            }
            l.ok &= alone && !l.succ.is_empty();
            l.object = true;
            l.any = true;
            return l;
        }
        let types = match k.types {
            Some(t) => match type_bits(t) {
                Some(b) if !b.is_empty() => b,
                _ => {
                    l.ok = false;
                    return l;
                }
            },
            None => JsonTypes::all(),
        };
        let uint = |v: Option<&Value>| v.map(|v| v.as_u64());
        let (min_len, max_len) = (uint(k.min_len), uint(k.max_len));
        if min_len == Some(None) || max_len == Some(None) || uint(k.max_items) == Some(None) {
            l.ok = false;
            return l;
        }
        if let (Some(Some(a)), Some(Some(b))) = (min_len, max_len) {
            l.ok &= a <= b;
        }
        l.ok &= k.min_items.is_none_or(|v| v.as_u64() == Some(0));
        if let Some(e) = k.enums {
            // `enum` (or `const`, not both) beside `type` alone, so the values are filtered
            // by their type only.
            let alone = constraining == 1 + usize::from(k.types.is_some());
            let vals = match o.get("const") {
                Some(c) => std::slice::from_ref(c),
                None => e.as_array().map(Vec::as_slice).unwrap_or_default(),
            };
            if !alone || vals.is_empty() || vals.len() > MAX_ENUM {
                l.ok = false;
                return l;
            }
            l.alone = vals.iter().any(|x| types.intersects(value_type(x)));
            return l;
        }
        // Numbers: bounds (numbers, or the booleans of draft 4's exclusive bounds), no
        // multiple. Bounds that leave no integer between them could leave no number of an
        // `integer` type, so both present must be a whole unit apart.
        let bound = |v: Option<&Value>| v.and_then(Value::as_f64);
        if k.bounds.iter().flatten().any(|v| !v.is_number() && !v.is_boolean()) {
            l.ok = false;
            return l;
        }
        let lo = bound(k.bounds[0]).into_iter().chain(bound(k.bounds[2])).fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))));
        let hi = bound(k.bounds[1]).into_iter().chain(bound(k.bounds[3])).fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.min(x))));
        let numbers_empty = matches!((lo, hi), (Some(lo), Some(hi)) if hi - lo < 1.0);
        if let Some(p) = k.pattern.filter(|_| types.intersects(JsonTypes::STR)) {
            // Alone on its string: its grammar is the pattern's own, refused only for syntax
            // formwork does not support, which is checked here.
            let check = self.lazy.as_ref().and_then(|d| d.pattern_ok);
            l.ok &= k.format.is_none() && min_len.is_none() && max_len.is_none() && p.as_str().zip(check).is_some_and(|(p, f)| f(self, p));
        }
        if let Some(f) = k.format.filter(|_| types.intersects(JsonTypes::STR)) {
            match f.as_str().map(|f| crate::format::treatment(f, &self.opts)) {
                // Intersected with the length bounds, an automaton may outgrow its limits.
                Some(Treatment::Asserted) => l.ok &= min_len.is_none() && max_len.is_none(),
                Some(Treatment::Annotation(why)) => l.warn = Some(why),
                Some(Treatment::Refused(_)) | None => l.ok = false,
            }
        }
        let props = match k.properties {
            Some(Value::Object(p)) => Some(p),
            Some(_) => {
                l.ok = false;
                return l;
            }
            None => None,
        };
        // Children are compiled (and scanned) only where their type is allowed.
        let (objects, arrays) = (types.intersects(JsonTypes::OBJ), types.intersects(JsonTypes::ARR));
        let extra = k.extra;
        match extra {
            None | Some(Value::Bool(_)) => {}
            Some(x @ Value::Object(_)) => l.succ.extend(objects.then_some(x)),
            Some(_) => l.ok = false,
        }
        match k.items {
            None | Some(Value::Bool(_)) => {}
            Some(x @ Value::Object(_)) => l.succ.extend(arrays.then_some(x)),
            Some(_) => l.ok = false,
        }
        if objects {
            l.succ.extend(props.iter().flat_map(|p| p.values()));
        }
        if let Some(req) = k.required {
            let Some(req) = req.as_array() else {
                l.ok = false;
                return l;
            };
            for name in req {
                let Some(name) = name.as_str() else {
                    l.ok = false;
                    return l;
                };
                match (props.and_then(|p| p.get(name)), extra) {
                    (Some(x), _) => l.required.push(id(x)),
                    // No property may have that name: no object is valid.
                    (None, Some(Value::Bool(false))) => l.required.push(usize::MAX),
                    (None, Some(x @ Value::Object(_))) => l.required.push(id(x)),
                    (None, _) => {}
                }
            }
        }
        // Productive without the object case: any other type allowed (strings within
        // their bounds and format, which the checks above made sure of).
        let numbers = JsonTypes::INT | JsonTypes::FRAC;
        l.alone = types.intersects(!(JsonTypes::OBJ | if numbers_empty { numbers } else { JsonTypes::empty() }));
        l.object = types.intersects(JsonTypes::OBJ);
        l
    }
}

/// The JSON type of `v` (`INT` for an integer, which `number` allows too).
fn value_type(v: &Value) -> JsonTypes {
    match v {
        Value::Null => JsonTypes::NULL,
        Value::Bool(_) => JsonTypes::BOOL,
        Value::Number(n) if n.is_i64() || n.is_u64() => JsonTypes::INT,
        Value::Number(_) => JsonTypes::FRAC,
        Value::String(_) => JsonTypes::STR,
        Value::Array(_) => JsonTypes::ARR,
        Value::Object(_) => JsonTypes::OBJ,
    }
}

impl Scan {
    /// The verdict of node `v` (scanning what it reaches that no earlier scan did).
    fn verdict(&mut self, cx: &mut Compiler<'_>, root: &Value, v: &Value) -> Verdict {
        let start = v as *const Value as usize;
        if let Some(&x) = self.verdicts.get(&start) {
            return x;
        }
        // Explore: every node reached and not yet judged, with what it says on its own.
        let mut order: Vec<usize> = Vec::new();
        let mut local: HashMap<usize, Local<'_>> = HashMap::default();
        let mut seen: foldhash::HashSet<usize> = Default::default();
        let mut work = vec![v];
        let mut targets = HashMap::default();
        seen.insert(start);
        while let Some(n) = work.pop() {
            let l = cx.local(root, n, &mut targets);
            for &s in &l.succ {
                let k = s as *const Value as usize;
                if !self.verdicts.contains_key(&k) && seen.insert(k) {
                    work.push(s);
                }
            }
            let k = n as *const Value as usize;
            if let Some(w) = &l.warn {
                self.warned.push((k, w.clone()));
            }
            order.push(k);
            local.insert(k, l);
        }
        let index: HashMap<usize, usize> = order.iter().enumerate().map(|(i, &k)| (k, i)).collect();
        let n = order.len();
        // Safety: the greatest fixpoint. Start from the nodes that are not ok on their own
        // (or reach a judged unsafe node) and spread to whoever reaches them.
        let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut safe = vec![true; n];
        let mut work: Vec<usize> = Vec::new();
        for (i, k) in order.iter().enumerate() {
            let l = &local[k];
            let mut bad = !l.ok;
            for &s in &l.succ {
                let s = s as *const Value as usize;
                match index.get(&s) {
                    Some(&j) => preds[j].push(i),
                    None => bad |= !self.verdicts[&s].safe,
                }
            }
            if bad {
                safe[i] = false;
                work.push(i);
            }
        }
        while let Some(j) = work.pop() {
            for &i in &preds[j] {
                if safe[i] {
                    safe[i] = false;
                    work.push(i);
                }
            }
        }
        // Productivity: the least fixpoint over the required edges.
        let mut productive = vec![false; n];
        let mut left = vec![0usize; n];
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut work: Vec<usize> = Vec::new();
        for (i, k) in order.iter().enumerate() {
            let l = &local[k];
            if l.alone {
                productive[i] = true;
                work.push(i);
                continue;
            }
            if !l.object {
                continue;
            }
            if l.any {
                // Productive when one branch is: at once if a judged one is, else when the
                // first of the others turns out to be.
                if l.required.iter().any(|r| self.verdicts.get(r).is_some_and(|x| x.productive)) {
                    productive[i] = true;
                    work.push(i);
                    continue;
                }
                let inner: Vec<usize> = l.required.iter().filter_map(|r| index.get(r).copied()).collect();
                left[i] = if inner.is_empty() { usize::MAX } else { 1 };
                for j in inner {
                    dependents[j].push(i);
                }
                continue;
            }
            let mut blocked = false;
            for r in &l.required {
                match index.get(r) {
                    Some(&j) => {
                        left[i] += 1;
                        dependents[j].push(i);
                    }
                    None => blocked |= self.verdicts.get(r).is_none_or(|x| !x.productive),
                }
            }
            if blocked {
                left[i] = usize::MAX;
            } else if left[i] == 0 {
                productive[i] = true;
                work.push(i);
            }
        }
        while let Some(j) = work.pop() {
            for &i in &dependents[j] {
                if left[i] == usize::MAX || productive[i] {
                    continue;
                }
                left[i] -= 1;
                if left[i] == 0 {
                    productive[i] = true;
                    work.push(i);
                }
            }
        }
        for (i, k) in order.into_iter().enumerate() {
            self.verdicts.insert(k, Verdict { safe: safe[i], productive: productive[i] });
        }
        self.verdicts[&start]
    }
}

