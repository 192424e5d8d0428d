//! The grammars of a query's phases, built from a [`Catalog`].
//!
//! A query is generated in phases (see the [crate docs](crate) for why): [`select_grammar`]
//! (`SELECT … FROM`), [`first_table_grammar`] (the first table), and [`rest_grammar`] (one
//! join along a relationship, or the rest of the query once every table the select list
//! named is in scope). Each phase's grammar is context-free given what the earlier phases
//! produced: which tables the select list named, which are in scope, which aliases exist.
//!
//! The SQL is one canonical spelling (upper-case keywords, single spaces, `table.column`
//! everywhere) that SQLite and PostgreSQL both run. Literals are typed by the column they
//! meet: numbers for numeric columns, quoted strings for text (only the known values when
//! the catalog read them), `'YYYY-MM-DD[ HH:MM[:SS]]'` for dates, `TRUE`/`FALSE`.
//! Aggregates `SUM` and `AVG` take numeric columns only.
//!
//! [`relaxed_grammar`] is the single GBNF-expressible approximation: every identifier exists,
//! every column belongs to the table that qualifies it, every join condition follows a
//! relationship of the joined table — but a column may be of any table, in scope or not (in
//! the select list, `WHERE`, `GROUP BY`, `ORDER BY`), grouping is free, and rules are not
//! enforced. `formwork grammar sql` prints it for llama.cpp users.

use crate::catalog::{quote_ident, Catalog, ColumnType, Dialect, TableId, RESERVED};
use crate::select::SelectSummary;
use formwork_grammar::{Expr, Grammar, GrammarBuilder};

/// Bounds on the literals and lists a query may contain.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SqlGrammarOptions {
    /// Longest string literal, in characters.
    pub max_string: u32,
    /// Most values in an `IN (...)` list.
    pub max_in_list: u32,
    /// Most digits of a `LIMIT`.
    pub max_limit_digits: u32,
}

impl Default for SqlGrammarOptions {
    fn default() -> Self {
        SqlGrammarOptions { max_string: 100, max_in_list: 16, max_limit_digits: 5 }
    }
}

/// Builds one phase's grammar: a [`GrammarBuilder`] plus the catalog and the shared
/// literal rules, defined on first use.
struct Build<'a> {
    b: GrammarBuilder,
    cat: &'a Catalog,
    opts: &'a SqlGrammarOptions,
}

fn lit(s: &str) -> Expr {
    Expr::lit(s)
}

fn digits(min: u32, max: Option<u32>) -> Expr {
    Expr::repeat(Expr::class([('0', '9')], false), min, max)
}

impl<'a> Build<'a> {
    fn new(cat: &'a Catalog, opts: &'a SqlGrammarOptions) -> Self {
        Build { b: GrammarBuilder::new(), cat, opts }
    }

    /// A reference to rule `name`, defining it with `body()` the first time.
    fn rule(&mut self, name: &str, body: impl FnOnce(&mut Self) -> Expr) -> Expr {
        if !self.b.is_defined(name) {
            // Declare first, so that a recursive body can refer to it.
            self.b.rule_id(name);
            let e = body(self);
            self.b.define(name, e);
        }
        Expr::Rule(self.b.rule_id(name))
    }

    fn int(&mut self) -> Expr {
        self.rule("int", |_| {
            Expr::seq([Expr::opt(lit("-")), Expr::alt([lit("0"), Expr::seq([Expr::class([('1', '9')], false), digits(0, Some(17))])])])
        })
    }

    fn num(&mut self) -> Expr {
        self.rule("num", |g| {
            let int = g.int();
            Expr::seq([int, Expr::opt(Expr::seq([lit("."), digits(1, Some(8))]))])
        })
    }

    fn string(&mut self) -> Expr {
        let max = self.opts.max_string;
        self.rule("str", |_| {
            // Any character but a quote or a control character; a quote is doubled.
            let ch = Expr::alt([Expr::class([('\'', '\''), ('\0', '\x1f'), ('\x7f', '\x7f')], true), lit("''")]);
            Expr::seq([lit("'"), Expr::repeat(ch, 0, Some(max)), lit("'")])
        })
    }

    /// A date both databases accept: years 1000–9999, each month's own days (29 February
    /// in leap years only), and an optional `HH:MM[:SS]` time of day.
    fn date(&mut self) -> Expr {
        self.rule("date", |_| {
            let d = |lo: char, hi: char| Expr::class([(lo, hi)], false);
            let one_of = |xs: &[&str]| Expr::alt(xs.iter().map(|x| lit(x)));
            let year = Expr::seq([d('1', '9'), digits(3, Some(3))]);
            let day_to = |last: char| Expr::alt([Expr::seq([lit("0"), d('1', '9')]), Expr::seq([d('1', '2'), d('0', '9')]), Expr::seq([lit("3"), d('0', last)])]);
            let month_day = Expr::alt([
                Expr::seq([one_of(&["01", "03", "05", "07", "08", "10", "12"]), lit("-"), day_to('1')]),
                Expr::seq([one_of(&["04", "06", "09", "11"]), lit("-"), day_to('0')]),
                Expr::seq([lit("02-"), Expr::alt([Expr::seq([lit("0"), d('1', '9')]), Expr::seq([lit("1"), d('0', '9')]), Expr::seq([lit("2"), d('0', '8')])])]),
            ]);
            // Leap years: divisible by 4, and centuries only when divisible by 400.
            let by_four = one_of(&["04", "08", "12", "16", "20", "24", "28", "32", "36", "40", "44", "48", "52", "56", "60", "64", "68", "72", "76", "80", "84", "88", "92", "96"]);
            let leap = Expr::alt([
                Expr::seq([d('1', '9'), d('0', '9'), by_four.clone()]),
                Expr::seq([by_four, lit("00")]),
            ]);
            let date = Expr::alt([Expr::seq([year, lit("-"), month_day]), Expr::seq([leap, lit("-02-29")])]);
            let hour = Expr::alt([Expr::seq([d('0', '1'), d('0', '9')]), Expr::seq([lit("2"), d('0', '3')])]);
            let sixty = || Expr::seq([d('0', '5'), d('0', '9')]);
            let time = Expr::seq([lit(" "), hour, lit(":"), sixty(), Expr::opt(Expr::seq([lit(":"), sixty()]))]);
            Expr::seq([lit("'"), date, Expr::opt(time), lit("'")])
        })
    }

    fn boolean(&mut self) -> Expr {
        self.rule("bool", |_| Expr::alt([lit("TRUE"), lit("FALSE")]))
    }

    fn cmp(&mut self) -> Expr {
        self.rule("cmp", |_| Expr::alt([" = ", " != ", " < ", " <= ", " > ", " >= "].map(lit)))
    }

    fn is_null(&mut self) -> Expr {
        self.rule("null-test", |_| Expr::alt([lit(" IS NULL"), lit(" IS NOT NULL")]))
    }

    /// `x (, x){0,max-1}` in parentheses.
    fn in_list(&self, x: Expr) -> Expr {
        let more = Expr::repeat(Expr::seq([lit(", "), x.clone()]), 0, Some(self.opts.max_in_list.saturating_sub(1)));
        Expr::seq([lit(" IN ("), x, more, lit(")")])
    }

    /// `table.` followed by one of `columns` (all when `None`).
    fn colref(&self, t: TableId, columns: impl Iterator<Item = usize>) -> Option<Expr> {
        let table = self.cat.table(t);
        let cols: Vec<Expr> = columns.map(|c| lit(&quote_ident(&table.columns[c].name))).collect();
        if cols.is_empty() {
            return None;
        }
        Some(Expr::seq([lit(&format!("{}.", quote_ident(&table.name))), Expr::alt(cols)]))
    }

    /// Any column of `tables` whose type passes `keep`, as one rule named `name`; `None`
    /// when there is none.
    fn columns_where(&mut self, name: &str, tables: &[TableId], keep: impl Fn(ColumnType) -> bool) -> Option<Expr> {
        let alts: Vec<Expr> = tables
            .iter()
            .filter_map(|&t| {
                let table = self.cat.table(t);
                self.colref(t, (0..table.columns.len()).filter(|&c| keep(table.columns[c].ty)))
            })
            .collect();
        if alts.is_empty() {
            return None;
        }
        Some(self.rule(name, |_| Expr::alt(alts)))
    }

    /// `COUNT(…)`, `SUM(…)`, `AVG(…)`, `MIN(…)`, `MAX(…)` over columns of `tables`
    /// (`COUNT(*)` when `star`).
    /// The column rules are `{cols}-col` and `{cols}-numcol`, shared with other users of
    /// the same tables.
    fn aggregate(&mut self, name: &str, cols: &str, tables: &[TableId], star: bool) -> Option<Expr> {
        let any = self.columns_where(&format!("{cols}-col"), tables, |_| true)?;
        let numeric = self.columns_where(&format!("{cols}-numcol"), tables, |t| matches!(t, ColumnType::Integer | ColumnType::Real));
        let distinct = || Expr::opt(lit("DISTINCT "));
        let mut alts = vec![
            Expr::seq([lit("COUNT("), distinct(), any.clone(), lit(")")]),
            Expr::seq([Expr::alt([lit("MIN("), lit("MAX(")]), any, lit(")")]),
        ];
        if let Some(n) = numeric {
            alts.push(Expr::seq([Expr::alt([lit("SUM("), lit("AVG(")]), distinct(), n, lit(")")]));
        }
        if star {
            alts.push(lit("COUNT(*)"));
        }
        Some(self.rule(name, |_| Expr::alt(alts)))
    }

    /// An alias: a lower-case identifier that is not a reserved word (see
    /// [`identifier_except`]).
    fn alias(&mut self) -> Expr {
        self.rule("alias", |_| Expr::seq([lit(" AS "), identifier_except(RESERVED, 30)]))
    }

    /// The predicate on one column `t.c` (typed literals, see the module docs); the
    /// column-to-column comparisons draw from `scope`.
    fn column_predicate(&mut self, t: TableId, c: usize, scope: &[TableId]) -> Expr {
        let name = format!("pred-t{}-c{}", t.0, c);
        let column = self.cat.table(t).columns[c].clone();
        let me = self.colref(t, std::iter::once(c)).expect("one column");
        self.rule(&name, |g| {
            let null = g.is_null();
            let cmp = g.cmp();
            let ty = column.ty;
            let other = g.columns_where(&format!("cols-{}", class_name(ty)), scope, |o| ty.comparable(o));
            let with_other = |lit: Expr| match &other {
                Some(o) => Expr::alt([lit, o.clone()]),
                None => lit,
            };
            let body = match ty {
                ColumnType::Integer | ColumnType::Real => {
                    let n = if ty == ColumnType::Integer { g.int() } else { g.num() };
                    Expr::alt([
                        Expr::seq([cmp, with_other(n.clone())]),
                        Expr::seq([lit(" BETWEEN "), n.clone(), lit(" AND "), n.clone()]),
                        g.in_list(n),
                        null,
                    ])
                }
                ColumnType::Text => {
                    let s = g.string();
                    let like = Expr::seq([Expr::alt([lit(" LIKE "), lit(" NOT LIKE ")]), s.clone()]);
                    match &column.values {
                        Some(values) if !values.is_empty() => {
                            let v = Expr::alt(values.iter().map(|v| lit(&sql_string(v))));
                            let eq = Expr::alt([lit(" = "), lit(" != ")]);
                            Expr::alt([Expr::seq([eq, with_other(v.clone())]), g.in_list(v), like, null])
                        }
                        _ => Expr::alt([Expr::seq([cmp, with_other(s.clone())]), g.in_list(s), like, null]),
                    }
                }
                ColumnType::Date => {
                    let d = g.date();
                    Expr::alt([Expr::seq([cmp, with_other(d.clone())]), Expr::seq([lit(" BETWEEN "), d.clone(), lit(" AND "), d]), null])
                }
                ColumnType::Boolean => {
                    let b = g.boolean();
                    Expr::alt([Expr::seq([lit(" = "), b]), null])
                }
                ColumnType::Other => null,
            };
            Expr::seq([me, body])
        })
    }

    /// A boolean condition over the columns of `scope`: `atom (AND atom)* (OR …)*`, an atom
    /// being a column predicate or a parenthesized condition, optionally negated.
    fn condition(&mut self, scope: &[TableId]) -> (Expr, Expr) {
        let atom_id = self.b.rule_id("atom");
        let cond = self.rule("cond", |g| {
            let conj = Expr::seq([Expr::Rule(atom_id), Expr::star(Expr::seq([lit(" AND "), Expr::Rule(atom_id)]))]);
            let conj = g.rule("conj", |_| conj);
            Expr::seq([conj.clone(), Expr::star(Expr::seq([lit(" OR "), conj]))])
        });
        let atom = self.rule("atom", |g| {
            let mut preds = Vec::new();
            for &t in scope {
                for c in 0..g.cat.table(t).columns.len() {
                    preds.push(g.column_predicate(t, c, scope));
                }
            }
            preds.push(Expr::seq([lit("("), cond.clone(), lit(")")]));
            Expr::seq([Expr::opt(lit("NOT ")), Expr::alt(preds)])
        });
        (cond, atom)
    }

    /// The clauses after `FROM …`: `[WHERE] [GROUP BY [HAVING]] [ORDER BY] [LIMIT]` over the
    /// tables of `scope`, with the required filters of its tables first in `WHERE`, and the
    /// grouping the select list needs (see [`SelectSummary`]).
    fn tail(&mut self, scope: &[TableId], select: &SelectSummary) -> Expr {
        let (cond, atom) = self.condition(scope);
        let required: Vec<String> = scope
            .iter()
            .filter_map(|&t| self.cat.table(t).required_filter.as_deref().map(guarded_filter))
            .collect();
        let where_ = if required.is_empty() {
            Expr::opt(Expr::seq([lit(" WHERE "), cond]))
        } else {
            // Every required filter, then the model's own conditions joined by AND: an OR
            // at the top level would let a row escape the rules, so ORs go in parentheses
            // (an atom).
            Expr::seq([lit(" WHERE "), lit(&required.join(" AND ")), Expr::star(Expr::seq([lit(" AND "), atom]))])
        };
        let col = self.columns_where("scope-col", scope, |_| true).expect("scope has columns");
        let agg = self.aggregate("agg", "scope", scope, true).expect("scope has columns");
        let num = self.num();
        let cmp = self.cmp();
        let having_atom = Expr::seq([agg.clone(), cmp, num]);
        let having = Expr::opt(Expr::seq([
            lit(" HAVING "),
            having_atom.clone(),
            Expr::star(Expr::seq([Expr::alt([lit(" AND "), lit(" OR ")]), having_atom])),
        ]));
        // The columns a grouping must list: the select list's bare columns, and every
        // column of what it selects whole.
        let mut grouped: Vec<String> = select.bare.clone();
        let whole: Vec<TableId> = if select.star { scope.to_vec() } else { select.star_tables.clone() };
        for t in whole {
            for c in 0..self.cat.table(t).columns.len() {
                let name = self.cat.column_sql(t, c);
                if !grouped.contains(&name) {
                    grouped.push(name);
                }
            }
        }
        let more_cols = Expr::star(Expr::seq([lit(", "), col.clone()]));
        let direction = || Expr::opt(Expr::alt([lit(" ASC"), lit(" DESC")]));
        let aliases: Vec<Expr> = select.aliases.iter().map(|a| lit(a)).collect();
        let order = |keys: Vec<Expr>| -> Expr {
            if keys.is_empty() {
                return Expr::empty();
            }
            let key = Expr::seq([Expr::alt(keys), direction()]);
            Expr::opt(Expr::seq([lit(" ORDER BY "), key.clone(), Expr::star(Expr::seq([lit(", "), key]))]))
        };
        let grouped_lits: Vec<Expr> = grouped.iter().map(|c| lit(c)).collect();
        // What ORDER BY may name: after DISTINCT, what the select list shows; in a grouped
        // or aggregate query, grouped columns, aggregates and aliases; else any column.
        let shown: Vec<Expr> = select.bare.iter().map(|c| lit(c)).chain(aliases.iter().cloned()).collect();
        let grouped_keys: Vec<Expr> = if select.distinct {
            shown.clone()
        } else {
            grouped_lits.iter().cloned().chain([agg.clone()]).chain(aliases.iter().cloned()).collect()
        };
        let forced_group = (!grouped.is_empty()).then(|| Expr::seq([lit(&format!(" GROUP BY {}", grouped.join(", "))), more_cols.clone(), having.clone()]));
        let grouping = if select.aggregate {
            match forced_group {
                // Aggregates beside bare columns: those columns must be grouped.
                Some(g) => Expr::seq([g, order(grouped_keys)]),
                // Only aggregates: any grouping (its columns are not shown).
                None => {
                    let free = Expr::seq([lit(" GROUP BY "), col.clone(), more_cols, having]);
                    let keys = if select.distinct { shown } else { [agg].into_iter().chain(aliases.iter().cloned()).collect() };
                    Expr::seq([Expr::opt(free), order(keys)])
                }
            }
        } else {
            let plain_keys: Vec<Expr> = if select.distinct { shown } else { [col].into_iter().chain(aliases.iter().cloned()).collect() };
            match forced_group {
                // A grouping must list every shown column; ordering may then use aggregates.
                Some(g) => Expr::alt([Expr::seq([g, order(grouped_keys)]), order(plain_keys)]),
                None => order(plain_keys),
            }
        };
        let limit = Expr::seq([lit(" LIMIT "), Expr::class([('1', '9')], false), digits(0, Some(self.opts.max_limit_digits - 1))]);
        Expr::seq([where_, grouping, Expr::opt(limit)])
    }

    /// `t ON cond` where each condition follows a relationship between `t` and a table of
    /// `others` (either way round, each side first); `None` when there is none.
    fn join_to(&self, t: TableId, others: &[TableId]) -> Option<Expr> {
        let conds: Vec<Expr> = self
            .cat
            .relationships()
            .iter()
            .filter(|r| (r.from == t && others.contains(&r.to)) || (r.to == t && others.contains(&r.from)))
            .flat_map(|r| {
                let pairs: Vec<(String, String)> = r
                    .from_columns
                    .iter()
                    .zip(&r.to_columns)
                    .map(|(&f, &c)| (self.cat.column_sql(r.from, f), self.cat.column_sql(r.to, c)))
                    .collect();
                let write = |flip: bool| {
                    let eqs: Vec<String> = pairs.iter().map(|(a, b)| if flip { format!("{b} = {a}") } else { format!("{a} = {b}") }).collect();
                    lit(&eqs.join(" AND "))
                };
                [write(false), write(true)]
            })
            .collect();
        if conds.is_empty() {
            return None;
        }
        Some(Expr::seq([lit(&quote_ident(&self.cat.table(t).name)), lit(" ON "), Expr::alt(conds)]))
    }

    /// `[LEFT] JOIN` and one of `targets`; `None` when empty.
    fn join_keyword(targets: Vec<Expr>) -> Option<Expr> {
        (!targets.is_empty()).then(|| Expr::seq([Expr::alt([lit(" JOIN "), lit(" LEFT JOIN ")]), Expr::alt(targets)]))
    }

    /// A join of a table outside `scope` related to one inside; `None` when there is none.
    /// While some of `required` is not in scope, only tables on a shortest path from the
    /// scope to one of those are offered: each join brings a required table closer, so the
    /// query can always be finished (and a completion plan goes straight there).
    fn joins(&self, scope: &[TableId], required: &[TableId]) -> Option<Expr> {
        let missing: Vec<TableId> = required.iter().copied().filter(|t| !scope.contains(t)).collect();
        let dist: Vec<Vec<Option<usize>>> = missing.iter().map(|&u| self.cat.distances_from(u)).collect();
        let toward = |t: TableId| {
            missing.is_empty()
                || dist.iter().any(|d| {
                    let from_scope = scope.iter().filter_map(|s| d[s.index()]).min();
                    matches!((d[t.index()], from_scope), (Some(dt), Some(ds)) if dt + 1 == ds)
                })
        };
        let targets = self.cat.ids().filter(|t| !scope.contains(t) && toward(*t)).filter_map(|t| self.join_to(t, scope)).collect();
        Self::join_keyword(targets)
    }

    /// The select list of one component: its first item names a table of `tables`; later
    /// items may be any expression over them. Arithmetic (`+ - * /`) takes numeric terms
    /// only: numeric columns, `COUNT`, `SUM`/`AVG`/`MIN`/`MAX` of numeric columns, numbers.
    fn select_items(&mut self, k: usize, tables: &[TableId]) -> Expr {
        let op = Expr::alt([" + ", " - ", " * ", " / "].map(lit));
        let col = self.columns_where(&format!("c{k}-col"), tables, |_| true).expect("component has columns");
        let agg = self.aggregate(&format!("c{k}-agg"), &format!("c{k}"), tables, false).expect("component has columns");
        let numeric = |t: ColumnType| matches!(t, ColumnType::Integer | ColumnType::Real);
        let numcol = self.columns_where(&format!("c{k}-numcol"), tables, numeric);
        let any = col.clone();
        let distinct = || Expr::opt(lit("DISTINCT "));
        // Numeric values that name a table.
        let mut named_num = vec![Expr::seq([lit("COUNT("), distinct(), any, lit(")")])];
        if let Some(n) = &numcol {
            named_num.push(n.clone());
            named_num.push(Expr::seq([Expr::alt(["SUM(", "AVG(", "MIN(", "MAX("].map(lit)), distinct(), n.clone(), lit(")")]));
        }
        let named_num = self.rule(&format!("c{k}-named-num"), |_| Expr::alt(named_num));
        let num = self.num();
        let expr_id = self.b.rule_id(&format!("c{k}-num-expr"));
        let term = Expr::alt([named_num.clone(), lit("COUNT(*)"), num, Expr::seq([lit("("), Expr::Rule(expr_id), lit(")")])]);
        let term = self.rule(&format!("c{k}-num-term"), |_| term);
        let arith = Expr::plus(Expr::seq([op.clone(), term.clone()]));
        let num_expr = self.rule(&format!("c{k}-num-expr"), |_| Expr::seq([term.clone(), Expr::star(Expr::seq([op, term]))]));
        let star: Vec<Expr> = tables.iter().map(|&t| lit(&format!("{}.*", quote_ident(&self.cat.table(t).name)))).collect();
        let star = Expr::alt(star);
        let alias = self.alias();
        let value = Expr::alt([col, agg]);
        let first = Expr::alt([
            Expr::seq([value.clone(), Expr::opt(alias.clone())]),
            Expr::seq([named_num, arith, Expr::opt(alias.clone())]),
            star.clone(),
        ]);
        let neutral = self.neutral_item();
        let item = Expr::alt([Expr::seq([Expr::alt([value, num_expr]), Expr::opt(alias)]), star, neutral]);
        Expr::seq([first, Expr::star(Expr::seq([lit(", "), item]))])
    }

    /// A select item that names no table: `*` or `COUNT(*)`.
    fn neutral_item(&mut self) -> Expr {
        self.rule("neutral", |g| {
            let alias = g.alias();
            Expr::alt([lit("*"), Expr::seq([lit("COUNT(*)"), Expr::opt(alias)])])
        })
    }

    fn finish(mut self, root: Expr) -> Grammar {
        self.b.define("root", root);
        self.b.build("root").expect("the SQL grammars define every rule they use")
    }
}

/// The class name of a type, for rule names.
fn class_name(t: ColumnType) -> &'static str {
    match t {
        ColumnType::Integer | ColumnType::Real => "num",
        ColumnType::Text => "text",
        ColumnType::Date => "date",
        ColumnType::Boolean => "bool",
        ColumnType::Other => "other",
    }
}

/// `s` as an SQL string literal (`'` doubled).
pub fn sql_string(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A required filter as it goes into `WHERE … AND …`: in parentheses when it has an `OR`
/// of its own (which `AND` would otherwise bind inside).
pub(crate) fn guarded_filter(f: &str) -> String {
    if f.to_ascii_lowercase().contains(" or ") {
        format!("({f})")
    } else {
        f.to_string()
    }
}

/// A lower-case identifier (`[a-z_][a-z0-9_]*`, at most `max_len` characters) that is none
/// of `words` (lower case): a trie of the words where each node either ends (when it is not
/// a word), steps to a child, or leaves the trie by any other character and ends freely.
pub fn identifier_except(words: &[&str], max_len: u32) -> Expr {
    fn node(words: &[&str], prefix: &str, depth: u32, max_len: u32) -> Expr {
        let first = depth == 0;
        let chars: Vec<(char, char)> = if first { vec![('a', 'z'), ('_', '_')] } else { vec![('a', 'z'), ('0', '9'), ('_', '_')] };
        let under: Vec<&str> = words.iter().copied().filter(|w| w.starts_with(prefix) && w.len() > prefix.len()).collect();
        let mut next: Vec<char> = under.iter().map(|w| w.as_bytes()[prefix.len()] as char).collect();
        next.sort();
        next.dedup();
        let mut alts = Vec::new();
        if !first && !words.contains(&prefix) {
            alts.push(Expr::empty());
        }
        if depth < max_len {
            let rest_max = max_len - depth - 1;
            let free = Expr::repeat(Expr::class([('a', 'z'), ('0', '9'), ('_', '_')], false), 0, Some(rest_max));
            // Leaving the trie: an allowed character that is none of its children.
            let leave = class_minus(&chars, &next);
            if !leave.is_empty() {
                alts.push(Expr::seq([Expr::class(leave, false), free]));
            }
            for c in next {
                let p = format!("{prefix}{c}");
                alts.push(Expr::seq([lit(&c.to_string()), node(&under, &p, depth + 1, max_len)]));
            }
        }
        if alts.is_empty() {
            return Expr::class([], false);
        }
        Expr::alt(alts)
    }
    node(words, "", 0, max_len)
}

/// The characters of `ranges` other than `minus`.
fn class_minus(ranges: &[(char, char)], minus: &[char]) -> Vec<(char, char)> {
    let mut out = Vec::new();
    for &(lo, hi) in ranges {
        let mut start = lo as u32;
        let mut cut: Vec<u32> = minus.iter().map(|&c| c as u32).filter(|&c| c >= lo as u32 && c <= hi as u32).collect();
        cut.sort();
        for c in cut {
            if c > start {
                out.push((char::from_u32(start).unwrap(), char::from_u32(c - 1).unwrap()));
            }
            start = c + 1;
        }
        if start <= hi as u32 {
            out.push((char::from_u32(start).unwrap(), hi));
        }
    }
    out
}

/// Phase 1: `SELECT [DISTINCT] items FROM`. The items name tables of one component of the
/// relationship graph (tables that can be joined); items that name none (`*`, `COUNT(*)`)
/// come first.
pub fn select_grammar(cat: &Catalog, opts: &SqlGrammarOptions) -> Grammar {
    let mut g = Build::new(cat, opts);
    let comps = cat.components();
    let named: Vec<Expr> = comps.iter().enumerate().map(|(k, tables)| g.select_items(k, tables)).collect();
    let named = Expr::alt(named);
    let neutral = g.neutral_item();
    let body = Expr::alt([
        Expr::seq([neutral.clone(), Expr::star(Expr::seq([lit(", "), neutral])), Expr::opt(Expr::seq([lit(", "), named.clone()]))]),
        named,
    ]);
    g.finish(Expr::seq([lit("SELECT "), Expr::opt(lit("DISTINCT ")), body, lit(" FROM")]))
}

/// Phase 2: ` table`, one of `tables`.
pub fn first_table_grammar(cat: &Catalog, tables: &[TableId], opts: &SqlGrammarOptions) -> Grammar {
    let g = Build::new(cat, opts);
    let names: Vec<Expr> = tables.iter().map(|&t| lit(&quote_ident(&cat.table(t).name))).collect();
    g.finish(Expr::seq([lit(" "), Expr::alt(names)]))
}

/// Phase 3, repeated: with `scope` in the query, either one more join along a relationship,
/// or — once every table of `required` is in scope — the rest of the query (possibly
/// nothing).
pub fn rest_grammar(cat: &Catalog, scope: &[TableId], select: &SelectSummary, opts: &SqlGrammarOptions) -> Grammar {
    let mut g = Build::new(cat, opts);
    let join = g.joins(scope, &select.required);
    let done = select.required.iter().all(|t| scope.contains(t));
    let root = match (join, done) {
        (Some(j), true) => {
            let tail = g.tail(scope, select);
            Expr::alt([j, tail])
        }
        (Some(j), false) => j,
        (None, _) => g.tail(scope, select),
    };
    g.finish(root)
}

/// The whole query as one grammar, GBNF-expressible: see the module docs for what it
/// enforces and what only the phased constraint does.
pub fn relaxed_grammar(cat: &Catalog, opts: &SqlGrammarOptions) -> Grammar {
    // The rules are not part of it: which filters apply depends on the scope.
    let plain = cat.without_filters();
    let mut g = Build::new(&plain, opts);
    let all: Vec<TableId> = plain.ids().collect();
    let named: Vec<Expr> = plain.components().iter().enumerate().map(|(k, tables)| g.select_items(k, tables)).collect();
    let named = Expr::alt(named);
    let neutral = g.neutral_item();
    let body = Expr::alt([
        Expr::seq([neutral.clone(), Expr::star(Expr::seq([lit(", "), neutral])), Expr::opt(Expr::seq([lit(", "), named.clone()]))]),
        named,
    ]);
    let tables: Vec<Expr> = all.iter().map(|&t| lit(&quote_ident(&plain.table(t).name))).collect();
    // Any join whose condition follows a relationship of the joined table (to any table).
    let targets = plain.ids().filter_map(|t| g.join_to(t, &plain.neighbours(t))).collect();
    let join = Build::join_keyword(targets).map(Expr::star).unwrap_or_else(Expr::empty);
    // Grouping is not tied to the select list either.
    let tail = g.tail(&all, &SelectSummary::default());
    let root = Expr::seq([lit("SELECT "), Expr::opt(lit("DISTINCT ")), body, lit(" FROM "), Expr::alt(tables), join, tail]);
    g.finish(root)
}

/// The dialect's name, for prompts and messages.
pub fn dialect_name(d: Dialect) -> &'static str {
    match d {
        Dialect::Sqlite => "SQLite",
        Dialect::Postgres => "PostgreSQL",
    }
}

#[cfg(test)]
mod tests;
