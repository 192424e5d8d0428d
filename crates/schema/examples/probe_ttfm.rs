// temporary probe (not committed): stage times of compile for the files given
use formwork_grammar::matcher::{CompiledGrammar, TokenIndex};
use formwork_grammar::Limits;
use formwork_vocab::TokenMask;
use std::sync::Arc;
use std::time::Instant;
fn main() {
    let vocab = Arc::new(formwork_vocab::Vocabulary::from_tokenizer_json_file("/work/shared/data/tokenizers/smollm2.json", None).unwrap());
    let index = TokenIndex::for_vocab(&vocab);
    let reps: usize = std::env::var("REPS").ok().and_then(|s| s.parse().ok()).unwrap_or(2);
    for path in std::env::args().skip(1) {
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let schema = v.get("schema").cloned().unwrap_or(v);
        let opts = formwork_schema::SchemaOptions { key_order: formwork_schema::KeyOrder::Any, ..Default::default() };
        let mut best = [f64::MAX; 3];
        for _ in 0..reps {
            let t0 = Instant::now();
            let Ok(g) = formwork_schema::compile(&schema, &opts) else { break };
            let t1 = Instant::now();
            let Ok(c) = CompiledGrammar::with_index(&g, index.clone(), &Limits::default()) else { break };
            let t2 = Instant::now();
            let mut m = c.matcher();
            let mut mask = TokenMask::new(vocab.len());
            m.compute_mask(&mut mask);
            let t3 = Instant::now();
            let d = [(t1 - t0).as_secs_f64(), (t2 - t1).as_secs_f64(), (t3 - t2).as_secs_f64()];
            for i in 0..3 { best[i] = best[i].min(d[i] * 1e6); }
        }
        if best[0] < f64::MAX { println!("{:>8.0} schema {:>8.0} grammar {:>8.0} mask  {}", best[0], best[1], best[2], path.rsplit('/').next().unwrap()); }
    }
}
