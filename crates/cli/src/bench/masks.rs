//! `formwork bench masks`: MaskBench files (and grammars) through formwork and the peer engine,
//! on the same tokens, in the same run.

use super::report::{fmt_us, print_table, Tally};
use super::*;

// ---------------------------------------------------------------------------------------
// masks

pub(super) fn shared_data() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data"))
}

/// Real tokenization for MaskBench instances (the harness's: no special tokens).
struct HfTokenizer {
    tok: tokenizers::pipeline::PipelineTokenizer,
    vocab_len: usize,
}

impl HfTokenizer {
    fn load(path: &Path, vocab_len: usize) -> anyhow::Result<Self> {
        // The tokenizers release reads its canonical format; a byte-level vocabulary missing
        // single-byte tokens (SmolLM2 lacks 8) gets placeholder ids past the vocabulary, which
        // `encode` reports if they ever come out.
        let canon = tokenizers::canonicalize_file(path)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let mut v: Value = serde_json::from_str(&canon)?;
        if v.pointer("/model/byte_level").and_then(Value::as_bool) == Some(true) {
            if let Some(map) = v.pointer_mut("/model/vocab").and_then(Value::as_object_mut) {
                let printable = |x: u8| matches!(x, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
                let mut next = vocab_len;
                for b in 0u8..=255 {
                    let c = if printable(b) {
                        b as char
                    } else {
                        char::from_u32(256 + (0..b).filter(|&x| !printable(x)).count() as u32)
                            .unwrap_or('?')
                    };
                    if !map.contains_key(&c.to_string()) {
                        map.insert(c.to_string(), json!(next));
                        next += 1;
                    }
                }
            }
        }
        let tok = tokenizers::from_json(&v.to_string())
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        Ok(HfTokenizer { tok, vocab_len })
    }

    fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        let opts = tokenizers::pipeline::EncodeOptions {
            add_special_tokens: false,
            ..Default::default()
        };
        let encs = self
            .tok
            .encode(text, &opts)
            .wait()
            .map_err(|e| e.to_string())?;
        let ids: Vec<u32> = encs
            .iter()
            .flat_map(|e| e.ids().iter().map(|t| t.id()))
            .collect();
        if ids.iter().any(|&i| i as usize >= self.vocab_len) {
            return Err("the text has a byte the vocabulary has no token for".into());
        }
        Ok(ids)
    }
}

pub(super) fn masks(a: MasksArgs) -> anyhow::Result<()> {
    let (tok_path, default_eos) = match a.tokenizer.as_str() {
        "smollm2" => (shared_data().join("tokenizers/smollm2.json"), Some(2)),
        "llama3" | "llama3_1" => (
            shared_data().join("tokenizers/llama3_1.json"),
            Some(128_009),
        ),
        p => (PathBuf::from(p), None),
    };
    let eos = a.eos.or(default_eos);
    let mut vocab = Vocabulary::from_tokenizer_json_file(&tok_path, eos.map(TokenId))
        .with_context(|| format!("loading {}", tok_path.display()))?;
    let Some(eos) = eos.map(TokenId).or_else(|| vocab.eos_token()) else {
        bail!(
            "{} has no end-of-sequence token I recognize; pass --eos ID",
            tok_path.display()
        );
    };
    vocab.set_eos_tokens(vec![eos])?;
    let vocab = Arc::new(vocab);
    eprintln!(
        "vocabulary: {} ({} tokens, EOS {eos})",
        tok_path.display(),
        vocab.len()
    );

    let mut engines: Vec<Box<dyn Engine>> = Vec::new();
    let want = |n: &str| a.engine.as_deref().is_none_or(|e| e == n);
    if want("formwork") {
        let mut fw = Formwork::new(vocab.clone(), a.key_order.into());
        fw.lazy = !a.eager;
        fw.index.set_class_builds(a.class_builds.into());
        engines.push(Box::new(fw));
    }
    #[cfg(feature = "llguidance-peer")]
    if want("llguidance") {
        let t0 = Instant::now();
        engines.push(Box::new(peer::Llg::new(&vocab, eos)?));
        eprintln!(
            "llguidance token tables built in {:.0} ms",
            t0.elapsed().as_secs_f64() * 1e3
        );
    }
    #[cfg(not(feature = "llguidance-peer"))]
    eprintln!(
        "NOTE: built without the `llguidance-peer` feature: formwork only, no comparison (rebuild with default features)"
    );
    if engines.is_empty() {
        bail!("no engine selected (--engine formwork|llguidance)");
    }

    let data = a
        .data
        .clone()
        .unwrap_or_else(|| shared_data().join("maskbench-dev"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&data)
        .with_context(|| format!("reading {}", data.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    if let Some(h) = a.half {
        files.retain(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            half_of(&name) == h
        });
    }
    files.sort();
    if let Some(n) = a.limit {
        files.truncate(n);
    }
    let hf = HfTokenizer::load(&tok_path, vocab.len())?;
    // Instances are serialized with their keys in document order, and schemas keep the order
    // of `properties`: that needs serde_json's `preserve_order` somewhere in the build
    // (llguidance turns it on).
    let ordered: Value = serde_json::from_str(r#"{"b":0,"a":0}"#)?;
    if ordered
        .as_object()
        .and_then(|o| o.keys().next())
        .map(String::as_str)
        != Some("b")
    {
        eprintln!(
            "WARNING: serde_json was built without `preserve_order`: object keys come out sorted, so \
             instances and schemas lose their key order and results will be wrong"
        );
    }

    // Load and tokenize every instance once.
    struct Case {
        name: String,
        schema: Value,
        tokens: Vec<Vec<u32>>,
        valid: Vec<bool>,
    }
    let mut cases = Vec::new();
    let mut skipped = 0;
    for f in &files {
        let v: Value = match std::fs::read_to_string(f)
            .map_err(|e| e.to_string())
            .and_then(|s| serde_json::from_str(&s).map_err(|e| e.to_string()))
        {
            Ok(v) => v,
            Err(e) => {
                eprintln!("skipping {}: {e}", f.display());
                skipped += 1;
                continue;
            }
        };
        let (Some(schema), Some(tests)) =
            (v.get("schema"), v.get("tests").and_then(Value::as_array))
        else {
            skipped += 1;
            continue;
        };
        let mut c = Case {
            name: f
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned(),
            schema: schema.clone(),
            tokens: Vec::new(),
            valid: Vec::new(),
        };
        let mut ok = true;
        for t in tests {
            let text = serde_json::to_string(t.get("data").unwrap_or(&Value::Null))?;
            match hf.encode(&text) {
                Ok(ids) => c.tokens.push(ids),
                Err(e) => {
                    eprintln!("skipping {}: {e}", c.name);
                    ok = false;
                    break;
                }
            }
            c.valid
                .push(t.get("valid").and_then(Value::as_bool).unwrap_or(true));
        }
        if ok {
            cases.push(c);
        } else {
            skipped += 1;
        }
    }
    eprintln!(
        "{} MaskBench files from {} ({} skipped)",
        cases.len(),
        data.display(),
        skipped
    );

    // Grammars.
    if !a.no_grammars {
        let mut grammars: Vec<(String, Grammar, Vec<Vec<u32>>)> = Vec::new();
        let json_opts = formwork_grammar::json::JsonGrammarOptions {
            root_object_only: false,
            ..Default::default()
        };
        let json_inputs: Vec<Vec<u32>> = cases
            .iter()
            .flat_map(|c| c.tokens.iter().cloned())
            .collect();
        grammars.push((
            "json (built-in)".into(),
            formwork_grammar::json::grammar(&json_opts),
            json_inputs,
        ));
        let inputs: Vec<Vec<u32>> = match &a.input {
            Some(p) => std::fs::read_to_string(p)
                .with_context(|| format!("reading {}", p.display()))?
                .lines()
                .map(|l| hf.encode(l).map_err(|e| anyhow::anyhow!(e)))
                .collect::<anyhow::Result<_>>()?,
            None => Vec::new(),
        };
        for p in &a.grammar {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            let g = formwork_grammar::gbnf::parse(&text, &Limits::default())
                .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
            grammars.push((p.display().to_string(), g, inputs.clone()));
        }
        if let Some(dir) = &a.corpus {
            corpus(dir, &engines, &hf, eos.0)?;
        }
        for (i, (name, g, inputs)) in grammars.iter().enumerate() {
            // The JSON grammar runs twice: the same grammar on both engines (llguidance gets it
            // printed as Lark), then llguidance with its native JSON support (schema `{}`).
            for native in [false, true] {
                if native && (i > 0 || engines.len() < 2) {
                    continue;
                }
                let src = if native {
                    Source::AnyJson(g)
                } else {
                    Source::Grammar(g)
                };
                let mut tallies: Vec<(&'static str, Tally)> = Vec::new();
                for e in &engines {
                    let run = run_file(e.as_ref(), &src, inputs, eos.0);
                    let mut t = Tally::default();
                    // For grammars every input is expected to be accepted.
                    t.add(name, &run, &vec![true; inputs.len()]);
                    tallies.push((e.name(), t));
                }
                let how = if native {
                    " (llguidance: its native JSON, schema {})"
                } else {
                    ""
                };
                print_table(
                    &format!("grammar {name}{how}: {} inputs walked", inputs.len()),
                    &mut tallies,
                );
            }
        }
    }

    // Schemas.
    if !a.no_schemas {
        let mut tallies: Vec<(&'static str, Tally)> = engines
            .iter()
            .map(|e| {
                (
                    e.name(),
                    Tally {
                        keep_slowest: a.slowest,
                        ..Default::default()
                    },
                )
            })
            .collect();
        let t0 = Instant::now();
        for (i, c) in cases.iter().enumerate() {
            for (e, (_, t)) in engines.iter().zip(tallies.iter_mut()) {
                let run = run_file(e.as_ref(), &Source::Schema(&c.schema), &c.tokens, eos.0);
                t.add(&c.name, &run, &c.valid);
            }
            if (i + 1) % 100 == 0 {
                eprintln!(
                    "{} / {} files ({:.0} s)",
                    i + 1,
                    cases.len(),
                    t0.elapsed().as_secs_f64()
                );
            }
        }
        print_table(
            &format!(
                "MaskBench schemas: {} files from {}, tokenizer {}",
                cases.len(),
                data.display(),
                a.tokenizer
            ),
            &mut tallies,
        );
        for (name, t) in &tallies {
            if t.slowest.is_empty() {
                continue;
            }
            println!("\n{name}: the {} slowest times to first mask (µs: compile and first mask, file)", t.slowest_ttfm.len());
            for (us, file) in &t.slowest_ttfm {
                println!("  {us:.0} {file}");
            }
            println!(
                "\n{name}: the {} slowest masks (µs, file, test:step, work, text before the mask)",
                t.slowest.len()
            );
            for (us, file, test, step, work) in &t.slowest {
                let c = cases.iter().find(|c| &c.name == file);
                let before = c.map(|c| {
                    let toks = &c.tokens[*test as usize][..*step as usize];
                    let bytes: Vec<u8> = toks
                        .iter()
                        .flat_map(|&t| vocab.token_bytes(TokenId(t)).to_vec())
                        .collect();
                    let text = String::from_utf8_lossy(&bytes).into_owned();
                    let tail: String = text
                        .chars()
                        .rev()
                        .take(70)
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .collect();
                    tail
                });
                println!(
                    "  {} {file} {test}:{step} {work} {:?}",
                    fmt_us(*us),
                    before.unwrap_or_default()
                );
            }
        }
    }
    #[cfg(not(feature = "llguidance-peer"))]
    println!("\n(built without the llguidance-peer feature: no llguidance figures)");
    Ok(())
}

/// Runs every case of a grammar corpus (see `MasksArgs::corpus`) through each engine and
/// prints one table: a case passes when its accept inputs are accepted and its reject
/// inputs rejected.
fn corpus(
    dir: &Path,
    engines: &[Box<dyn Engine>],
    hf: &HfTokenizer,
    eos: u32,
) -> anyhow::Result<()> {
    let cases = formwork_grammar::corpus::read_corpus(dir)?;
    let mut tallies: Vec<(&'static str, Tally)> = engines
        .iter()
        .map(|e| (e.name(), Tally::default()))
        .collect();
    let (mut n_cases, mut skipped) = (0, 0);
    for (file, c) in &cases {
        // Cases meant to be refused (a malformed grammar) are the parser's tests, not masks'.
        let Ok(g) = formwork_grammar::gbnf::parse(&c.grammar, &Limits::default()) else {
            skipped += 1;
            continue;
        };
        let mut tokens = Vec::new();
        let mut expected = Vec::new();
        for (inputs, valid) in [(&c.accept, true), (&c.reject, false)] {
            for i in inputs {
                // Inputs the tokenizer cannot spell (bytes it has no token for) are skipped.
                if let Ok(t) = hf.encode(i) {
                    tokens.push(t);
                    expected.push(valid);
                }
            }
        }
        n_cases += 1;
        let name = format!("{file}.json:{}", c.name);
        for (e, (_, t)) in engines.iter().zip(tallies.iter_mut()) {
            let run = run_file(e.as_ref(), &Source::Grammar(&g), &tokens, eos);
            t.add(&name, &run, &expected);
        }
    }
    print_table(
        &format!(
            "grammar corpus {}: {n_cases} cases ({skipped} malformed grammars skipped)",
            dir.display()
        ),
        &mut tallies,
    );
    Ok(())
}

/// The half a file belongs to: `A` when the low bit of the first byte of sha256(`name`) is
/// 0, else `B` (bench/common.py `half_of`; not the digest's last bit, whose parity is the
/// dev split's own `int(sha256) % 100 < 15` rule and would split it 8:7).
pub(crate) fn half_of(name: &str) -> HalfArg {
    use sha2::{Digest, Sha256};
    if Sha256::digest(name.as_bytes())[0] & 1 == 0 {
        HalfArg::A
    } else {
        HalfArg::B
    }
}

#[cfg(test)]
mod half_tests {
    use super::*;

    #[test]
    fn halves_follow_the_python_rule() {
        // hashlib.sha256(name.encode()).digest()[0] & 1, as bench/common.py computes it.
        for (name, half) in [("Github_easy---o9.json", HalfArg::A), ("a", HalfArg::A), ("d", HalfArg::A), ("e", HalfArg::B)] {
            assert_eq!(half_of(name), half, "{name}");
        }
    }
}
