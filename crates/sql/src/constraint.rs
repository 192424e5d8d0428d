//! [`SqlConstraint`]: a query generated phase by phase, each phase's grammar built from what
//! the earlier ones produced (see the [crate docs](crate) for the design).
//!
//! ## Branches
//! The constraint holds a few *branches*, each a phase with its own grammar matcher and
//! the text it has matched. When a branch reaches an accepting point of a phase that has a
//! successor (the select list's `FROM`, a table name, a complete join), the successor is
//! started beside it as a new branch, with its grammar built for what the branch's text
//! says (the tables named, the tables in scope, the aliases). A token is allowed when some
//! branch allows it; committing it keeps the branches that allowed it. The mask is the
//! union of the branches' masks, so a token can continue a phase or start the next, but
//! never both at once: a token that would cross a phase boundary (`customers WHERE`) is not
//! offered, and the same text is reached with two tokens. The phases are written so that
//! their boundaries fall before a space, where BPE vocabularies split anyway.
//!
//! Branches exist only while a phase's end is ambiguous (`orders` can still become
//! `order_items`); there are one or two at a time.
//!
//! ## Cost
//! A mask costs one grammar mask per live branch. A phase's grammar is compiled when the
//! phase is first reached with that context and cached in [`SqlGrammars`] (keyed by the
//! phase and its context), so repeated queries over the same tables compile nothing.

use crate::catalog::{Catalog, TableId};
use crate::grammar::{first_table_grammar, rest_grammar, select_grammar, SqlGrammarOptions};
use crate::select::{identifier, SelectSummary};
use formwork_engine::{Constraint, ConstraintFactory};
use formwork_grammar::{CompiledGrammar, Limits, Matcher, TokenIndex};
use formwork_vocab::{TokenId, TokenMask, Vocabulary};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Which phase, and what its grammar depends on: the cache key of a phase's grammar.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum PhaseKey {
    /// `SELECT … FROM`.
    Select,
    /// The first table, one of these.
    First(Vec<TableId>),
    /// A join or the rest of the query, given the tables in scope and what the select list
    /// said.
    Rest { scope: Vec<TableId>, select: Arc<SelectSummary> },
}

/// Most grammars [`SqlGrammars`] keeps; past it the cache is emptied (a query reaches a
/// handful of phases).
const MAX_CACHED: usize = 512;

/// The phase grammars of one catalog, compiled for one vocabulary on first use and shared
/// by every query (thread-safe).
pub struct SqlGrammars {
    catalog: Arc<Catalog>,
    options: SqlGrammarOptions,
    index: Arc<TokenIndex>,
    limits: Limits,
    cache: Mutex<HashMap<PhaseKey, Arc<CompiledGrammar>>>,
    /// Upper bound on the tokens one step can add to a completion plan (see
    /// [`SqlConstraint::completion_fits_after`]).
    plan_slack: usize,
    /// Every printable ASCII byte (all the SQL grammars write) is a token of its own: a
    /// completion of N bytes then takes at most N tokens.
    per_byte: bool,
}

impl std::fmt::Debug for SqlGrammars {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlGrammars").field("tables", &self.catalog.tables().len()).finish_non_exhaustive()
    }
}

impl SqlGrammars {
    /// The grammars of `catalog` for `vocab`. Compiles the first phase now, so that an
    /// unusable catalog fails here.
    pub fn new(catalog: Arc<Catalog>, options: SqlGrammarOptions, vocab: &Arc<Vocabulary>, limits: &Limits) -> Result<Arc<Self>, String> {
        if catalog.tables().is_empty() {
            return Err("the database has no tables (or all of them are hidden)".into());
        }
        let largest = catalog.components().iter().map(Vec::len).max().unwrap_or(1);
        let g = Arc::new(SqlGrammars {
            catalog,
            options,
            index: TokenIndex::for_vocab(vocab),
            limits: limits.clone(),
            cache: Mutex::new(HashMap::new()),
            plan_slack: 64 + 24 * largest,
            per_byte: (0x20u8..0x7f).all(|b| vocab.text_token_by_bytes(&[b]).is_some()),
        });
        g.compiled(&PhaseKey::Select)?;
        Ok(g)
    }

    /// The catalog.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// A constraint at the start of a query.
    pub fn constraint(self: &Arc<Self>) -> Result<SqlConstraint, String> {
        let select = self.compiled(&PhaseKey::Select)?;
        let branch = Branch { key: PhaseKey::Select, select: Arc::new(SelectSummary::default()), matcher: select.matcher(), text: Vec::new() };
        Ok(SqlConstraint { grammars: self.clone(), branches: vec![branch], scratch: TokenMask::new(self.index.vocab().len()), text: Vec::new() })
    }

    fn compiled(&self, key: &PhaseKey) -> Result<Arc<CompiledGrammar>, String> {
        if let Some(c) = self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(key) {
            return Ok(c.clone());
        }
        let cat = &self.catalog;
        let grammar = match key {
            PhaseKey::Select => select_grammar(cat, &self.options),
            PhaseKey::First(tables) => first_table_grammar(cat, tables, &self.options),
            PhaseKey::Rest { scope, select } => rest_grammar(cat, scope, select, &self.options),
        };
        let compiled = CompiledGrammar::with_index(&grammar, self.index.clone(), &self.limits)
            .map_err(|e| format!("the SQL grammar of this database cannot be compiled: {e}"))?;
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        cache.insert(key.clone(), compiled.clone());
        Ok(compiled)
    }
}

/// One phase in progress.
#[derive(Clone, Debug)]
struct Branch {
    key: PhaseKey,
    /// What the select list said (empty while it is being generated).
    select: Arc<SelectSummary>,
    matcher: Matcher,
    /// The text this phase has matched.
    text: Vec<u8>,
}

impl Branch {
    /// Is this a `Rest` phase that has matched a join (so more phases follow)?
    fn is_join(&self) -> bool {
        matches!(self.key, PhaseKey::Rest { .. }) && (self.text.starts_with(b" JOIN ") || self.text.starts_with(b" LEFT JOIN "))
    }

    /// Can the query end here?
    fn is_final(&self) -> bool {
        matches!(self.key, PhaseKey::Rest { .. }) && !self.is_join() && self.matcher.is_accepting()
    }
}

/// A [`Constraint`] for one query over a catalog (see the module docs).
#[derive(Clone, Debug)]
pub struct SqlConstraint {
    grammars: Arc<SqlGrammars>,
    branches: Vec<Branch>,
    scratch: TokenMask,
    /// Everything committed so far.
    text: Vec<u8>,
}

/// Most branches kept at once (more would only come from a catalog whose names are
/// prefixes of each other many times over).
const MAX_BRANCHES: usize = 8;

impl SqlConstraint {
    /// The phase that follows `b` at its current accepting point, if any.
    fn successor(&self, b: &Branch) -> Result<Option<Branch>, String> {
        if !b.matcher.is_accepting() {
            return Ok(None);
        }
        let cat = &self.grammars.catalog;
        let text = String::from_utf8_lossy(&b.text);
        let (key, select) = match &b.key {
            PhaseKey::Select => {
                let select = Arc::new(SelectSummary::parse(&text, cat));
                // One of the tables the select list named (any table when it named none):
                // the others are joined to it along relationships. (An inner join reads the
                // same either way round, and a LEFT JOIN keeps the rows of the table named
                // first, which is then one the answer is about.)
                let tables = if select.required.is_empty() { cat.ids().collect() } else { select.required.clone() };
                (PhaseKey::First(tables), select)
            }
            PhaseKey::First(_) => {
                let Some(t) = identifier(text.trim_start()).and_then(|(n, _)| cat.find(&n)) else {
                    return Err(format!("internal: the first table in {text:?} is not in the catalog"));
                };
                (PhaseKey::Rest { scope: vec![t], select: b.select.clone() }, b.select.clone())
            }
            PhaseKey::Rest { scope, select } => {
                if !b.is_join() {
                    return Ok(None);
                }
                let after = text.split_once("JOIN ").map(|(_, r)| r).unwrap_or_default();
                let Some(t) = identifier(after).and_then(|(n, _)| cat.find(&n)) else {
                    return Err(format!("internal: the joined table in {text:?} is not in the catalog"));
                };
                let mut scope = scope.clone();
                scope.push(t);
                scope.sort();
                (PhaseKey::Rest { scope, select: select.clone() }, b.select.clone())
            }
        };
        let compiled = self.grammars.compiled(&key)?;
        Ok(Some(Branch { key, select, matcher: compiled.matcher(), text: Vec::new() }))
    }

    /// After a commit: starts the successor of every branch at a phase's end, and drops
    /// branches that can go no further and are not the query's end.
    fn settle(&mut self) -> Result<(), String> {
        let mut i = 0;
        while i < self.branches.len() {
            let b = self.branches[i].clone();
            if b.text.is_empty() {
                // A successor just started: it cannot end its phase before matching text.
                i += 1;
                continue;
            }
            if let Some(next) = self.successor(&b)? {
                if self.branches.len() < MAX_BRANCHES {
                    self.branches.push(next);
                }
            }
            i += 1;
        }
        self.branches.retain(|b| !(b.matcher.is_finished() && !b.is_final() && !b.text.is_empty()));
        Ok(())
    }

    /// The query so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.text).into_owned()
    }

    fn commit_inner(&mut self, t: TokenId) -> Result<(), String> {
        let bytes = self.grammars.index.vocab().token_bytes(t).to_vec();
        let mut kept = Vec::with_capacity(self.branches.len());
        for mut b in std::mem::take(&mut self.branches) {
            if b.matcher.is_allowed(t) && b.matcher.commit(t).is_ok() {
                b.text.extend_from_slice(&bytes);
                kept.push(b);
            }
        }
        self.keep(kept, &bytes)
    }

    /// Commits raw bytes (a completion, on a copy): the branches that take all of them go on.
    fn commit_bytes(&mut self, bytes: &[u8]) -> Result<(), String> {
        let mut kept = Vec::with_capacity(self.branches.len());
        for mut b in std::mem::take(&mut self.branches) {
            if b.matcher.commit_bytes(bytes).is_ok() {
                b.text.extend_from_slice(bytes);
                kept.push(b);
            }
        }
        self.keep(kept, bytes)
    }

    /// The branches that took `bytes` go on (an error when none did).
    fn keep(&mut self, kept: Vec<Branch>, bytes: &[u8]) -> Result<(), String> {
        if kept.is_empty() {
            return Err(format!("{:?} does not continue the query", String::from_utf8_lossy(bytes)));
        }
        self.branches = kept;
        self.text.extend_from_slice(bytes);
        self.settle()
    }

    /// The cheapest way to finish, phase by phase, on a copy: the branch with the shortest
    /// byte completion is completed (its successor phase starts), and so on until the query
    /// can end (a few phases: each join adds a table). Returns its length in bytes and, when
    /// `spell`, the tokens that spell it (`Matcher::completion_tokens` per phase; without
    /// `spell` no tokenization is done, which is what makes the budget check cheap).
    fn finish(&self, spell: bool) -> Option<(usize, Vec<TokenId>)> {
        let mut sim = self.clone();
        let (mut bytes_total, mut tokens) = (0, Vec::new());
        for _ in 0..(2 * self.grammars.catalog.tables().len() + 4) {
            if sim.is_accepting() {
                return Some((bytes_total, tokens));
            }
            // A branch at the end of its phase has nothing to add: its successor is a branch
            // of its own.
            let best = sim
                .branches
                .iter()
                .filter(|b| !b.matcher.is_accepting())
                .filter_map(|b| b.matcher.min_completion_len().map(|n| (n, b)))
                .min_by_key(|(n, _)| *n)?
                .1;
            let bytes = best.matcher.shortest_completion()?;
            if bytes.is_empty() {
                return None;
            }
            if spell {
                tokens.extend(best.matcher.clone().completion_tokens()?);
            }
            bytes_total += bytes.len();
            sim.commit_bytes(&bytes).ok()?;
        }
        None
    }
}

impl Constraint for SqlConstraint {
    fn compute_mask(&mut self, mask: &mut TokenMask) {
        match self.branches.as_mut_slice() {
            [only] => only.matcher.compute_mask(mask),
            branches => {
                mask.clear();
                for b in branches {
                    b.matcher.compute_mask(&mut self.scratch);
                    mask.union_with(&self.scratch);
                }
            }
        }
    }

    fn is_allowed(&mut self, t: TokenId) -> bool {
        self.branches.iter_mut().any(|b| b.matcher.is_allowed(t))
    }

    fn commit(&mut self, t: TokenId) -> Result<(), String> {
        self.commit_inner(t)
    }

    fn is_accepting(&self) -> bool {
        self.branches.iter().any(Branch::is_final)
    }

    fn is_complete(&mut self) -> Option<bool> {
        Some(self.is_accepting() && self.branches.iter().all(|b| b.matcher.is_finished()))
    }

    /// See [`SqlConstraint::finish`].
    fn completion_plan(&mut self) -> Option<Vec<TokenId>> {
        self.finish(true).map(|(_, tokens)| tokens)
    }

    /// Far from the end of the budget — more than four times the most one token is expected
    /// to add to a plan (64 tokens plus 24 per table of the largest joinable group: a token
    /// can name a table that then needs a chain of joins) — this answers at once.
    ///
    /// Otherwise, when every byte the grammars write is a token of its own, a completion of
    /// N bytes fits in N tokens: the byte length of the cheapest completion after `t`
    /// (cheap: no tokenization) answers when it fits. Only when it does not is the plan
    /// spelled in tokens, which may take fewer.
    fn completion_fits_after(&mut self, t: TokenId, budget: usize) -> Option<bool> {
        if !self.is_allowed(t) {
            return Some(false);
        }
        if budget > 4 * self.grammars.plan_slack {
            return Some(true);
        }
        let mut sim = self.clone();
        sim.commit_inner(t).ok()?;
        if self.grammars.per_byte && sim.finish(false).is_some_and(|(n, _)| n <= budget) {
            return Some(true);
        }
        Some(sim.completion_plan().is_some_and(|p| p.len() <= budget))
    }

    fn forced_bytes(&mut self) -> Vec<u8> {
        match self.branches.as_slice() {
            [only] if !only.matcher.is_accepting() => only.matcher.forced_bytes(),
            _ => Vec::new(),
        }
    }
}

/// A [`ConstraintFactory`] for a catalog: compiles its grammars once per vocabulary.
#[derive(Debug)]
pub struct SqlFormat {
    catalog: Arc<Catalog>,
    options: SqlGrammarOptions,
    limits: Limits,
    compiled: Mutex<Vec<(std::sync::Weak<Vocabulary>, Arc<SqlGrammars>)>>,
}

impl SqlFormat {
    /// Queries over `catalog`.
    pub fn new(catalog: Arc<Catalog>, options: SqlGrammarOptions, limits: Limits) -> Self {
        SqlFormat { catalog, options, limits, compiled: Mutex::new(Vec::new()) }
    }

    /// The grammars for `vocab` (compiled on first use).
    pub fn grammars(&self, vocab: &Arc<Vocabulary>) -> Result<Arc<SqlGrammars>, String> {
        let mut list = self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        list.retain(|(v, _)| v.strong_count() > 0);
        if let Some((_, g)) = list.iter().find(|(v, _)| v.upgrade().is_some_and(|v| Arc::ptr_eq(&v, vocab))) {
            return Ok(g.clone());
        }
        let g = SqlGrammars::new(self.catalog.clone(), self.options.clone(), vocab, &self.limits)?;
        list.push((Arc::downgrade(vocab), g.clone()));
        Ok(g)
    }
}

impl ConstraintFactory for SqlFormat {
    fn make(&self, vocab: &Arc<Vocabulary>) -> Result<Box<dyn Constraint>, String> {
        Ok(Box::new(self.grammars(vocab)?.constraint()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::tests::shop;

    /// A byte-level vocabulary plus a few whole words, so both one-token-per-phase and
    /// tokens that would cross a phase boundary exist.
    fn vocab() -> Arc<Vocabulary> {
        let mut toks: Vec<String> = (0x20u8..0x7f).map(|b| (b as char).to_string()).collect();
        for w in ["SELECT", " FROM", " customers", " orders", "customers", "orders", ".name", " JOIN", " ON", " WHERE", " =", " 'DE'", "customers WHERE", " order_items", ".id", "_items"] {
            toks.push(w.to_string());
        }
        Arc::new(Vocabulary::from_strings(&toks, &["</s>"]))
    }

    fn tok(v: &Vocabulary, s: &str) -> TokenId {
        v.text_token_by_bytes(s.as_bytes()).unwrap_or_else(|| panic!("no token {s:?}"))
    }

    /// Feeds `text` byte by byte (single-character tokens).
    fn feed(c: &mut SqlConstraint, v: &Vocabulary, text: &str) -> Result<(), String> {
        for ch in text.chars() {
            let t = tok(v, &ch.to_string());
            if !c.is_allowed(t) {
                let phases: Vec<_> = c.branches.iter().map(|b| (b.key.clone(), String::from_utf8_lossy(&b.text).into_owned())).collect();
                return Err(format!("{ch:?} refused after {:?} (phases {phases:?})", c.text()));
            }
            c.commit(t)?;
        }
        Ok(())
    }

    fn constraint() -> (SqlConstraint, Arc<Vocabulary>) {
        let v = vocab();
        let g = SqlGrammars::new(Arc::new(shop()), SqlGrammarOptions::default(), &v, &Limits::default()).unwrap();
        (g.constraint().unwrap(), v)
    }

    #[test]
    fn a_query_needs_every_named_table_in_scope() {
        let (mut c, v) = constraint();
        feed(&mut c, &v, "SELECT customers.name, SUM(orders.total) FROM customers").unwrap();
        assert!(!c.is_accepting(), "orders is not in scope yet");
        assert!(feed(&mut c.clone(), &v, " WHERE").is_err());
        feed(&mut c, &v, " JOIN orders ON orders.customer_id = customers.id").unwrap();
        assert!(!c.is_accepting(), "an aggregate beside customers.name needs GROUP BY customers.name");
        feed(&mut c, &v, " GROUP BY customers.name").unwrap();
        assert!(c.is_accepting());
    }

    #[test]
    fn table_names_that_prefix_others_keep_both_readings() {
        use crate::catalog::{Column, ColumnType, Dialect, Relationship, Table};
        let col = |n: &str| Column { name: n.into(), declared_type: "INTEGER".into(), ty: ColumnType::Integer, not_null: false, values: None };
        let table = |n: &str, cols: Vec<Column>| Table { name: n.into(), columns: cols, primary_key: vec![0], required_filter: None };
        let mut cat = Catalog::new(
            Dialect::Sqlite,
            vec![table("item", vec![col("id")]), table("items", vec![col("id"), col("item_id")]), table("tag", vec![col("id")])],
        )
        .unwrap();
        let (item, items) = (cat.find("item").unwrap(), cat.find("items").unwrap());
        cat.relate(Relationship { from: items, from_columns: vec![1], to: item, to_columns: vec![0] }).unwrap();
        let v = vocab();
        let g = SqlGrammars::new(Arc::new(cat), SqlGrammarOptions::default(), &v, &Limits::default()).unwrap();
        let mut c = g.constraint().unwrap();
        feed(&mut c, &v, "SELECT COUNT(*) FROM item").unwrap();
        assert!(c.is_accepting(), "`item` alone is a query");
        assert_eq!(c.branches.len(), 2, "`item` may still become `items`");
        let mut longer = c.clone();
        feed(&mut longer, &v, "s").unwrap();
        assert!(longer.is_accepting());
        feed(&mut longer, &v, " JOIN item ON items.item_id = item.id").unwrap();
        assert!(longer.is_accepting());
        feed(&mut c, &v, " JOIN items ON item.id = items.item_id").unwrap();
        assert!(c.is_accepting());
        // tag is related to nothing: it can never be joined.
        assert!(feed(&mut c, &v, " JOIN t").is_err());
    }

    #[test]
    fn the_mask_is_the_union_of_the_phases_and_never_crosses_a_boundary() {
        let (mut c, v) = constraint();
        feed(&mut c, &v, "SELECT customers.name FROM").unwrap();
        let mut mask = TokenMask::new(v.len());
        c.compute_mask(&mut mask);
        assert!(mask.contains(tok(&v, " customers")));
        assert!(!mask.contains(tok(&v, " orders")), "the first table is one the select list named");
        assert!(feed(&mut c.clone(), &v, " notes").is_err());
    }

    #[test]
    fn masks_agree_with_is_allowed_and_commits() {
        let (mut c, v) = constraint();
        let text = "SELECT customers.name FROM customers WHERE customers.country = 'DE'";
        let mut mask = TokenMask::new(v.len());
        for ch in text.chars() {
            c.compute_mask(&mut mask);
            for t in v.ids() {
                assert_eq!(mask.contains(t), c.is_allowed(t), "token {:?} after {:?}", v.token_text(t), c.text());
            }
            c.commit(tok(&v, &ch.to_string())).unwrap();
        }
        assert!(c.is_accepting());
        let crossing = tok(&v, "customers WHERE");
        let (mut c2, _) = constraint();
        feed(&mut c2, &v, "SELECT customers.name FROM ").unwrap();
        assert!(!c2.is_allowed(crossing), "a token across a phase boundary is not offered");
    }

    #[test]
    fn completion_plans_finish_the_query_through_joins() {
        let (mut c, v) = constraint();
        feed(&mut c, &v, "SELECT products.name, customers.country FROM customers").unwrap();
        let plan = c.completion_plan().expect("a plan");
        for t in plan {
            c.commit(t).unwrap();
        }
        assert!(c.is_accepting(), "{}", c.text());
        assert!(c.text().contains("JOIN products"), "{}", c.text());
    }

    #[test]
    fn byte_completions_agree_with_token_plans_on_a_byte_vocabulary() {
        let (mut c, v) = constraint();
        for prefix in ["SELECT ", "SELECT products.name, customers.country FROM customers", "SELECT COUNT(*) FROM orders WHERE orders.total > 1", "SELECT customers.name FROM customers WHERE customers.name = 'O"] {
            let (mut c2, _) = constraint();
            feed(&mut c2, &v, prefix).unwrap();
            let plan = c2.completion_plan().unwrap();
            let bytes: usize = plan.iter().map(|t| v.token_bytes(*t).len()).sum();
            assert_eq!(c2.finish(false).map(|(n, _)| n), Some(bytes), "{prefix}");
        }
        feed(&mut c, &v, "SELECT customers.name FROM customers").unwrap();
        let t = tok(&v, " ");
        // ` ` then at least `JOIN`/`WHERE`… and a condition: a budget of 2 cannot hold it.
        assert_eq!(c.completion_fits_after(t, 2), Some(false));
        assert_eq!(c.completion_fits_after(t, 200), Some(true));
    }
}
