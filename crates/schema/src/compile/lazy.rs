//! Lazy compilation ([`compile_lazy`]): a schema's locations that the scan of
//! `compiler::defer` finds deferrable are compiled when the matcher first reaches them, so
//! a large schema pays up front for what its first masks need.
//!
//! - **Where.** At [`Compiler::schema`], a memoized location (its own rule) below the root,
//!   in document 0, that the scan passes: its rule is declared with a placeholder body and
//!   remembered with what compiling it needs (its parts, level and depth).
//! - **When.** The compiled grammar keeps the [`Compiler`] as its
//!   [`RuleSource`]; expanding a rule compiles its location as [`Compiler::schema`] would
//!   have (the memo, shared rules, validators and automata of earlier parts are reused),
//!   and hands over its body with the rules made for it, some of them deferred in turn.
//! - **What is kept.** The grammar's language is the same as [`compile`](super::compile)'s:
//!   the same rules, built later. Refusals and warnings are all known up front: a
//!   deferrable location cannot be refused, and the warnings it can give (a `format` left
//!   as an annotation) are found by the scan and returned with the others; an expansion that fails anyway (a limit
//!   such as `max_rules` reached by the parts built so far) leaves its rule matching
//!   nothing, which never widens the language, and is logged.

use super::{check_size, compile_root};
use crate::compiler::{Compiler, Deferrals, Deferred};
use crate::conjunct::Conjunct;
use crate::exprs::err;
use crate::{SchemaError, SchemaErrorKind, SchemaOptions, Warning};
use formwork_grammar::{Expansion, Expr, LazyGrammar, RuleId, RuleSource};
use serde_json::Value;
use std::borrow::Cow;

/// [`compile_with_warnings`](super::compile_with_warnings), with the deferrable locations
/// compiled on first reach (see the module docs). The warnings are all of them.
pub fn compile_lazy(schema: &Value, opts: &SchemaOptions) -> Result<(LazyGrammar, Vec<Warning>), SchemaError> {
    // Checked before the copy the grammar keeps is made.
    check_size(schema, opts)?;
    compile_checked(std::sync::Arc::new(schema.clone()), opts)
}

/// [`compile_lazy`] on a schema the caller shares: the grammar keeps (and expands its
/// deferred rules from) this document instead of a copy of its own (a large schema's deep
/// copy was 6 % of its compile). For a caller that holds the schema as an `Arc` already, or
/// owns one it is done with.
pub fn compile_lazy_shared(schema: std::sync::Arc<Value>, opts: &SchemaOptions) -> Result<(LazyGrammar, Vec<Warning>), SchemaError> {
    check_size(&schema, opts)?;
    compile_checked(schema, opts)
}

/// [`compile_lazy_shared`] once the size is checked.
fn compile_checked(schema: std::sync::Arc<Value>, opts: &SchemaOptions) -> Result<(LazyGrammar, Vec<Warning>), SchemaError> {
    let mut cx = Compiler::new_shared(schema, Cow::Owned(opts.clone()));
    cx.lazy = Some(Box::new(Deferrals { pattern_ok: Some(crate::regex::supported_alone), ..Default::default() }));
    compile_root(&mut cx)?;
    let grammar = cx.b.build_so_far("root").map_err(|e| err(SchemaErrorKind::Grammar(e.to_string()), ""))?;
    let mut warnings = std::mem::take(&mut cx.warnings);
    let mut said: foldhash::HashSet<String> = warnings.iter().map(ToString::to_string).collect();
    for w in cx.scan_warnings() {
        if said.insert(w.to_string()) {
            warnings.push(w);
        }
    }
    let lazy = cx.lazy.as_mut().expect("set above");
    lazy.fresh.clear();
    let mut deferred: Vec<RuleId> = lazy.items.keys().map(|&r| RuleId(r)).collect();
    deferred.sort();
    tracing::debug!(rules = grammar.rules().len(), deferred = deferred.len(), warnings = warnings.len(), "compiled JSON schema, lazily");
    let source = Source { cx, said: warnings.clone() };
    Ok((LazyGrammar { grammar, deferred, source: Box::new(source) }, warnings))
}

impl Compiler<'_> {
    /// May the location of `parts` be compiled on first reach (see the module docs)?
    pub(super) fn may_defer(&mut self, parts: &[Conjunct]) -> bool {
        let [p] = parts else { return false };
        self.depth > 0
            && p.real
            && p.doc == 0
            && p.consumed.is_empty()
            && !(self.force_first.is_some() && self.depth <= 2)
            && self.deferrable(p.value())
    }

    /// Defers rule `id` (named `name`) for the location of `parts`.
    pub(super) fn defer(&mut self, id: RuleId, name: String, parts: Vec<Conjunct>) {
        self.b.define(&name, Expr::empty());
        let item = Deferred { name: name.clone(), parts, level: self.level, depth: self.depth };
        let lazy = self.lazy.as_mut().expect("only called when lazy");
        lazy.items.insert(id.0, item);
        lazy.fresh.push((id, name));
    }
}

/// The compiler, kept by the compiled grammar to build its deferred rules, and the
/// warnings said up front.
struct Source {
    cx: Compiler<'static>,
    said: Vec<Warning>,
}

impl RuleSource for Source {
    fn expand(&mut self, rule: RuleId) -> Result<Expansion, String> {
        let cx = &mut self.cx;
        let lazy = cx.lazy.as_mut().ok_or("not a lazy compilation")?;
        let item = lazy.items.remove(&rule.0).ok_or_else(|| format!("rule #{} is not deferred", rule.0))?;
        let from = cx.b.len();
        let warnings = cx.warnings.len();
        cx.start = std::time::Instant::now();
        cx.level = item.level;
        cx.depth = item.depth;
        cx.define_location(&item.name, item.parts).map_err(|e| e.to_string())?;
        let unsaid: Vec<Warning> = cx.warnings.drain(warnings..).filter(|w| !self.said.contains(w)).collect();
        if !unsaid.is_empty() {
            // The scan rules this out; said loudly if it ever happens.
            tracing::warn!(rule = %item.name, warnings = ?unsaid, "a deferred schema location gave warnings not said up front");
        }
        let lazy = cx.lazy.as_mut().expect("checked above");
        let fresh = std::mem::take(&mut lazy.fresh);
        let mut rules = Vec::new();
        rules.push((rule, cx.b.take_rule(rule).ok_or("the deferred rule has no body")?));
        for id in from..cx.b.len() {
            let id = RuleId(id as u32);
            if fresh.iter().any(|(f, _)| *f == id) {
                cx.b.take_rule(id); // its placeholder
                continue;
            }
            let r = cx.b.take_rule(id).ok_or_else(|| format!("rule #{} was declared and never defined", id.0))?;
            rules.push((id, r));
        }
        Ok(Expansion { rules, deferred: fresh })
    }
}
