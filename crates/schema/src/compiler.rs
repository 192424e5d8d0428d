//! [`Compiler`]: the state of one schema compilation and the services every type's emitter
//! uses — options, the grammar being built, refusals and lenient warnings, limits, rules
//! shared between places, separators by nesting level, `$ref` resolution, and values
//! (`values`: `enum`/`const` checks and literals). The recursion over subschemas
//! (`Compiler::schema`) is `crate::compile`'s; nothing here calls it.

use crate::conjunct::{Conjunct, Consumed};
use crate::exprs::{err, invalid, unsupported};
use crate::resolve::{Loc, Resolver};
use crate::{effective_draft, Draft, SchemaError, SchemaErrorKind, SchemaOptions, Warning, Whitespace};
use formwork_grammar::{Expr, GrammarBuilder, RuleId};
use serde_json::Value;
// Keys come from untrusted schemas: a seeded hasher, fast on short strings.
use foldhash::HashMap;
use std::sync::Arc;
use std::time::Instant;

mod defer;
mod values;
pub(crate) use defer::{Deferrals, Deferred};

/// What every step of the compiler returns: a value, or the refusal or error that stops it.
pub(crate) type CompileResult<T> = Result<T, SchemaError>;

/// What the memo of conjunctions is keyed by: the parts' keys in order, and the nesting
/// level where the layout depends on it (pretty whitespace; else 0).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct MemoKey {
    pub parts: Vec<crate::conjunct::PartKey>,
    pub level: u32,
}

/// The state of one schema compilation: the documents and their references, the options,
/// the rules shared between places, the validators built for `enum`/`const` checks, the
/// warnings of lenient mode, and the limits' counters.
pub(crate) struct Compiler<'a> {
    pub opts: std::borrow::Cow<'a, SchemaOptions>,
    pub res: Resolver<'a>,
    pub b: GrammarBuilder,
    /// The rule of each conjunction of real locations compiled so far (see `Compiler::schema`).
    pub(crate) memo: HashMap<MemoKey, RuleId>,
    pub warnings: Vec<Warning>,
    ref_expansions: usize,
    pub depth: usize,
    pub(crate) validators: HashMap<usize, Option<Arc<jsonschema::ValidatorMap>>>,
    /// Validators of subschemas checked on their own, by document, pointer and the
    /// conjunction keywords left out (`Consumed::REF`, `ALLOF`, `ANYOF`, `ONEOF_DISJOINT`); `None`: that subschema is checked
    /// through its document's validator (it has references).
    pub(crate) local_validators: HashMap<(usize, String, Consumed), Option<Arc<jsonschema::Validator>>>,
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
    /// repeat the same map type at many places (see [`Compiler::remembered`]).
    pub pattern_regions_memo: HashMap<String, Option<Vec<(u32, Expr)>>>,
    /// Results of the string-body automata that may be over the size bounds (`None`), by
    /// what they depend on (see [`Compiler::remembered`]).
    pub automaton_memo: HashMap<String, Option<Expr>>,
    /// The negations of `oneOf` branches built so far, by branch and the closed universe of
    /// keys they were built within (see `negate::negate_within`): a `oneOf` conjoined with
    /// different parts at different places is compiled once per place, and its negations,
    /// which depend only on the branch, once.
    pub(crate) negations: HashMap<(crate::conjunct::PartKey, Option<Vec<String>>), Conjunct>,
    /// Where each `$ref` resolved, by base URI and reference: its location and node (a
    /// reference is resolved each time a part meets it, and large schemas meet the same
    /// few references thousands of times: joining, decoding and walking the pointer twice
    /// was 6 % of the schema compile of half A's ten slowest first masks at stop 53).
    ref_targets: HashMap<(String, String), (Loc, crate::conjunct::Node)>,
    /// The rules of the memo whose body matches nothing (a memo hit on one reads as
    /// nothing, as the first compilation did).
    pub(crate) nothing_rules: std::collections::HashSet<RuleId>,
    /// Lazy compilation: the locations deferred (`None`: everything is compiled now).
    pub lazy: Option<Box<Deferrals>>,
    /// Which locations may be deferred (module `defer`).
    scan: defer::Scan,
    /// When compiling began (for `Limits::max_compile_ms`); reset for each deferred part.
    pub start: Instant,
}

impl<'a> Compiler<'a> {
    /// Does `pat` match the decoded key or string `s` (`None`: the pattern has no Rust
    /// translation)? One compiled regex per pattern and schema: the same
    /// `patternProperties` are checked against every listed name of every object that has
    /// them, and the same negated patterns against every enum value.
    pub(crate) fn pattern_matches(&self, pat: &str, s: &str) -> Option<bool> {
        let mut cache = self.key_regexes.borrow_mut();
        let re = cache.entry(pat.to_string()).or_insert_with(|| {
            let rust = crate::ecma::ecma_to_rust(pat).ok()?;
            regex::Regex::new(&rust).ok()
        });
        Some(re.as_ref()?.is_match(s))
    }

    /// A compiler for `schema` (its documents resolved, the whitespace rule defined).
    pub fn new(schema: &Value, opts: std::borrow::Cow<'a, SchemaOptions>) -> Self {
        Self::new_shared(std::sync::Arc::new(schema.clone()), opts)
    }

    /// [`new`](Self::new) on a schema the caller shares (not copied).
    pub fn new_shared(schema: std::sync::Arc<Value>, opts: std::borrow::Cow<'a, SchemaOptions>) -> Self {
        use std::borrow::Cow;
        let draft = effective_draft(&schema, &opts);
        let remotes = match &opts {
            Cow::Borrowed(o) => Cow::Borrowed(&o.remotes),
            Cow::Owned(o) => Cow::Owned(o.remotes.clone()),
        };
        let res = Resolver::new_shared(schema, draft, remotes);
        let ws = match opts.whitespace {
            Whitespace::Compact | Whitespace::Pretty { .. } => Expr::empty(),
            Whitespace::Flexible { max_run } => Expr::repeat(Expr::class([(' ', ' '), ('\t', '\t'), ('\n', '\n'), ('\r', '\r')], false), 0, max_run),
        };
        let mut b = GrammarBuilder::new();
        let ws_id = b.define("ws", ws);
        Compiler {
            opts,
            res,
            b,
            memo: HashMap::default(),
            warnings: Vec::new(),
            start: Instant::now(),
            ref_expansions: 0,
            depth: 0,
            validators: HashMap::default(),
            local_validators: HashMap::default(),
            ws: Expr::Rule(ws_id),
            level: 0,
            force_first: None,
            force_first_applied: false,
            uid: 0,
            shared_rules: HashMap::default(),
            key_regexes: Default::default(),
            pattern_regions_memo: HashMap::default(),
            automaton_memo: HashMap::default(),
            negations: HashMap::default(),
            ref_targets: HashMap::default(),
            nothing_rules: Default::default(),
            lazy: None,
            scan: defer::Scan::default(),
        }
    }

    /// The root of the first document, as a conjunct.
    pub(crate) fn root_part(&self) -> Conjunct {
        let root = self.res.docs[0].value.clone();
        Conjunct {
            node: Conjunct::locate(&root, ""),
            root,
            ptr: String::new(),
            doc: 0,
            at: String::new(),
            real: true,
            derived: false,
            consumed: Consumed::empty(),
            content: None,
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

    /// A rule for `key` defined from `body` the first time, reused after (as
    /// [`shared`](Self::shared)), for costly leaves that many places repeat (the same
    /// `pattern` at twenty properties: one regex parse and one DFA, not twenty). Not shared
    /// when computing it recorded lenient-mode warnings (each place records its own), nor
    /// when it matches nothing (left visible to the callers that drop such members).
    pub fn shared_leaf(&mut self, key: &str, name: &str, body: impl FnOnce(&mut Self) -> CompileResult<Expr>) -> CompileResult<Expr> {
        if let Some(&id) = self.shared_rules.get(key) {
            return Ok(Expr::Rule(id));
        }
        let warnings = self.warnings.len();
        let e = body(self)?;
        if self.warnings.len() != warnings || crate::exprs::is_nothing(&e) {
            return Ok(e);
        }
        let id = match e {
            Expr::Rule(id) => id,
            e => {
                let name = self.b.fresh_name(name);
                self.b.define(&name, e)
            }
        };
        self.shared_rules.insert(key.to_string(), id);
        Ok(Expr::Rule(id))
    }

    /// `build`'s result for `key`, computed once per schema and kept in the map `memo` picks
    /// (for the automata of string bodies: a DFA rule, or `None` when it is over the size
    /// bounds, which is remembered too, so a product too big to build is not tried again at
    /// every place that repeats it). Not remembered when computing it recorded lenient-mode
    /// warnings: each place records its own.
    pub fn remembered<T: Clone>(
        &mut self,
        memo: fn(&mut Self) -> &mut HashMap<String, T>,
        key: String,
        build: impl FnOnce(&mut Self, &str) -> CompileResult<T>,
    ) -> CompileResult<T> {
        if let Some(r) = memo(self).get(&key) {
            return Ok(r.clone());
        }
        let warnings = self.warnings.len();
        let r = build(self, &key)?;
        if self.warnings.len() == warnings {
            memo(self).insert(key, r.clone());
        }
        Ok(r)
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
        let root = Arc::new(v);
        Conjunct { node: Conjunct::locate(&root, ""), root, ptr: String::new(), doc: like.doc, at: like.kw_ptr(kw), real: false, derived: true, consumed: Consumed::empty(), content: Some(Default::default()) }
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
        let key = (base, r);
        let (loc, node) = match self.ref_targets.get(&key) {
            Some((loc, node)) => (loc.clone(), node.clone()),
            None => {
                let (base, r) = &key;
                let loc = self.res.resolve(base, r).ok_or_else(|| err(SchemaErrorKind::UnresolvedRef(r.clone()), p.kw_ptr(kw)))?;
                let node = Conjunct::locate(&self.res.docs[loc.doc].value, &loc.ptr);
                self.ref_targets.insert(key, (loc.clone(), node.clone()));
                (loc, node)
            }
        };
        Ok(Conjunct {
            node,
            root: self.res.docs[loc.doc].value.clone(),
            at: if loc.doc == 0 { loc.ptr.clone() } else { p.kw_ptr(kw) },
            ptr: loc.ptr,
            doc: loc.doc,
            real: true,
            derived: p.derived,
            consumed: Consumed::empty(),
            content: None,
        })
    }
}

/// The compiler outlives `compile` inside lazily compiled grammars, which threads share.
#[allow(dead_code)]
fn compiler_is_send() {
    fn send<T: Send>() {}
    send::<Compiler<'static>>();
}
