//! `formwork grammar`: tools for grammars and schemas.
//!
//! | subcommand | what it does |
//! |---|---|
//! | `print FILE.gbnf` | the grammar as normalized GBNF (`--ir`: the IR; `--json`/`--schema`: those grammars) |
//! | `check (--grammar F \| --schema S \| --json) < input` | accept (exit 0) or reject (exit 1) the input, and say where it failed; exit 2 when a limit stopped the check (undecided) |
//! | `compile SCHEMA.json` | the GBNF that a JSON Schema compiles to |
//! | `tokens (--grammar F \| ...) --tokenizer smollm2\|llama3\|PATH --prefix TEXT` | the tokens allowed after a prefix |
//!
//! Flags are resolved in two steps: the raw clap structs here, then [`Source::load`] turns
//! the grammar flags into a [`Grammar`].

use anyhow::{bail, Context, Result};
use formwork_grammar::json::JsonGrammarOptions;
use formwork_grammar::matcher::{CompiledGrammar, MatchError, Matcher};
use formwork_grammar::{gbnf, json, Grammar, Limits};
use formwork_vocab::{TokenId, TokenMask, Vocabulary};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Print a grammar as normalized GBNF (or its IR).
    Print(PrintArgs),
    /// Check text from stdin (or --input) against a grammar: exit 0 when it matches, 1 when
    /// it does not (with the place it failed and what was expected there), 2 when a limit
    /// (parser stacks or states) stopped the check before it could tell.
    Check(CheckArgs),
    /// Compile a JSON Schema and print the grammar as GBNF.
    Compile(CompileArgs),
    /// List the tokens a grammar allows after a prefix (a debugging aid).
    Tokens(TokensArgs),
    /// Print the SQL grammar of a live database (SQLite path or postgres:// URL) as GBNF:
    /// the part of `formwork sql`'s constraint that one GBNF can express.
    Sql(crate::sql_cmd::DbArgs),
}

/// Where a grammar comes from: exactly one of `--grammar`, `--schema`, `--json`.
#[derive(clap::Args, Debug, Clone)]
#[group(id = "source", required = true, multiple = false)]
pub struct Source {
    /// A GBNF grammar file (`-` for stdin).
    #[arg(long, value_name = "FILE.gbnf")]
    grammar: Option<PathBuf>,
    /// A JSON Schema file, compiled to a grammar.
    #[arg(long, value_name = "SCHEMA.json")]
    schema: Option<PathBuf>,
    /// The built-in JSON grammar (an object at the root, as `format: "json"`).
    #[arg(long)]
    json: bool,
}

/// Options of the built-in JSON grammar and of schema compilation.
#[derive(clap::Args, Debug, Clone)]
pub struct SourceOptions {
    /// With --json: allow any JSON value at the root, not only an object.
    #[arg(long)]
    any_value: bool,
    /// With --json: most consecutive whitespace characters between tokens (`unbounded` for
    /// no bound; the default is `json::DEFAULT_MAX_WS_RUN`).
    #[arg(long, value_name = "N|unbounded", value_parser = parse_ws_run, default_value = "20")]
    max_ws_run: WsRun,
    /// With --schema: turn keywords that cannot be enforced into warnings.
    #[arg(long)]
    lenient: bool,
    /// With --schema: OpenAI strict mode (all properties required, no additional ones).
    #[arg(long)]
    strict: bool,
    /// With --schema: object keys in any order, each at most once (what JSON Schema means),
    /// instead of the generation grammar's `properties` order. Printed grammars then show
    /// objects as `@unordered(...)`, which is not GBNF.
    #[arg(long)]
    any_key_order: bool,
    /// With --schema: how JSON is laid out: `flexible` (bounded whitespace runs anywhere
    /// between tokens), `compact` (none), `pretty` (two-space indentation, nothing else).
    #[arg(long, value_name = "STYLE", default_value = "flexible", value_parser = ["flexible", "compact", "pretty"])]
    whitespace: String,
}

/// A whitespace bound from the command line.
#[derive(Clone, Copy, Debug)]
struct WsRun(Option<u32>);

fn parse_ws_run(s: &str) -> Result<WsRun, String> {
    if s == "unbounded" {
        return Ok(WsRun(None));
    }
    s.parse::<u32>().map(|n| WsRun(Some(n))).map_err(|_| format!("`{s}` is not a count or `unbounded`"))
}

/// Flags of `grammar print`.
#[derive(clap::Args, Debug)]
pub struct PrintArgs {
    /// The GBNF file (`-` for stdin).
    #[arg(value_name = "FILE.gbnf", required_unless_present_any = ["json", "schema"])]
    file: Option<PathBuf>,
    /// Print the built-in JSON grammar instead.
    #[arg(long, conflicts_with_all = ["file", "schema"])]
    json: bool,
    /// Print the grammar a JSON Schema compiles to instead.
    #[arg(long, value_name = "SCHEMA.json", conflicts_with = "file")]
    schema: Option<PathBuf>,
    /// Print the IR (rules and expression trees) rather than GBNF.
    #[arg(long)]
    ir: bool,
    #[command(flatten)]
    opts: SourceOptions,
}

/// Flags of `grammar check`.
#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    #[command(flatten)]
    source: Source,
    #[command(flatten)]
    opts: SourceOptions,
    /// Read the text to check from this file instead of stdin.
    #[arg(long, value_name = "FILE")]
    input: Option<PathBuf>,
    /// Most parser stacks at once (`Limits::max_stacks`; default 10000). A check that needs
    /// more stops as "undecided" (exit 2); a larger bound decides it, at more work per byte.
    #[arg(long, value_name = "N")]
    max_stacks: Option<usize>,
}

/// Flags of `grammar compile`.
#[derive(clap::Args, Debug)]
pub struct CompileArgs {
    /// The JSON Schema file (`-` for stdin).
    #[arg(value_name = "SCHEMA.json")]
    schema: PathBuf,
    #[command(flatten)]
    opts: SourceOptions,
}

/// Flags of `grammar tokens`.
#[derive(clap::Args, Debug)]
pub struct TokensArgs {
    #[command(flatten)]
    source: Source,
    #[command(flatten)]
    opts: SourceOptions,
    /// The vocabulary: `smollm2`, `llama3` (the shared test tokenizers), or a path to a
    /// `tokenizer.json` or `.gguf` file.
    #[arg(long, value_name = "smollm2|llama3|PATH")]
    tokenizer: String,
    /// The text generated so far.
    #[arg(long, default_value = "")]
    prefix: String,
    /// Most tokens to list.
    #[arg(long, default_value_t = 50)]
    limit: usize,
}

/// Runs a subcommand.
pub fn main(c: Command) -> Result<()> {
    let limits = Limits::default();
    match c {
        Command::Print(a) => {
            let g = if a.json {
                json_grammar(&a.opts)
            } else if let Some(s) = &a.schema {
                compile_schema(s, &a.opts, &limits)?
            } else {
                let file = a.file.as_deref().expect("clap requires FILE");
                parse_gbnf(file, &limits)?
            };
            if a.ir {
                print_ir(&g);
            } else {
                print!("{}", gbnf::print(&g));
            }
            Ok(())
        }
        Command::Compile(a) => {
            let g = compile_schema(&a.schema, &a.opts, &limits)?;
            print!("{}", gbnf::print(&g));
            Ok(())
        }
        Command::Check(a) => {
            let g = a.source.load(&a.opts, &limits)?;
            let input = match &a.input {
                Some(p) => std::fs::read(p).with_context(|| format!("reading {}", p.display()))?,
                None => {
                    let mut v = Vec::new();
                    std::io::stdin().read_to_end(&mut v).context("reading stdin")?;
                    v
                }
            };
            let limits = Limits { max_stacks: a.max_stacks.unwrap_or(limits.max_stacks), ..limits };
            let verdict = check(&g, &input, &limits)?;
            println!("{verdict}");
            if !verdict.accepted() {
                std::process::exit(if matches!(verdict, Verdict::Undecided { .. }) { 2 } else { 1 });
            }
            Ok(())
        }
        Command::Tokens(a) => {
            let g = a.source.load(&a.opts, &limits)?;
            let vocab = load_vocab(&a.tokenizer)?;
            tokens(&g, vocab, a.prefix.as_bytes(), a.limit, &limits)
        }
        Command::Sql(db) => crate::sql_cmd::print_grammar(&db),
    }
}

impl Source {
    /// Resolves the flags into a grammar.
    fn load(&self, opts: &SourceOptions, limits: &Limits) -> Result<Grammar> {
        if let Some(p) = &self.grammar {
            parse_gbnf(p, limits)
        } else if let Some(p) = &self.schema {
            compile_schema(p, opts, limits)
        } else if self.json {
            Ok(json_grammar(opts))
        } else {
            bail!("give one of --grammar FILE.gbnf, --schema SCHEMA.json or --json")
        }
    }
}

fn read_text(p: &Path) -> Result<String> {
    if p == Path::new("-") {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).context("reading stdin")?;
        return Ok(s);
    }
    std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))
}

fn parse_gbnf(p: &Path, limits: &Limits) -> Result<Grammar> {
    let text = read_text(p)?;
    // The error's Display shows the line with a caret; keep it whole.
    gbnf::parse(&text, limits).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))
}

fn json_grammar(opts: &SourceOptions) -> Grammar {
    json::grammar(&JsonGrammarOptions { root_object_only: !opts.any_value, max_ws_run: opts.max_ws_run.0, ..Default::default() })
}

fn compile_schema(p: &Path, opts: &SourceOptions, limits: &Limits) -> Result<Grammar> {
    let text = read_text(p)?;
    let schema: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not valid JSON", p.display()))?;
    let so = formwork_schema::SchemaOptions {
        lenient: opts.lenient,
        strict: opts.strict,
        limits: limits.clone(),
        key_order: if opts.any_key_order { formwork_schema::KeyOrder::Any } else { formwork_schema::KeyOrder::Listed },
        whitespace: formwork_schema::Whitespace::from_name(&opts.whitespace).unwrap_or_default(),
        ..Default::default()
    };
    let (g, warnings) = formwork_schema::compile_with_warnings(&schema, &so)
        .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
    for w in warnings {
        eprintln!("warning: {w}");
    }
    Ok(g)
}

fn print_ir(g: &Grammar) {
    for (i, r) in g.rules().iter().enumerate() {
        let mark = if i == g.root().index() { " (root)" } else { "" };
        println!("#{i} {}{mark} = {:#?}", r.name, r.expr);
    }
}

/// A vocabulary of the 256 single bytes plus an EOS, for checking text byte by byte.
fn byte_vocab() -> Arc<Vocabulary> {
    let bytes: Vec<[u8; 1]> = (0..=255u8).map(|b| [b]).collect();
    Arc::new(Vocabulary::from_strings(&bytes, &["<eos>"]))
}

/// The result of `grammar check`.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Accepted { len: usize },
    /// The byte at `offset` cannot be consumed.
    Rejected { offset: usize, line: usize, column: usize, found: String, expected: String, snippet: String, caret: usize },
    /// All bytes were consumed but the grammar needs more.
    EndedEarly { len: usize, expected: String },
    /// The step at `offset` went over a limit (`why`: too many parser stacks or states at
    /// once, and for stacks, the flag that raises the bound): the input may or may not
    /// match, and a rejection would misreport it.
    Undecided { offset: usize, line: usize, column: usize, why: String },
}

impl Verdict {
    fn accepted(&self) -> bool {
        matches!(self, Verdict::Accepted { .. })
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Accepted { len } => write!(f, "accepted ({len} bytes)"),
            Verdict::Rejected { offset, line, column, found, expected, snippet, caret } => {
                let num = line.to_string();
                let pad = " ".repeat(num.len());
                write!(
                    f,
                    "rejected at byte {offset} (line {line}, column {column}): found {found}, expected {expected}\n\
                     {pad} |\n{num} | {snippet}\n{pad} | {}^",
                    " ".repeat(*caret)
                )
            }
            Verdict::EndedEarly { len, expected } => {
                write!(f, "rejected: input ended early after {len} bytes: expected {expected}")
            }
            Verdict::Undecided { offset, line, column, why } => {
                write!(f, "undecided at byte {offset} (line {line}, column {column}): {why}")
            }
        }
    }
}

/// Runs `input` through the matcher one byte at a time and reports the first byte it
/// cannot take, or what it still needed at the end.
fn check(g: &Grammar, input: &[u8], limits: &Limits) -> Result<Verdict> {
    let compiled = CompiledGrammar::new(g, byte_vocab(), limits).context("compiling the grammar")?;
    let mut m = compiled.matcher();
    for (i, &b) in input.iter().enumerate() {
        if let Err(e) = m.commit_bytes(&[b]) {
            if !matches!(e, MatchError::BytesRejected { .. }) {
                let (line, column, _, _) = locate(input, i);
                let hint = if matches!(e, MatchError::TooManyStacks { .. }) { " (`--max-stacks N` raises the stack bound for this check)" } else { "" };
                return Ok(Verdict::Undecided { offset: i, line, column, why: format!("{e}{hint}") });
            }
            let expected = expected_bytes(&mut m);
            let (line, column, snippet, caret) = locate(input, i);
            let found = if b.is_ascii_graphic() || b == b' ' {
                format!("`{}`", b as char)
            } else {
                format!("byte 0x{b:02X}")
            };
            return Ok(Verdict::Rejected { offset: i, line, column, found, expected, snippet, caret });
        }
    }
    if m.is_accepting() {
        Ok(Verdict::Accepted { len: input.len() })
    } else {
        Ok(Verdict::EndedEarly { len: input.len(), expected: expected_bytes(&mut m) })
    }
}

/// What the matcher accepts next, in words: the forced text when there is exactly one
/// continuation, else the allowed bytes as ranges.
fn expected_bytes(m: &mut Matcher) -> String {
    let forced = m.forced_bytes();
    if !forced.is_empty() {
        let shown: String = String::from_utf8_lossy(&forced).chars().take(40).collect();
        return format!("{shown:?}");
    }
    let mut mask = TokenMask::new(257);
    m.compute_mask(&mut mask);
    let allowed: Vec<u8> = (0..=255u8).filter(|&b| mask.contains(TokenId(b as u32))).collect();
    let eos = mask.contains(TokenId(256));
    let mut parts = Vec::new();
    let mut i = 0;
    while i < allowed.len() {
        let mut j = i;
        while j + 1 < allowed.len() && allowed[j + 1] == allowed[j] + 1 {
            j += 1;
        }
        let (a, b) = (allowed[i], allowed[j]);
        parts.push(if a == b { show_byte(a) } else { format!("{}..{}", show_byte(a), show_byte(b)) });
        i = j + 1;
    }
    if eos {
        parts.push("the end of the input".into());
    }
    match parts.len() {
        0 => "nothing (the grammar is complete)".into(),
        1 => parts.pop().unwrap(),
        _ => format!("one of {}", parts.join(", ")),
    }
}

fn show_byte(b: u8) -> String {
    match b {
        b'\n' => "`\\n`".into(),
        b'\t' => "`\\t`".into(),
        b'\r' => "`\\r`".into(),
        b' ' => "` `".into(),
        b if b.is_ascii_graphic() => format!("`{}`", b as char),
        b => format!("0x{b:02X}"),
    }
}

/// 1-based line and column (in characters) of byte `offset`, the text of its line (at
/// most ~100 characters around it) and the caret position in that text.
fn locate(input: &[u8], offset: usize) -> (usize, usize, String, usize) {
    let line_start = input[..offset].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let line_end = input[offset..].iter().position(|&b| b == b'\n').map_or(input.len(), |i| offset + i);
    let line = input[..offset].iter().filter(|&&b| b == b'\n').count() + 1;
    let before: Vec<char> = String::from_utf8_lossy(&input[line_start..offset]).chars().collect();
    let after: Vec<char> = String::from_utf8_lossy(&input[offset..line_end]).chars().collect();
    let column = before.len() + 1;
    let skip = before.len().saturating_sub(60);
    let text: String = before[skip..].iter().chain(after.iter().take(40)).map(|&c| if c.is_control() { ' ' } else { c }).collect();
    (line, column, text, before.len() - skip)
}

fn shared_tokenizer(name: &str) -> Option<(PathBuf, TokenId)> {
    let (file, eos) = match name {
        "smollm2" => ("smollm2.json", TokenId(2)),
        "llama3" | "llama3_1" | "llama3.1" => ("llama3_1.json", TokenId(128_009)),
        _ => return None,
    };
    let dir = std::env::var_os("FORMWORK_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data")));
    Some((dir.join("tokenizers").join(file), eos))
}

fn load_vocab(spec: &str) -> Result<Arc<Vocabulary>> {
    let v = if let Some((path, eos)) = shared_tokenizer(spec) {
        Vocabulary::from_tokenizer_json_file(&path, Some(eos)).with_context(|| {
            format!("loading the `{spec}` tokenizer from {} (set FORMWORK_SHARED_DATA to the shared data folder)", path.display())
        })?
    } else if spec.ends_with(".gguf") {
        Vocabulary::from_gguf_file(spec).with_context(|| format!("reading the vocabulary of {spec}"))?
    } else {
        Vocabulary::from_tokenizer_json_file(spec, None).with_context(|| format!("reading tokenizer {spec}"))?
    };
    Ok(Arc::new(v))
}

fn tokens(g: &Grammar, vocab: Arc<Vocabulary>, prefix: &[u8], limit: usize, limits: &Limits) -> Result<()> {
    let compiled = CompiledGrammar::new(g, vocab.clone(), limits).context("compiling the grammar")?;
    let mut m = compiled.matcher();
    if !prefix.is_empty() {
        match check(g, prefix, limits)? {
            Verdict::Rejected { offset, expected, .. } => bail!("the prefix leaves the grammar at byte {offset} (expected {expected})"),
            v @ Verdict::Undecided { .. } => bail!("the prefix cannot be checked: {v}"),
            _ => {}
        }
        m.commit_bytes(prefix).map_err(|e| anyhow::anyhow!("the prefix does not match the grammar: {e}"))?;
    }
    let mut mask = TokenMask::new(vocab.len());
    let t = std::time::Instant::now();
    m.compute_mask(&mut mask);
    let took = t.elapsed();
    let allowed: Vec<TokenId> = vocab.ids().filter(|&t| mask.contains(t)).collect();
    let eos = vocab.eos_tokens().iter().any(|&t| mask.contains(t));
    println!(
        "prefix: {} bytes; accepting: {}; EOS allowed: {eos}; forced next: {:?}",
        prefix.len(),
        m.is_accepting(),
        String::from_utf8_lossy(&m.forced_bytes())
    );
    println!("allowed: {} of {} tokens (mask computed in {took:.1?})", allowed.len(), vocab.len());
    for &t in allowed.iter().take(limit) {
        println!("{:>8}  {:?}", t.0, String::from_utf8_lossy(vocab.token_bytes(t)));
    }
    if allowed.len() > limit {
        println!("... and {} more (--limit)", allowed.len() - limit);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(grammar: &str, input: &str) -> Verdict {
        let g = gbnf::parse(grammar, &Limits::default()).unwrap();
        check(&g, input.as_bytes(), &Limits::default()).unwrap()
    }

    #[test]
    fn check_accepts_and_locates_the_first_bad_byte() {
        assert_eq!(verdict(r#"root ::= "ab"+"#, "abab"), Verdict::Accepted { len: 4 });
        let v = verdict("root ::= line+\nline ::= [a-z]+ \"\\n\"", "abc\nde1\n");
        let Verdict::Rejected { offset, line, column, ref found, ref expected, .. } = v else { panic!("{v:?}") };
        assert_eq!((offset, line, column), (6, 2, 3));
        assert_eq!(found, "`1`");
        assert_eq!(expected, "one of `\\n`, `a`..`z`");
        assert_eq!(v.to_string(), "rejected at byte 6 (line 2, column 3): found `1`, expected one of `\\n`, `a`..`z`\n  |\n2 | de1\n  |   ^");
    }

    #[test]
    fn check_says_undecided_when_a_limit_stops_it() {
        // After `b`, three stacks (one per rule): over a limit of 2; after `a`, two.
        let g = gbnf::parse("root ::= \"a\" (x | y) | \"b\" (x | y | z)\nx ::= [1-3] \"p\"\ny ::= [12] \"q\"\nz ::= \"1\" \"r\"", &Limits::default()).unwrap();
        let tight = Limits { max_stacks: 2, ..Limits::default() };
        let v = check(&g, b"b1r", &tight).unwrap();
        assert!(matches!(v, Verdict::Undecided { offset: 0, .. }), "{v:?}");
        assert!(v.to_string().starts_with("undecided at byte 0 (line 1, column 1): the grammar is too ambiguous here"), "{v}");
        assert!(v.to_string().ends_with("(`--max-stacks N` raises the stack bound for this check)"), "{v}");
        assert!(!v.accepted());
        assert!(check(&g, b"a1p", &tight).unwrap().accepted());
        assert!(matches!(check(&g, b"a1r", &tight).unwrap(), Verdict::Rejected { offset: 2, .. }));
        // With room, the same input is simply accepted.
        assert!(check(&g, b"b1r", &Limits::default()).unwrap().accepted());
    }

    #[test]
    fn check_reports_an_early_end_with_what_was_expected() {
        let v = verdict(r#"root ::= "{" [0-9]+ "}""#, "{12");
        assert_eq!(v, Verdict::EndedEarly { len: 3, expected: "one of `0`..`9`, `}`".into() });
        let v = verdict(r#"root ::= "hello world""#, "hello");
        assert_eq!(v.to_string(), "rejected: input ended early after 5 bytes: expected \" world\"");
    }

    #[test]
    fn check_with_the_json_grammar() {
        let g = json::grammar(&JsonGrammarOptions::default());
        let l = Limits::default();
        assert!(check(&g, br#"{"a": [1, 2.5e3, "x\n"]}"#, &l).unwrap().accepted());
        let v = check(&g, b"{\"a\": 01}", &l).unwrap();
        assert!(matches!(v, Verdict::Rejected { offset: 7, .. }), "{v}");
        let spaces = format!("{{{}}}", " ".repeat(json::DEFAULT_MAX_WS_RUN as usize + 1));
        let v = check(&g, spaces.as_bytes(), &l).unwrap();
        assert!(matches!(v, Verdict::Rejected { offset: 21, .. }), "{v}");
    }

    #[test]
    fn check_with_any_key_order_accepts_reordered_keys_once() {
        let dir = std::env::temp_dir().join(format!("formwork-anyorder-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("s.json");
        std::fs::write(&p, r#"{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a"]}"#).unwrap();
        let l = Limits::default();
        let mut opts = SourceOptions { any_value: false, max_ws_run: WsRun(Some(20)), lenient: false, strict: false, any_key_order: false, whitespace: "flexible".into() };
        let listed = compile_schema(&p, &opts, &l).unwrap();
        assert!(!check(&listed, br#"{"b":"x","a":1}"#, &l).unwrap().accepted());
        opts.any_key_order = true;
        let any = compile_schema(&p, &opts, &l).unwrap();
        assert!(check(&any, br#"{"b":"x","a":1}"#, &l).unwrap().accepted());
        // A second `"a"` fails at its closing quote (`"ab"` would be an additional key).
        let v = check(&any, br#"{"a":1,"a":2}"#, &l).unwrap();
        assert!(matches!(v, Verdict::Rejected { offset: 9, .. }), "{v}");
        assert!(gbnf::print(&any).contains("@unordered("));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn non_ascii_input_is_located_by_characters() {
        let v = verdict(r#"root ::= [^x]*"#, "ééx");
        assert!(matches!(v, Verdict::Rejected { offset: 4, line: 1, column: 3, .. }), "{v:?}");
    }
}
