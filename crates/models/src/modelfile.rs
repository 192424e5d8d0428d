//! A subset of Ollama's Modelfile: `FROM`, `SYSTEM`, `TEMPLATE`, `PARAMETER`, `#` comments.
//!
//! Values are the rest of the line; `"quoted"` values are unquoted; a value opening with
//! `"""` runs to the next `"""`, across lines (how multi-line system prompts are written).
//! Instructions are case-insensitive. Anything else (`ADAPTER`, `LICENSE`, `MESSAGE`, ...) is
//! refused with its line, so that a Modelfile is never half understood.

use crate::local::Defaults;
use crate::ModelsError;

/// Longest Modelfile read, in bytes (a system prompt and a few parameters).
pub const MAX_MODELFILE_BYTES: usize = 1 << 20;

/// A parsed Modelfile: the base model and the defaults on top of it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Modelfile {
    /// `FROM`: a model name or a GGUF path.
    pub from: String,
    /// `SYSTEM`, `TEMPLATE` and the `PARAMETER`s.
    pub defaults: Defaults,
}

impl Modelfile {
    /// Parses `text`. Errors name the line and say what is wrong.
    pub fn parse(text: &str) -> Result<Modelfile, ModelsError> {
        let err = |line: usize, message: String| ModelsError::Modelfile { line, message };
        if text.len() > MAX_MODELFILE_BYTES {
            return Err(err(1, format!("the Modelfile is {} bytes, over the limit of {MAX_MODELFILE_BYTES}", text.len())));
        }
        let mut out = Modelfile::default();
        let mut from: Option<String> = None;
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            let lineno = i + 1;
            let line = lines[i].trim();
            i += 1;
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (word, rest) = match line.split_once(char::is_whitespace) {
                Some((w, r)) => (w, r.trim()),
                None => (line, ""),
            };
            // A `"""` value: the rest of this line and the next lines up to the closing `"""`.
            let value = if let Some(open) = rest.strip_prefix("\"\"\"") {
                if let Some(body) = open.strip_suffix("\"\"\"").filter(|_| open.len() >= 3) {
                    body.to_string()
                } else {
                    let mut parts = vec![open.to_string()];
                    loop {
                        let Some(next) = lines.get(i) else {
                            return Err(err(lineno, format!("{word}: the \"\"\" opened here is never closed")));
                        };
                        i += 1;
                        if let Some(end) = next.find("\"\"\"") {
                            parts.push(next[..end].to_string());
                            if !next[end + 3..].trim().is_empty() {
                                return Err(err(i, "text after the closing \"\"\"".into()));
                            }
                            break;
                        }
                        parts.push(next.to_string());
                    }
                    let joined = parts.join("\n");
                    joined.strip_prefix('\n').unwrap_or(&joined).to_string()
                }
            } else {
                crate::local::unquote(rest)
            };
            match word.to_ascii_uppercase().as_str() {
                "FROM" => {
                    if value.is_empty() {
                        return Err(err(lineno, "FROM needs a model name or a GGUF path".into()));
                    }
                    if from.is_some() {
                        return Err(err(lineno, "a second FROM; a model has one base".into()));
                    }
                    from = Some(value);
                }
                "SYSTEM" => out.defaults.system = Some(value),
                "TEMPLATE" => out.defaults.template = Some(value),
                "PARAMETER" => {
                    let (name, v) = rest.split_once(char::is_whitespace).ok_or_else(|| err(lineno, "PARAMETER takes a name and a value".into()))?;
                    out.defaults.parameters.set(&name.to_ascii_lowercase(), v).map_err(|m| err(lineno, m))?;
                }
                other => {
                    return Err(err(
                        lineno,
                        format!("formwork does not support the instruction `{other}`; it reads FROM, SYSTEM, TEMPLATE and PARAMETER"),
                    ))
                }
            }
        }
        out.from = from.ok_or_else(|| err(1, "no FROM line: a Modelfile starts with `FROM <model name or GGUF path>`".into()))?;
        Ok(out)
    }

    /// The Modelfile text of a model built `from` with `defaults` (what `show` prints).
    pub fn render(from: &str, defaults: &Defaults) -> String {
        let mut s = format!("FROM {from}\n");
        if let Some(t) = &defaults.template {
            s.push_str(&format!("TEMPLATE \"\"\"{t}\"\"\"\n"));
        }
        if let Some(sys) = &defaults.system {
            s.push_str(&format!("SYSTEM \"\"\"{sys}\"\"\"\n"));
        }
        for (k, v) in defaults.parameters.lines() {
            s.push_str(&format!("PARAMETER {k} {v}\n"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_subset() {
        let text = "# a comment\nFROM llama3.2:1b\nSYSTEM \"\"\"You are a pirate.\nAnswer in one line.\n\"\"\"\nparameter temperature 0.3\nPARAMETER stop \"<|end|>\"\nPARAMETER stop END\nTEMPLATE {{ .Prompt }}\n";
        let m = Modelfile::parse(text).unwrap();
        assert_eq!(m.from, "llama3.2:1b");
        assert_eq!(m.defaults.system.as_deref(), Some("You are a pirate.\nAnswer in one line.\n"));
        assert_eq!(m.defaults.template.as_deref(), Some("{{ .Prompt }}"));
        assert_eq!(m.defaults.parameters.temperature, Some(0.3));
        assert_eq!(m.defaults.parameters.stop, ["<|end|>", "END"]);
        let again = Modelfile::parse(&Modelfile::render(&m.from, &m.defaults)).unwrap();
        assert_eq!(again, m, "render and parse round trip");

        let one = Modelfile::parse("FROM ./m.gguf\nSYSTEM \"\"\"Short.\"\"\"\nSYSTEM \"quoted\"").unwrap();
        assert_eq!((one.from.as_str(), one.defaults.system.as_deref()), ("./m.gguf", Some("quoted")));
    }

    #[test]
    fn refuses_what_it_does_not_understand_with_the_line() {
        let cases = [
            ("FROM x\nADAPTER ./lora.gguf", 2, "`ADAPTER`"),
            ("FROM x\n\nMESSAGE user hi", 3, "`MESSAGE`"),
            ("SYSTEM hi", 1, "no FROM"),
            ("FROM x\nFROM y", 2, "second FROM"),
            ("FROM x\nPARAMETER mirostat 2", 2, "unknown parameter `mirostat`"),
            ("FROM x\nPARAMETER temperature hot", 2, "a number"),
            ("FROM x\nPARAMETER temperature", 2, "a name and a value"),
            ("FROM x\nSYSTEM \"\"\"never\nclosed", 2, "never closed"),
            ("FROM", 1, "FROM needs"),
        ];
        for (text, line, words) in cases {
            match Modelfile::parse(text).unwrap_err() {
                ModelsError::Modelfile { line: l, message } => {
                    assert_eq!(l, line, "{text:?}: {message}");
                    assert!(message.contains(words), "{text:?}: {message}");
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(Modelfile::parse(&"#".repeat(MAX_MODELFILE_BYTES + 1)).is_err());
    }
}
