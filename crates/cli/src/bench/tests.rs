//! Tests of the mask benchmark: walking tests, tallies, splits.

use super::*;

/// A scripted engine: accepts exactly the token sequence `0 1 2`, then EOS (9).
struct Script;
struct ScriptWalk {
    pos: usize,
    mask: Vec<u32>,
}
impl Walk for ScriptWalk {
    fn compute_mask(&mut self) -> Result<(), String> {
        self.mask = if self.pos < 3 {
            vec![self.pos as u32]
        } else {
            vec![9]
        };
        Ok(())
    }
    fn allowed(&self, t: u32) -> bool {
        self.mask.contains(&t)
    }
    fn commit(&mut self, t: u32) -> Result<(), String> {
        if t == 1 && self.pos == 1 {
            self.pos += 1;
            return Ok(());
        }
        if t as usize == self.pos {
            self.pos += 1;
            Ok(())
        } else {
            Err("no".into())
        }
    }
}
impl Compiled for Script {
    fn walk(&self) -> Result<Box<dyn Walk + '_>, String> {
        Ok(Box::new(ScriptWalk {
            pos: 0,
            mask: vec![],
        }))
    }
    fn memory(&self) -> Option<usize> {
        Some(1)
    }
}
impl Engine for Script {
    fn name(&self) -> &'static str {
        "script"
    }
    fn compile(&self, src: &Source<'_>) -> Result<Box<dyn Compiled + '_>, String> {
        match src {
            Source::Schema(v) if v.get("refuse").is_some() => {
                Err("refused: keyword `refuse`".into())
            }
            _ => Ok(Box::new(Script)),
        }
    }
}

#[test]
fn walk_follows_the_protocol() {
    let schema = json!({});
    let tests = vec![vec![0, 1, 2], vec![0, 2], vec![0, 1], vec![]];
    let run = run_file(&Script, &Source::Schema(&schema), &tests, 9);
    assert!(run.compile_error.is_none());
    let got: Vec<(bool, usize, Option<&str>)> = run
        .tests
        .iter()
        .map(|t| (t.accepted, t.steps, t.reject))
        .collect();
    assert_eq!(
        got,
        vec![
            (true, 3, None),
            (false, 1, Some("mask")),
            (false, 2, Some("eos")),
            (false, 0, Some("eos"))
        ]
    );
    // Masks: test 0 has 4 (the first inside TTFM, so 3 samples); test 1: 2; test 2: 3; test 3: 1.
    assert_eq!(run.mask_us.len(), 3 + 2 + 3 + 1);
    assert!(run.ttfm_us >= run.compile_us);

    let mut t = Tally::default();
    t.add("x", &run, &[true, false, false, false]);
    assert_eq!(
        (t.pass, t.validation_errors, t.invalidation_errors),
        (1, 0, 0)
    );
    let mut t = Tally::default();
    t.add("x", &run, &[false, true, false, false]);
    assert_eq!(
        (t.pass, t.validation_errors, t.invalidation_errors),
        (0, 1, 1)
    );

    let refused = run_file(&Script, &Source::Schema(&json!({"refuse": 1})), &tests, 9);
    assert!(refused.compile_error.unwrap().contains("refuse"));
}

#[test]
fn lark_printing_of_the_json_grammar() {
    let g = formwork_grammar::json::grammar(&Default::default());
    let l = lark::to_lark(&g);
    assert!(l.starts_with("start: r"));
    assert_eq!(l.lines().count(), g.rules().len() + 1);
    assert!(!l.contains("\"\"\""));
}

#[test]
fn percentiles() {
    let v: Vec<f64> = (1..=100).map(|x| x as f64).collect();
    assert_eq!(pct(&v, 0.5), 51.0);
    assert_eq!(pct(&v, 0.99), 100.0);
    assert!(pct(&[], 0.5).is_nan());
}

#[test]
fn mask_engine_answers_a_request_with_the_real_engine() {
    // A byte-level vocabulary: token b is byte b, EOS is 256.
    let bytes: Vec<Vec<u8>> = (0u8..=255).map(|b| vec![b]).collect();
    let vocab = Arc::new(Vocabulary::from_strings(&bytes, &["</s>"]));
    let engine = Formwork::new(vocab, formwork_schema::KeyOrder::Any);
    let dir = std::env::temp_dir().join(format!("formwork-bench-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("case.json");
    let schema =
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]});
    std::fs::write(&path, json!({"schema": schema, "tests": []}).to_string()).unwrap();
    let toks = |s: &str| s.bytes().map(|b| b as u32).collect::<Vec<_>>();
    let req = json!({"path": path, "tokens": [toks("{\"a\":12}"), toks("{\"a\":\"x\"}"), toks("{\"a\":1")]});
    let mut progress = Vec::new();
    let v = answer(&engine, &req.to_string(), 256, &mut progress).unwrap();
    let progress: Value = serde_json::from_slice(&progress).unwrap();
    assert_eq!(progress["kind"], "compiled");
    assert_eq!(v["kind"], "result");
    assert_eq!(v["tests"][0], json!({"accepted": true, "steps": 8}));
    assert_eq!(v["tests"][1]["accepted"], false);
    assert_eq!(v["tests"][1]["reject"], "mask");
    assert_eq!(
        v["tests"][1]["steps"], 5,
        "the quote after the colon is refused"
    );
    assert_eq!(v["tests"][2]["reject"], "eos");
    // 8 + 1 masks for test 0 minus the first (inside TTFM), 6 for test 1, 6 + 1 for test 2.
    assert_eq!(v["mask_us"].as_array().unwrap().len(), 8 + 6 + 7);
    assert!(v["ttfm_us"].as_f64().unwrap() >= v["compile_us"].as_f64().unwrap());

    let bad = answer(
        &engine,
        "{\"path\": \"/nonexistent/x.json\", \"tokens\": []}",
        256,
        &mut Vec::new(),
    );
    assert!(format!("{:#}", bad.unwrap_err()).contains("/nonexistent/x.json"));
    std::fs::remove_dir_all(&dir).unwrap();
}
