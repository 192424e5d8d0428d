//! The compiler: schema locations → rules; conjunctions, combinators, per-type dispatch.

use crate::resolve::{escape_ptr, Loc, Resolver};
use crate::{effective_draft, Draft, SchemaError, SchemaErrorKind, SchemaOptions, Warning, Whitespace};
use formwork_grammar::{Expr, Grammar, GrammarBuilder, RuleId};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

/// What every step of the compiler returns: a value, or the refusal or error that stops it.
pub(crate) type CompileResult<T> = Result<T, SchemaError>;

/// Type bits.
pub(crate) const T_NULL: u8 = 1;
pub(crate) const T_BOOL: u8 = 2;
pub(crate) const T_OBJ: u8 = 4;
pub(crate) const T_ARR: u8 = 8;
pub(crate) const T_STR: u8 = 16;
pub(crate) const T_INT: u8 = 32;
pub(crate) const T_FRAC: u8 = 64;
pub(crate) const T_ALL: u8 = 127;

/// Keywords consumed by distribution (bit flags on a [`Conjunct`]).
pub(crate) const C_ANYOF: u16 = 1;
pub(crate) const C_ONEOF: u16 = 2;
pub(crate) const C_IF: u16 = 4;
pub(crate) const C_DEPS: u16 = 8;
pub(crate) const C_NOT: u16 = 16;
pub(crate) const C_ALLOF: u16 = 32;
pub(crate) const C_REF: u16 = 64;
/// Draft 4-7: `$ref` replaced this object; every sibling is ignored.
pub(crate) const C_REF_ONLY: u16 = 128;
/// `oneOf` distributed over branches proven pairwise disjoint: a value of the branch in the
/// conjunction matches no other, so the branch (a part of its own) decides the `oneOf`.
pub(crate) const C_ONEOF_DISJOINT: u16 = 256;

/// One conjunct: a schema object, where it lives, and which combinators were already handled.
#[derive(Clone, Debug)]
pub(crate) struct Conjunct {
    pub root: Rc<Value>,
    pub ptr: String,
    pub doc: usize,
    /// Where the schema is (for errors); for synthetic parts, where it came from.
    pub at: String,
    /// True when this part is a location of a real document (validators exist for it).
    pub real: bool,
    /// True when this part is a negation or other derived schema whose properties are not
    /// "evaluated" in the sense of `unevaluated*`.
    pub derived: bool,
    pub consumed: u16,
    /// `ptr` resolved in `root`, once, when the part is made ([`Conjunct::locate`]; a sub-part
    /// resolves only its own tail from here, [`Conjunct::sub`]). `value()` is asked for nearly
    /// every keyword lookup, and walking the pointer from the root each time took about a
    /// quarter of a large schema's compile time.
    pub node: Node,
}

/// A location in a document, held with the document (a reference yoked to its `Rc`).
pub(crate) type Node = yoke::Yoke<&'static Value, Rc<Value>>;

/// What a pointer that resolves to nothing reads as: `true`, the empty schema.
static TRUE: Value = Value::Bool(true);

impl Conjunct {
    /// `ptr` resolved in `root` (`true` when it resolves to nothing).
    pub fn locate(root: &Rc<Value>, ptr: &str) -> Node {
        yoke::Yoke::attach_to_cart(root.clone(), |r| crate::resolve::pointer(r, ptr).unwrap_or(&TRUE))
    }

    pub fn value(&self) -> &Value {
        self.node.get()
    }
    pub fn obj(&self) -> Option<&Map<String, Value>> {
        if self.consumed & C_REF_ONLY != 0 {
            return None;
        }
        self.value().as_object()
    }
    pub fn get(&self, k: &str) -> Option<&Value> {
        crate::resolve::map_get(self.obj()?, k)
    }
    /// The pointer of keyword `k` in this part, for errors.
    pub fn kw_ptr(&self, k: &str) -> String {
        if self.real {
            format!("{}/{}", self.ptr, escape_ptr(k))
        } else {
            self.at.clone()
        }
    }
    /// A subschema of this part, at `ptr` relative to this part.
    pub fn sub(&self, rel: &str) -> Conjunct {
        Conjunct {
            root: self.root.clone(),
            node: self.node.map_project_cloned(|v, _| crate::resolve::pointer(v, rel).unwrap_or(&TRUE)),
            ptr: format!("{}{}", self.ptr, rel),
            doc: self.doc,
            at: if self.real { format!("{}{}", self.ptr, rel) } else { self.at.clone() },
            real: self.real,
            derived: self.derived,
            consumed: 0,
        }
    }
    fn key(&self) -> Option<String> {
        self.real.then(|| format!("{}:{}:{}", self.doc, self.ptr, self.consumed))
    }
}

/// The state of one schema compilation: the documents and their references, the options,
/// the rules shared between places, the validators built for `enum`/`const` checks, the
/// warnings of lenient mode, and the limits' counters.
pub(crate) struct Compiler<'a> {
    pub opts: &'a SchemaOptions,
    pub res: Resolver<'a>,
    pub b: GrammarBuilder,
    memo: HashMap<String, RuleId>,
    pub warnings: Vec<Warning>,
    start: Instant,
    ref_expansions: usize,
    pub depth: usize,
    validators: HashMap<usize, Option<Rc<jsonschema::ValidatorMap>>>,
    /// Validators of subschemas checked on their own, by document, pointer and the
    /// conjunction keywords left out (`C_REF`, `C_ALLOF`, `C_ANYOF`, `C_ONEOF_DISJOINT`); `None`: that subschema is checked
    /// through its document's validator (it has references).
    local_validators: HashMap<(usize, String, u16), Option<Rc<jsonschema::Validator>>>,
    pub ws: Expr,
    /// The nesting level of the value being compiled (the root value is 0): pretty
    /// whitespace indents by it.
    pub level: u32,
    /// `SchemaOptions::force_first_key`, applied to objects at the root.
    pub force_first: Option<String>,
    /// Some root object listed `force_first` (and starts with it).
    pub force_first_applied: bool,
    pub uid: usize,
    /// Rules of [`Compiler::shared`], by key.
    shared_rules: HashMap<String, RuleId>,
    /// Compiled `patternProperties` regexes, by pattern (`None`: not supported), for
    /// matching listed names.
    pub key_regexes: std::cell::RefCell<HashMap<String, Option<regex::Regex>>>,
    /// Results of `regex::pattern_regions`, by patterns, names and `rest`: the subset
    /// construction is the costly part of an object with `patternProperties`, and schemas
    /// repeat the same map type at many places.
    pub pattern_regions_memo: HashMap<String, Option<Vec<(u32, Expr)>>>,
}

pub(crate) fn err(kind: SchemaErrorKind, pointer: impl Into<String>) -> SchemaError {
    SchemaError { kind, pointer: pointer.into() }
}

pub(crate) fn unsupported(keyword: &str, why: impl Into<String>, pointer: impl Into<String>) -> SchemaError {
    err(SchemaErrorKind::Unsupported { keyword: keyword.into(), why: why.into() }, pointer)
}

pub(crate) fn invalid(keyword: &str, why: impl Into<String>, pointer: impl Into<String>) -> SchemaError {
    err(SchemaErrorKind::Invalid { keyword: keyword.into(), why: why.into() }, pointer)
}

/// Matches nothing.
pub(crate) fn nothing() -> Expr {
    Expr::Class(vec![])
}

pub(crate) fn is_nothing(e: &Expr) -> bool {
    matches!(e, Expr::Class(v) if v.is_empty())
}

/// An alternation that drops branches matching nothing.
pub(crate) fn alt_of(items: Vec<Expr>) -> Expr {
    let v: Vec<Expr> = items.into_iter().filter(|e| !is_nothing(e)).collect();
    if v.is_empty() {
        nothing()
    } else {
        Expr::alt(v)
    }
}

/// A sequence that is nothing if any item is.
pub(crate) fn seq_of(items: Vec<Expr>) -> Expr {
    if items.iter().any(is_nothing) {
        return nothing();
    }
    Expr::seq(items)
}

/// Compiles `schema` to a grammar rooted at `root`.
pub fn compile(schema: &Value, opts: &SchemaOptions) -> Result<Grammar, SchemaError> {
    compile_with_warnings(schema, opts).map(|(g, _)| g)
}

/// [`compile`], also returning the keywords that lenient mode left unenforced.
pub fn compile_with_warnings(schema: &Value, opts: &SchemaOptions) -> Result<(Grammar, Vec<Warning>), SchemaError> {
    let size = serde_json::to_string(schema).map(|s| s.len()).unwrap_or(0);
    if size > opts.limits.max_source_bytes {
        return Err(err(
            SchemaErrorKind::Limit { limit: "max_source_bytes", why: format!("the schema is {size} bytes, the limit is {}", opts.limits.max_source_bytes) },
            "",
        ));
    }
    let draft = effective_draft(schema, opts);
    let res = Resolver::new(schema, draft, &opts.remotes);
    let ws = match opts.whitespace {
        Whitespace::Compact | Whitespace::Pretty { .. } => Expr::empty(),
        Whitespace::Flexible { max_run } => Expr::repeat(Expr::class([(' ', ' '), ('\t', '\t'), ('\n', '\n'), ('\r', '\r')], false), 0, max_run),
    };
    let mut b = GrammarBuilder::new();
    let ws_id = b.define("ws", ws);
    let mut cx = Compiler {
        opts,
        res,
        b,
        memo: HashMap::new(),
        warnings: Vec::new(),
        start: Instant::now(),
        ref_expansions: 0,
        depth: 0,
        validators: HashMap::new(),
        local_validators: HashMap::new(),
        ws: Expr::Rule(ws_id),
        level: 0,
        force_first: None,
        force_first_applied: false,
        uid: 0,
        shared_rules: HashMap::new(),
        key_regexes: Default::default(),
        pattern_regions_memo: HashMap::new(),
    };
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
    let g = cx.b.build("root").map_err(|e| err(SchemaErrorKind::Grammar(e.to_string()), ""))?;
    tracing::debug!(rules = g.rules().len(), warnings = cx.warnings.len(), "compiled JSON schema");
    Ok((g, cx.warnings))
}

const ANNOTATIONS_AND_HANDLED: &[&str] = &[
    // handled
    "type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties", "propertyNames",
    "minProperties", "maxProperties", "items", "prefixItems", "additionalItems", "minItems", "maxItems", "contains",
    "minContains", "maxContains", "uniqueItems", "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "anyOf", "oneOf", "allOf", "not", "if", "then", "else",
    "dependentRequired", "dependentSchemas", "dependencies", "$ref", "$defs", "definitions", "$anchor", "$id", "id",
    "$schema", "$dynamicAnchor", "x-formwork-not-values",
];

/// Keywords that constrain values but are not enforced.
const REFUSED: &[(&str, &str)] = &[
    ("unevaluatedProperties", "depends on which subschemas evaluated each property at run time"),
    ("unevaluatedItems", "depends on which subschemas evaluated each item at run time"),
    ("$dynamicRef", "dynamic scopes are not supported"),
    ("$recursiveRef", "dynamic scopes are not supported"),
];

impl<'a> Compiler<'a> {
    fn root_part(&self) -> Conjunct {
        let root = self.res.docs[0].value.clone();
        Conjunct {
            node: Conjunct::locate(&root, ""),
            root,
            ptr: String::new(),
            doc: 0,
            at: String::new(),
            real: true,
            derived: false,
            consumed: 0,
        }
    }

    pub fn draft(&self, p: &Conjunct) -> Draft {
        self.res.draft(p.doc)
    }

    /// Refuses (or, lenient, warns about) keyword `k` of `p`.
    pub fn refuse(&mut self, keyword: &str, why: impl Into<String>, pointer: String) -> CompileResult<()> {
        let why = why.into();
        if self.opts.lenient {
            tracing::warn!(keyword, pointer = %pointer, why = %why, "schema keyword not enforced");
            self.warnings.push(Warning { keyword: keyword.into(), pointer, why });
            Ok(())
        } else {
            Err(unsupported(keyword, why, pointer))
        }
    }

    pub fn check_limits(&self, at: &str) -> CompileResult<()> {
        let ms = self.start.elapsed().as_millis() as u64;
        if ms > self.opts.limits.max_compile_ms {
            return Err(err(
                SchemaErrorKind::Limit { limit: "max_compile_ms", why: format!("compiling took more than {} ms", self.opts.limits.max_compile_ms) },
                at,
            ));
        }
        if self.b.len() > self.opts.limits.max_rules {
            return Err(err(
                SchemaErrorKind::Limit { limit: "max_rules", why: format!("the grammar needs more than {} rules", self.opts.limits.max_rules) },
                at,
            ));
        }
        Ok(())
    }

    /// A rule for `key`, defined once per grammar from `body` (later calls with the same key
    /// reuse it): for sub-grammars that many schema locations share (string bodies, key sets),
    /// so that the grammar holds one copy instead of one per use. `key` must say everything
    /// `body` depends on; `name` is the base of the rule's name.
    pub fn shared(&mut self, key: &str, name: &str, body: impl FnOnce(&mut Self) -> CompileResult<Expr>) -> CompileResult<Expr> {
        if let Some(&id) = self.shared_rules.get(key) {
            return Ok(Expr::Rule(id));
        }
        let name = self.b.fresh_name(name);
        let id = self.b.rule_id(&name);
        self.shared_rules.insert(key.to_string(), id);
        let e = body(self)?;
        self.b.define(&name, e);
        Ok(Expr::Rule(id))
    }

    /// The separators of a container at the current level.
    pub fn seps(&self) -> crate::layout::Seps {
        crate::layout::Seps::new(self.opts.whitespace, &self.ws, self.level)
    }

    /// Runs `f` one nesting level deeper (for the members of a container).
    pub fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        self.level += 1;
        let r = f(self);
        self.level -= 1;
        r
    }

    /// A synthetic part holding `v`, resolved relative to `like`.
    pub fn synth(&self, v: Value, like: &Conjunct, kw: &str) -> Conjunct {
        // Keep the document root so `$ref`s inside copied subschemas resolve the same way;
        // the synthetic value lives in its own root.
        let root = Rc::new(v);
        Conjunct { node: Conjunct::locate(&root, ""), root, ptr: String::new(), doc: like.doc, at: like.kw_ptr(kw), real: false, derived: true, consumed: 0 }
    }

    /// The grammar for a conjunction of schemas; one rule per distinct conjunction of real
    /// locations (so recursion terminates).
    pub fn schema(&mut self, parts: Vec<Conjunct>) -> CompileResult<Expr> {
        let at = parts.first().map(|p| p.at.clone()).unwrap_or_default();
        self.check_limits(&at)?;
        let mut key: Option<String> = parts.iter().map(|p| p.key()).collect::<Option<Vec<_>>>().map(|v| v.join("&"));
        if let (Some(k), Whitespace::Pretty { .. }) = (&mut key, self.opts.whitespace) {
            // Indentation depends on the level: one rule per level (capped, past which the
            // layout is compact and the same at every level, so recursion still closes).
            k.push_str(&format!("@{}", self.level.min(crate::layout::PRETTY_MAX_LEVEL)));
        }
        if let Some(k) = &key {
            if let Some(&id) = self.memo.get(k) {
                return Ok(Expr::Rule(id));
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
                self.depth += 1;
                let body = self.conj(parts);
                self.depth -= 1;
                let body = body?;
                self.b.define(&name, body);
                Ok(Expr::Rule(id))
            }
            None => {
                self.depth += 1;
                let body = self.conj(parts);
                self.depth -= 1;
                body
            }
        }
    }

    /// Resolves a `$ref` in `p`.
    pub fn resolve_ref(&mut self, p: &Conjunct, kw: &str) -> CompileResult<Conjunct> {
        self.ref_expansions += 1;
        if self.ref_expansions > self.opts.limits.max_ref_expansions {
            return Err(err(
                SchemaErrorKind::Limit { limit: "max_ref_expansions", why: format!("more than {} `$ref` expansions", self.opts.limits.max_ref_expansions) },
                p.kw_ptr(kw),
            ));
        }
        let r = p.get(kw).and_then(|v| v.as_str()).ok_or_else(|| invalid(kw, "must be a string", p.kw_ptr(kw)))?.to_string();
        let base = if p.real {
            self.res.base_at(&Loc { doc: p.doc, ptr: p.ptr.clone() })
        } else {
            self.res.base_at(&Loc { doc: p.doc, ptr: String::new() })
        };
        let loc = self.res.resolve(&base, &r).ok_or_else(|| err(SchemaErrorKind::UnresolvedRef(r.clone()), p.kw_ptr(kw)))?;
        let root = self.res.docs[loc.doc].value.clone();
        Ok(Conjunct {
            node: Conjunct::locate(&root, &loc.ptr),
            root,
            at: if loc.doc == 0 { loc.ptr.clone() } else { p.kw_ptr(kw) },
            ptr: loc.ptr,
            doc: loc.doc,
            real: true,
            derived: p.derived,
            consumed: 0,
        })
    }

    /// Expands `$ref` and `allOf` into a flat list; `Ok(None)` means the conjunction is empty
    /// (a `false` schema).
    fn flatten(&mut self, parts: Vec<Conjunct>) -> CompileResult<Option<Vec<Conjunct>>> {
        let mut out: Vec<Conjunct> = Vec::new();
        let mut queue: std::collections::VecDeque<Conjunct> = parts.into();
        let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
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
            if p.consumed & C_REF == 0 && p.obj().is_some_and(|o| o.contains_key("$ref")) {
                let target = self.resolve_ref(&p, "$ref")?;
                p.consumed |= C_REF;
                if self.draft(&p).ref_overrides_siblings() {
                    p.consumed |= C_REF_ONLY;
                }
                children.push(target);
            }
            if p.consumed & C_ALLOF == 0 {
                if let Some(all) = p.get("allOf") {
                    let n = all.as_array().ok_or_else(|| invalid("allOf", "must be an array", p.kw_ptr("allOf")))?.len();
                    for i in 0..n {
                        children.push(p.sub(&format!("/allOf/{i}")));
                    }
                    p.consumed |= C_ALLOF;
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

    fn conj(&mut self, parts: Vec<Conjunct>) -> CompileResult<Expr> {
        let Some(mut parts) = self.flatten(parts)? else { return Ok(nothing()) };
        if parts.is_empty() {
            let root = Rc::new(Value::Object(Map::new()));
            parts.push(Conjunct { node: Conjunct::locate(&root, ""), root, ptr: String::new(), doc: 0, at: String::new(), real: false, derived: false, consumed: 0 });
        }
        // Distribute the first combinator found.
        for i in 0..parts.len() {
            let p = parts[i].clone();
            if p.obj().is_none() {
                continue;
            }
            if p.consumed & C_ANYOF == 0 && p.get("anyOf").is_some() {
                let n = p.get("anyOf").and_then(|a| a.as_array()).ok_or_else(|| invalid("anyOf", "must be an array", p.kw_ptr("anyOf")))?.len();
                parts[i].consumed |= C_ANYOF;
                let mut alts = Vec::new();
                for j in 0..n {
                    let mut v = parts.clone();
                    v.push(p.sub(&format!("/anyOf/{j}")));
                    alts.push(self.schema(v)?);
                }
                return Ok(alt_of(alts));
            }
            if p.consumed & C_ONEOF == 0 && p.get("oneOf").is_some() {
                let n = p.get("oneOf").and_then(|a| a.as_array()).ok_or_else(|| invalid("oneOf", "must be an array", p.kw_ptr("oneOf")))?.len();
                parts[i].consumed |= C_ONEOF;
                let branches: Vec<Conjunct> = (0..n).map(|j| p.sub(&format!("/oneOf/{j}"))).collect();
                let mut sigs = Vec::new();
                for br in &branches {
                    sigs.push(crate::negate::signature(self, &parts, br)?);
                }
                let live: Vec<usize> = (0..n).filter(|&j| !sigs[j].empty).collect();
                let overlapping = (0..live.len()).any(|a| (a + 1..live.len()).any(|b| !sigs[live[a]].disjoint(&sigs[live[b]])));
                if overlapping && live.len() <= 6 {
                    // Exact form: branch i and the negation of every other branch.
                    let negs: Result<Vec<Conjunct>, SchemaError> = live.iter().map(|&j| crate::negate::negate(self, &branches[j])).collect();
                    if let Ok(negs) = negs {
                        let mut alts = Vec::new();
                        for (a, &i) in live.iter().enumerate() {
                            let mut v = parts.clone();
                            v.push(branches[i].clone());
                            for (b, neg) in negs.iter().enumerate() {
                                if a != b && !sigs[i].disjoint(&sigs[live[b]]) {
                                    v.push(neg.clone());
                                }
                            }
                            alts.push(self.schema(v)?);
                        }
                        return Ok(alt_of(alts));
                    }
                }
                for a in 0..live.len() {
                    for b in a + 1..live.len() {
                        if !sigs[live[a]].disjoint(&sigs[live[b]]) {
                            self.refuse(
                                "oneOf",
                                format!("branches {} and {} may both match the same instance (formwork enforces oneOf only when branches are provably disjoint, by type or by a const/enum property, or when every branch can be negated)", live[a], live[b]),
                                p.kw_ptr("oneOf"),
                            )?;
                        }
                    }
                }
                // Reached only when no two live branches may overlap (else refused above).
                if !overlapping {
                    parts[i].consumed |= C_ONEOF_DISJOINT;
                }
                let mut alts = Vec::new();
                for j in live {
                    let mut v = parts.clone();
                    v.push(branches[j].clone());
                    alts.push(self.schema(v)?);
                }
                return Ok(alt_of(alts));
            }
            if p.consumed & C_IF == 0 && p.get("if").is_some() {
                parts[i].consumed |= C_IF;
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
            if p.consumed & C_DEPS == 0 && ["dependentRequired", "dependentSchemas", "dependencies"].iter().any(|k| p.get(k).is_some()) {
                parts[i].consumed |= C_DEPS;
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
            if p.consumed & C_NOT == 0 && p.get("not").is_some() {
                parts[i].consumed |= C_NOT;
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
        self.flat(parts)
    }

    /// Compiles a flat conjunction (no combinators left).
    fn flat(&mut self, parts: Vec<Conjunct>) -> CompileResult<Expr> {
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
        let mut types = T_ALL;
        for p in &parts {
            if let Some(t) = p.get("type") {
                types &= type_bits(t).ok_or_else(|| invalid("type", "must be a type name or an array of them", p.kw_ptr("type")))?;
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
                if types & value_type(&v) == 0 || excluded.iter().any(|e| json_eq(e, &v)) {
                    continue;
                }
                if self.value_ok(&parts, &v)? {
                    out.push(self.literal(&v));
                }
            }
            return Ok(alt_of(out));
        }
        let mut alts = Vec::new();
        if types & T_NULL != 0 && !excluded.iter().any(|e| e.is_null()) {
            alts.push(Expr::lit("null"));
        }
        if types & T_BOOL != 0 {
            for (b, s) in [(true, "true"), (false, "false")] {
                if !excluded.iter().any(|e| e == &Value::Bool(b)) {
                    alts.push(Expr::lit(s));
                }
            }
        }
        if types & (T_INT | T_FRAC) != 0 {
            alts.push(crate::number::compile(self, &parts, types & T_FRAC == 0, &excluded)?);
        }
        if types & T_STR != 0 {
            alts.push(crate::string::compile(self, &parts, &excluded)?);
        }
        if types & T_ARR != 0 {
            if excluded.iter().any(|e| e.is_array()) {
                self.refuse("not", "excluding particular array values", parts[0].at.clone())?;
            }
            let seps = self.seps();
            alts.push(self.nested(|cx| crate::array::compile(cx, &parts, &seps))?);
        }
        if types & T_OBJ != 0 {
            if excluded.iter().any(|e| e.is_object()) {
                self.refuse("not", "excluding particular object values", parts[0].at.clone())?;
            }
            let seps = self.seps();
            alts.push(self.nested(|cx| crate::object::compile(cx, &parts, &seps))?);
        }
        Ok(alt_of(alts))
    }

    /// Is `v` valid against every real part (exact, through `jsonschema`)?
    pub fn value_ok(&mut self, parts: &[Conjunct], v: &Value) -> CompileResult<bool> {
        for p in parts {
            if !p.real {
                // Derived parts come from real ones that stay in the list; only check the
                // simple keywords they carry.
                if let Some(Value::Array(ex)) = p.get("x-formwork-not-values") {
                    if ex.iter().any(|e| json_eq(e, v)) {
                        return Ok(false);
                    }
                }
                continue;
            }
            let ok = self.validate_at(p, v)?;
            if !ok {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn validate_at(&mut self, p: &Conjunct, v: &Value) -> CompileResult<bool> {
        if p.consumed & C_REF_ONLY != 0 {
            // Drafts 4-7: the `$ref` replaced this object, and its target is a part of the
            // same conjunction (checked there).
            return Ok(true);
        }
        // The `$ref` target and `allOf` branches already expanded into this conjunction are
        // parts of their own, each checked against `v`: leave them out here, so that the
        // subschema can often be checked on its own instead of through the validator of
        // its whole document (which compiles every definition and every regex in it). So is
        // the `anyOf` branch this conjunction took (a value valid for it satisfies the
        // `anyOf`), and the `oneOf` branch when the branches are pairwise disjoint (a value
        // valid for it matches no other). An exact `oneOf` with overlapping branches keeps its
        // `oneOf`: the negations of the others are not checked here.
        let strip = match p.value() {
            Value::Object(o) if !o.contains_key("unevaluatedProperties") && !o.contains_key("unevaluatedItems") => {
                p.consumed & (C_REF | C_ALLOF | C_ANYOF | C_ONEOF_DISJOINT)
            }
            _ => 0,
        };
        let ck = (p.doc, p.ptr.clone(), strip);
        match self.local_validators.get(&ck) {
            Some(Some(val)) => return Ok(val.is_valid(v)),
            Some(None) => return self.validate_in_document(p, v),
            None => {}
        }
        let mut sub = p.value().clone();
        if let Value::Object(o) = &mut sub {
            if strip & C_REF != 0 {
                o.remove("$ref");
            }
            if strip & C_ALLOF != 0 {
                o.remove("allOf");
            }
            if strip & C_ANYOF != 0 {
                o.remove("anyOf");
            }
            if strip & C_ONEOF_DISJOINT != 0 {
                o.remove("oneOf");
            }
            if strip != 0 {
                // Definitions are reached only through references.
                o.remove("$defs");
                o.remove("definitions");
            }
        }
        // Fast path: a subschema without references validates on its own.
        if !has_ref(&sub) {
            let draft = self.draft(p);
            let mut wrapped = sub;
            if let Value::Object(o) = &mut wrapped {
                o.remove("$id");
                o.remove("id");
            }
            let opts = SchemaOptions { draft, ..Default::default() };
            if let Ok(o) = crate::validator_options(&wrapped, &opts) {
                if let Ok(val) = o.build(&wrapped) {
                    let ok = val.is_valid(v);
                    self.local_validators.insert(ck, Some(Rc::new(val)));
                    return Ok(ok);
                }
            }
        }
        self.local_validators.insert(ck, None);
        self.validate_in_document(p, v)
    }

    /// Is `v` valid at `p`'s location, through the validator of its whole document?
    fn validate_in_document(&mut self, p: &Conjunct, v: &Value) -> CompileResult<bool> {
        if !self.validators.contains_key(&p.doc) {
            let root = self.res.docs[p.doc].value.clone();
            let map = crate::validator_options(&root, self.opts).ok().and_then(|o| o.build_map(&root).ok()).map(Rc::new);
            self.validators.insert(p.doc, map);
        }
        let key = format!("#{}", p.ptr);
        if let Some(Some(m)) = self.validators.get(&p.doc) {
            if let Some(val) = m.get(&key) {
                return Ok(val.is_valid(v));
            }
        }
        Err(unsupported("enum", "cannot check enum values against this subschema", p.at.clone()))
    }

    /// A JSON value as grammar, laid out in the whitespace style at the current level.
    pub fn literal(&mut self, v: &Value) -> Expr {
        match v {
            Value::Array(a) => {
                let seps = self.seps();
                let items: Vec<Expr> = self.nested(|cx| a.iter().map(|x| cx.literal(x)).collect());
                let mut body = Vec::new();
                for (i, x) in items.into_iter().enumerate() {
                    if i > 0 {
                        body.push(seps.comma.clone());
                    }
                    body.push(x);
                }
                if a.is_empty() {
                    seps.empty("[", "]")
                } else {
                    seps.wrap("[", Expr::seq(body), false, "]")
                }
            }
            Value::Object(o) => {
                let seps = self.seps();
                let members: Vec<(String, Expr, bool)> = self.nested(|cx| o.iter().map(|(k, x)| (k.clone(), cx.literal(x), true)).collect());
                if self.opts.key_order == crate::KeyOrder::Any && o.len() > 1 {
                    return crate::object::unordered(&seps, &members, Vec::new(), 0, None);
                }
                let mut body = Vec::new();
                for (i, (k, x, _)) in members.into_iter().enumerate() {
                    if i > 0 {
                        body.push(seps.comma.clone());
                    }
                    body.extend([Expr::lit(serde_json::to_string(&k).unwrap_or_default()), seps.colon.clone(), x]);
                }
                if o.is_empty() {
                    seps.empty("{", "}")
                } else {
                    seps.wrap("{", Expr::seq(body), false, "}")
                }
            }
            Value::Number(n) => {
                // Integral floats print as `1.0`; accept the integer spelling too.
                let s = n.to_string();
                if n.is_i64() || n.is_u64() {
                    Expr::seq([Expr::lit(s), crate::number::zero_fraction()])
                } else if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 1e15) {
                    Expr::alt([Expr::seq([Expr::lit(format!("{}", f as i64)), crate::number::zero_fraction()]), Expr::lit(s)])
                } else {
                    Expr::lit(s)
                }
            }
            v => Expr::lit(serde_json::to_string(v).unwrap_or_default()),
        }
    }
}

fn rule_name(ptr: &str) -> String {
    let s: String = ptr
        .trim_start_matches('/')
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .collect();
    let s = s.trim_matches('-').to_string();
    let s = if s.len() > 40 { s[s.len() - 40..].trim_start_matches('-').to_string() } else { s };
    if s.is_empty() {
        "schema".into()
    } else {
        s
    }
}

/// Type bits of a `type` keyword value.
/// Whether `v` has a `$ref`, `$dynamicRef` or `$recursiveRef` keyword anywhere (a conservative
/// test: a property that happens to be named `$ref` counts too, which only sends the value to
/// the document's validator).
fn has_ref(v: &Value) -> bool {
    match v {
        Value::Object(o) => o.iter().any(|(k, x)| matches!(k.as_str(), "$ref" | "$dynamicRef" | "$recursiveRef") || has_ref(x)),
        Value::Array(a) => a.iter().any(has_ref),
        _ => false,
    }
}

pub(crate) fn type_bits(t: &Value) -> Option<u8> {
    fn one(s: &str) -> Option<u8> {
        Some(match s {
            "null" => T_NULL,
            "boolean" => T_BOOL,
            "object" => T_OBJ,
            "array" => T_ARR,
            "string" => T_STR,
            "integer" => T_INT,
            "number" => T_INT | T_FRAC,
            _ => return None,
        })
    }
    match t {
        Value::String(s) => one(s),
        Value::Array(a) => a.iter().try_fold(0u8, |acc, x| Some(acc | one(x.as_str()?)?)),
        _ => None,
    }
}

/// The type bit of a value.
pub(crate) fn value_type(v: &Value) -> u8 {
    match v {
        Value::Null => T_NULL,
        Value::Bool(_) => T_BOOL,
        Value::Object(_) => T_OBJ,
        Value::Array(_) => T_ARR,
        Value::String(_) => T_STR,
        Value::Number(n) => {
            if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) {
                T_INT
            } else {
                T_FRAC
            }
        }
    }
}

/// JSON equality (numbers by value).
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(i), Some(j)) = (x.as_i64(), y.as_i64()) {
                i == j
            } else if let (Some(i), Some(j)) = (x.as_u64(), y.as_u64()) {
                i == j
            } else {
                x.as_f64() == y.as_f64()
            }
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b)),
        (Value::Object(x), Value::Object(y)) => x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w))),
        _ => a == b,
    }
}
