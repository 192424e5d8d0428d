//! `formwork embed` end to end with the real default model (SmolLM2-135M-Instruct, 576
//! dimensions): one unit vector per input, identical inputs give identical vectors, stdin
//! lines as inputs, and the `--json` shape.

mod common;
use common::{formwork_on_model, ok};
use std::process::Output;


fn embed(args: &[&str], stdin: Option<&str>) -> Output {
    formwork_on_model("embed", args, stdin)
}

fn vectors(stdout: &str) -> Vec<Vec<f64>> {
    stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?} is not a JSON array: {e}"))).collect()
}

fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

#[test]
fn one_unit_vector_per_input_and_identical_inputs_agree() {
    let out = ok(&embed(&["The sky is blue.", "Pasta with tomato sauce.", "The sky is blue."], None));
    let v = vectors(&out);
    assert_eq!(v.len(), 3, "{out}");
    for x in &v {
        assert_eq!(x.len(), 576);
        assert!((norm(x) - 1.0).abs() < 1e-3, "norm {}", norm(x));
    }
    assert_eq!(v[0], v[2], "identical inputs give identical vectors");
    assert_ne!(v[0], v[1]);
    // Another run gives the same vector again.
    let again = vectors(&ok(&embed(&["The sky is blue."], None)));
    assert_eq!(again[0], v[0]);
}

#[test]
fn stdin_lines_and_the_json_shape() {
    let out = ok(&embed(&["--json"], Some("first line\n\nsecond line\n")));
    let doc: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{out}: {e}"));
    assert!(doc["model"].as_str().is_some_and(|m| !m.is_empty()), "{doc}");
    let e = doc["embeddings"].as_array().unwrap();
    assert_eq!(e.len(), 2, "a blank line is not an input");
    assert!(e.iter().all(|v| v.as_array().unwrap().len() == 576));
}

#[test]
fn nothing_to_embed_is_an_error() {
    let out = embed(&[], Some("\n"));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to embed"), "{}", String::from_utf8_lossy(&out.stderr));
}
