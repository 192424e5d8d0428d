//! Grammars some of whose rules are built on first use.
//!
//! A large JSON Schema (Kubernetes, JSON Schema Store) has hundreds of definitions, and one
//! output reaches a few of them. A [`LazyGrammar`] holds the rules needed up front and names
//! the *deferred* ones; a [`RuleSource`] (the schema compiler, kept alive inside the
//! compiled grammar) builds a deferred rule's body when the matcher first reaches it, with
//! whatever new rules that body needs, some of which may be deferred in turn. The matcher
//! lowers each such part on its own and appends it to the live byte grammar (module
//! `matcher::lower::deferred`), so the time to the first mask pays for what the first mask
//! needs.
//!
//! What a source promises for every deferred rule (the matcher checks the parts it can and
//! leaves a rule that breaks them matching nothing, which never widens the language):
//! - its body never fails to build and matches something, and not the empty string;
//! - its body starts with a terminal (a JSON object's `{`), so no left recursion can pass
//!   through it;
//! - everything a refusal or a warning of the source would say was said up front, when the
//!   lazy grammar was made.

use crate::{Grammar, Rule, RuleId};

/// Builds the bodies of deferred rules on demand (see the module docs).
pub trait RuleSource: Send {
    /// The body of deferred rule `rule` and of every rule it newly needs.
    fn expand(&mut self, rule: RuleId) -> Result<Expansion, String>;
}

/// What [`RuleSource::expand`] returns. Rule ids continue the grammar's numbering: every
/// id a body refers to is a rule of the base grammar, one made by an earlier expansion, or
/// one made here.
#[derive(Debug, Default)]
pub struct Expansion {
    /// The rules defined: the expanded rule's body, and the new rules it needs.
    pub rules: Vec<(RuleId, Rule)>,
    /// New rules declared deferred, with their names: expanded when first reached.
    pub deferred: Vec<(RuleId, String)>,
}

/// A grammar with deferred rules (see the module docs).
pub struct LazyGrammar {
    /// The rules built up front. The bodies of the deferred rules are placeholders, never
    /// read.
    pub grammar: Grammar,
    /// The deferred rules of `grammar`.
    pub deferred: Vec<RuleId>,
    /// Where the deferred rules come from.
    pub source: Box<dyn RuleSource>,
}

impl std::fmt::Debug for LazyGrammar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyGrammar").field("rules", &self.grammar.rules().len()).field("deferred", &self.deferred.len()).finish_non_exhaustive()
    }
}
