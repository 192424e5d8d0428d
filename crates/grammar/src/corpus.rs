//! The data-driven grammar corpus format (`testdata/corpus/*.json`): each file a list of
//! cases `{name, grammar, accept, reject}`, a GBNF grammar with inputs it must accept and
//! inputs it must reject. Read by this crate's tests and by `formwork bench masks --corpus`.

use std::path::Path;

/// One case of a corpus file.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct CorpusCase {
    /// What the case checks.
    #[serde(default)]
    pub name: String,
    /// The grammar, as GBNF (some cases hold malformed grammars that must be refused).
    pub grammar: String,
    /// Inputs the grammar accepts.
    #[serde(default)]
    pub accept: Vec<String>,
    /// Inputs the grammar rejects.
    #[serde(default)]
    pub reject: Vec<String>,
}

/// Every case of every `*.json` file in `dir`, files in name order, each with its file's
/// stem. An unreadable folder or file, or one that is not a list of cases, is an error
/// naming the path.
pub fn read_corpus(dir: &Path) -> std::io::Result<Vec<(String, CorpusCase)>> {
    let named = |p: &Path, e: &dyn std::fmt::Display| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", p.display()));
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| named(dir, &e))? {
        let p = e.map_err(|e| named(dir, &e))?.path();
        if p.extension().is_some_and(|x| x == "json") {
            files.push(p);
        }
    }
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| named(&f, &e))?;
        let cases: Vec<CorpusCase> = serde_json::from_str(&text).map_err(|e| named(&f, &format!("not a corpus file: {e}")))?;
        let stem = f.file_stem().unwrap_or_default().to_string_lossy().into_owned();
        out.extend(cases.into_iter().map(|c| (stem.clone(), c)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cases_in_file_order_and_names_a_bad_file() {
        let dir = std::env::temp_dir().join(format!("formwork-corpus-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("b.json"), r#"[{"name": "x", "grammar": "root ::= \"b\"", "accept": ["b"]}]"#).unwrap();
        std::fs::write(dir.join("a.json"), r#"[{"grammar": "root ::= \"a\"", "reject": ["b"]}]"#).unwrap();
        std::fs::write(dir.join("notes.txt"), "not a case").unwrap();
        let cases = read_corpus(&dir).unwrap();
        assert_eq!(cases.iter().map(|(f, c)| (f.as_str(), c.grammar.as_str())).collect::<Vec<_>>(), [("a", "root ::= \"a\""), ("b", "root ::= \"b\"")]);
        assert_eq!(cases[0].1.reject, ["b"]);
        assert_eq!(cases[1].1.accept, ["b"]);
        std::fs::write(dir.join("c.json"), "{}").unwrap();
        let err = read_corpus(&dir).unwrap_err().to_string();
        assert!(err.contains("c.json") && err.contains("not a corpus file"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
