//! How long a database's SQL constraint takes to build and give its first masks, for a
//! 100-table schema (8 columns each, every table related to the one before) on a real
//! vocabulary (SmolLM2's 49k tokens from `../shared/data/tokenizers/smollm2.json`).
//!
//! ```text
//! cargo run --release -p formwork-sql --example compile_time [-- TOKENIZER.json]
//! ```
//!
//! Prints the median of 5 runs of: reading the catalog; compiling the select-list phase and
//! its first mask (what a request waits for before its first token); and, mid-query, the
//! first mask of a later phase (a join or the rest, compiled when first reached). The
//! vocabulary's token trie, built once per model, is not counted.

use formwork_engine::Constraint;
use formwork_grammar::Limits;
use formwork_sql::{ReadOptions, SqlDatabase, SqlGrammarOptions, SqlGrammars};
use formwork_vocab::{TokenMask, Vocabulary};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let tokenizer = std::env::args().nth(1).unwrap_or_else(|| "../shared/data/tokenizers/smollm2.json".into());
    let vocab = Arc::new(Vocabulary::from_tokenizer_json_file(&tokenizer, None).unwrap_or_else(|e| panic!("{tokenizer}: {e}")));
    // The vocabulary's token trie is built once per vocabulary and shared by every grammar
    // (a server builds it when the model loads): keep it alive, as a server does.
    let _index = formwork_grammar::TokenIndex::for_vocab(&vocab);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wide.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mut sql = String::new();
    for i in 0..100 {
        let fk = if i == 0 { String::new() } else { format!(", prev_id INTEGER REFERENCES t{}(id)", i - 1) };
        sql.push_str(&format!("CREATE TABLE t{i} (id INTEGER PRIMARY KEY, name TEXT, amount REAL, created DATE, flag BOOLEAN, code TEXT, qty INTEGER{fk});\n"));
    }
    conn.execute_batch(&sql).unwrap();
    drop(conn);

    let (mut read, mut first, mut later, mut fits) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        let t = Instant::now();
        let db = SqlDatabase::open(path.to_str().unwrap(), None, &ReadOptions::default(), SqlGrammarOptions::default()).unwrap();
        read.push(t.elapsed());
        let mut mask = TokenMask::new(vocab.len());
        let t = Instant::now();
        let g = SqlGrammars::new(db.catalog.clone(), SqlGrammarOptions::default(), &vocab, &Limits::default()).unwrap();
        let mut c = g.constraint().unwrap();
        c.compute_mask(&mut mask);
        first.push(t.elapsed());
        // Mid-query: the select list names t50 and t52; after `FROM t50` the next phase
        // (a join toward t52) is compiled on first use.
        for piece in ["SELECT", " t", "50", ".name", ",", " t", "52", ".amount", " FROM", " t", "50"] {
            let toks = tokens(&vocab, piece);
            for tok in toks {
                c.commit(tok).unwrap();
            }
        }
        let t = Instant::now();
        c.compute_mask(&mut mask);
        later.push(t.elapsed());
        assert!(mask.count_ones() > 0);
        // The budget check the loop makes for each sampled token near the end of a budget.
        // (Measured the second time: the first compiles the phases the plan passes through.)
        let next = mask.iter_ones().next().unwrap();
        let _ = c.completion_fits_after(next, 100);
        let t = Instant::now();
        let _ = c.completion_fits_after(next, 100);
        fits.push(t.elapsed());
    }
    println!("100 tables x 8 columns, vocabulary of {} tokens ({tokenizer})", vocab.len());
    println!("read the catalog (SQLite):                     {:?}", median(read));
    println!("select-list phase compiled + first mask:        {:?}", median(first));
    println!("a later phase compiled on first use + its mask: {:?}", median(later));
    println!("one budget check near the end of a budget:      {:?}", median(fits));
}

/// `text` as tokens: the longest vocabulary token at each point (enough for this example).
fn tokens(vocab: &Vocabulary, text: &str) -> Vec<formwork_vocab::TokenId> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let (len, t) = (1..=b.len() - i).rev().find_map(|n| vocab.text_token_by_bytes(&b[i..i + n]).map(|t| (n, t))).expect("spellable");
        out.push(t);
        i += len;
    }
    out
}
