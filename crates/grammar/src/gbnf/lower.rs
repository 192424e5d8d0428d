//! [`Ast`] to [`Grammar`]: resolve names, normalize classes, canonicalize structure.
//!
//! Rules get ids in definition order (so printing rules in id order and parsing the text
//! again gives the same ids). Groups disappear; sequences and alternations are flattened
//! into the canonical form described in the [module docs](super).

use super::ast::{Ast, Node, NodeKind};
use super::error::{GbnfError, GbnfErrorKind, Span};
use crate::{Expr, Grammar, GrammarBuilder, IrError, RuleId};
use std::collections::HashMap;

impl Ast {
    /// Lowers the AST to a checked [`Grammar`] rooted at `root`. `source` is the text the
    /// AST was parsed from (errors show its lines).
    ///
    /// Errors: a rule defined twice, a reference to an undefined rule, no `root` rule, or a
    /// root that matches nothing.
    pub fn to_grammar(&self, source: &str) -> Result<Grammar, GbnfError> {
        let err = |kind, span| GbnfError::new(kind, span, source);
        let mut b = GrammarBuilder::new();
        let mut ids: HashMap<&str, RuleId> = HashMap::with_capacity(self.rules.len());
        for r in &self.rules {
            if ids.contains_key(r.name.as_str()) {
                return Err(err(GbnfErrorKind::DuplicateRule(r.name.clone()), r.name_span));
            }
            ids.insert(&r.name, b.rule_id(&r.name));
        }
        let Some(root) = self.rules.iter().find(|r| r.name == "root") else {
            return Err(err(GbnfErrorKind::MissingRoot, Span::point(0)));
        };
        for r in &self.rules {
            let expr = lower(&r.body, &ids).map_err(|(name, span)| err(GbnfErrorKind::UndefinedRule(name), span))?;
            b.define(&r.name, expr);
        }
        let g = b.build("root").map_err(|e| {
            let kind = match e {
                IrError::Undefined(n) => GbnfErrorKind::UndefinedRule(n),
                IrError::Duplicate(n) => GbnfErrorKind::DuplicateRule(n),
                IrError::NoRoot(_) => GbnfErrorKind::MissingRoot,
                other => GbnfErrorKind::Ir(other),
            };
            err(kind, Span::point(0))
        })?;
        if !productive_rules(&g)[g.root().index()] {
            return Err(err(GbnfErrorKind::MatchesNothing("root".into()), root.name_span));
        }
        Ok(g)
    }
}

/// Lowers one node. Recursion depth is bounded by `Limits::max_nesting` (checked by the
/// parser). An undefined name comes back as `(name, span)`.
fn lower(n: &Node, ids: &HashMap<&str, RuleId>) -> Result<Expr, (String, Span)> {
    Ok(match &n.kind {
        NodeKind::Literal(s) => Expr::Literal(s.clone()),
        NodeKind::Class { negated, items } => Expr::class(items.iter().map(|i| (i.lo, i.hi)), *negated),
        NodeKind::Any => Expr::any_char(),
        NodeKind::RuleRef(name) => match ids.get(name.as_str()) {
            Some(&id) => Expr::Rule(id),
            None => return Err((name.clone(), n.span)),
        },
        NodeKind::Token(t) => Expr::Token(t.clone()),
        NodeKind::NotToken(t) => Expr::NotToken(t.clone()),
        NodeKind::Group(inner) => lower(inner, ids)?,
        NodeKind::Seq(items) => {
            let mut out = Vec::with_capacity(items.len());
            for i in items {
                match lower(i, ids)? {
                    Expr::Seq(v) => out.extend(v),
                    e => out.push(e),
                }
            }
            if out.len() == 1 {
                out.pop().unwrap()
            } else {
                Expr::Seq(out)
            }
        }
        NodeKind::Alt(branches) => {
            let mut out = Vec::with_capacity(branches.len());
            for b in branches {
                match lower(b, ids)? {
                    Expr::Alt(v) => out.extend(v),
                    e => out.push(e),
                }
            }
            Expr::Alt(out)
        }
        NodeKind::Repeat { node, op } => {
            let (min, max) = op.bounds();
            Expr::Repeat { expr: Box::new(lower(node, ids)?), min, max }
        }
    })
}

/// For each rule, whether it can derive at least one finite string (of text or tokens).
/// A least fixpoint: rules start unproductive and become productive once some alternative
/// is made only of productive parts.
pub(crate) fn productive_rules(g: &Grammar) -> Vec<bool> {
    let mut prod = vec![false; g.rules().len()];
    loop {
        let mut changed = false;
        for (i, r) in g.rules().iter().enumerate() {
            if !prod[i] && productive(&r.expr, &prod) {
                prod[i] = true;
                changed = true;
            }
        }
        if !changed {
            return prod;
        }
    }
}

fn productive(e: &Expr, prod: &[bool]) -> bool {
    // Iterative over the expression: a work list of (expr) with AND/OR resolved by a
    // post-order evaluation stack, so any IR depth is safe.
    enum W<'a> {
        Visit(&'a Expr),
        All(usize),
        Any(usize),
    }
    let mut work = vec![W::Visit(e)];
    let mut vals: Vec<bool> = Vec::new();
    while let Some(w) = work.pop() {
        match w {
            W::Visit(e) => match e {
                Expr::Literal(_) | Expr::Token(_) | Expr::NotToken(_) => vals.push(true),
                Expr::Class(r) => vals.push(!r.is_empty()),
                Expr::Rule(id) => vals.push(prod[id.index()]),
                Expr::Repeat { min: 0, .. } => vals.push(true),
                Expr::Repeat { expr, .. } => work.push(W::Visit(expr)),
                Expr::Seq(v) => {
                    work.push(W::All(v.len()));
                    work.extend(v.iter().map(W::Visit));
                }
                Expr::Alt(v) => {
                    work.push(W::Any(v.len()));
                    work.extend(v.iter().map(W::Visit));
                }
                // Productive when its required members are (an approximation when `min`
                // asks for more members than are required).
                Expr::Unordered(u) => {
                    let req: Vec<&Expr> = u.members.iter().filter(|(_, r)| *r).map(|(e, _)| e).collect();
                    work.push(W::All(req.len()));
                    work.extend(req.into_iter().map(W::Visit));
                }
            },
            W::All(n) => {
                let at = vals.len() - n;
                let v = vals[at..].iter().all(|&b| b);
                vals.truncate(at);
                vals.push(v);
            }
            W::Any(n) => {
                let at = vals.len() - n;
                let v = vals[at..].iter().any(|&b| b);
                vals.truncate(at);
                vals.push(v);
            }
        }
    }
    vals.pop().unwrap_or(true)
}
