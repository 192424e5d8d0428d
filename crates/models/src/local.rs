//! What a model found on this machine is: [`LocalModel`], where it came from ([`Source`]),
//! and the defaults it carries ([`Defaults`], [`Parameters`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;
use std::time::SystemTime;

/// Where a model was found. Only [`Source::Formwork`] and [`Source::Alias`] models are
/// formwork's own (it may delete them); the others are read in place, never written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Source {
    /// A GGUF file given by its path.
    File,
    /// A known model pulled into formwork's cache (`$FORMWORK_HOME/models`).
    Formwork,
    /// A local alias (`$FORMWORK_HOME/manifests`): a base model plus defaults.
    Alias,
    /// A model in Ollama's store (`$OLLAMA_MODELS`, else `~/.ollama/models`); owned by Ollama.
    Ollama,
    /// A GGUF file in the Hugging Face cache; owned by the `huggingface_hub` tools.
    HuggingFace,
}

impl Source {
    /// The short word `formwork list` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::File => "file",
            Source::Formwork => "formwork",
            Source::Alias => "alias",
            Source::Ollama => "ollama",
            Source::HuggingFace => "hf",
        }
    }

    /// Whether formwork may delete it (its own cache and aliases only).
    pub fn is_owned(self) -> bool {
        matches!(self, Source::Formwork | Source::Alias)
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Generation settings a model carries (an alias's `PARAMETER` lines, an Ollama model's
/// `params` layer). Each is a default: what a request or a flag says wins.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Parameters {
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Keep the K most likely tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    /// Nucleus sampling threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Minimum probability relative to the most likely token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_p: Option<f32>,
    /// Context length in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_ctx: Option<u32>,
    /// Most tokens to generate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_predict: Option<u32>,
    /// Penalty for recently generated tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat_penalty: Option<f32>,
    /// How many recent tokens the repeat penalty looks at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat_last_n: Option<u32>,
    /// Random seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Stop strings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
}

/// The parameter names [`Parameters::set`] takes, for error messages.
pub const PARAMETER_NAMES: &str = "temperature, top_k, top_p, min_p, num_ctx, num_predict, repeat_penalty, repeat_last_n, seed, stop";

impl Parameters {
    /// Whether no parameter is set.
    pub fn is_empty(&self) -> bool {
        *self == Parameters::default()
    }

    /// Sets `name` from its text form (a Modelfile `PARAMETER name value`); `stop` adds
    /// one stop string. The error says what is wrong.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        fn num<T: std::str::FromStr>(name: &str, v: &str, what: &str) -> Result<T, String> {
            v.parse::<T>().map_err(|_| format!("{name} takes {what}, not {v:?}"))
        }
        let v = value.trim();
        match name {
            "temperature" => self.temperature = Some(num(name, v, "a number")?),
            "top_k" => self.top_k = Some(num(name, v, "a whole number")?),
            "top_p" => self.top_p = Some(num(name, v, "a number")?),
            "min_p" => self.min_p = Some(num(name, v, "a number")?),
            "num_ctx" => self.num_ctx = Some(num(name, v, "a whole number")?),
            "num_predict" => self.num_predict = Some(num(name, v, "a whole number")?),
            "repeat_penalty" => self.repeat_penalty = Some(num(name, v, "a number")?),
            "repeat_last_n" => self.repeat_last_n = Some(num(name, v, "a whole number")?),
            "seed" => self.seed = Some(num(name, v, "a whole number")?),
            "stop" => {
                let s = unquote(v);
                if s.is_empty() {
                    return Err("stop takes a non-empty string".into());
                }
                self.stop.push(s);
            }
            _ => return Err(format!("unknown parameter `{name}`; formwork knows {PARAMETER_NAMES}")),
        }
        Ok(())
    }

    /// Sets parameters from a JSON object (an API request's `parameters`): every key must be
    /// one of [`PARAMETER_NAMES`] with a value of its type; `stop` is a string or a list.
    pub fn from_json(v: &Value) -> Result<Parameters, String> {
        let Value::Object(map) = v else { return Err("parameters must be a JSON object".into()) };
        let mut p = Parameters::default();
        for (k, v) in map {
            match (k.as_str(), v) {
                ("stop", Value::Array(items)) => {
                    for s in items {
                        let s = s.as_str().ok_or("stop takes strings")?;
                        p.set("stop", &serde_json::to_string(s).unwrap_or_default())?;
                    }
                }
                ("stop", Value::String(s)) => p.set("stop", &serde_json::to_string(s).unwrap_or_default())?,
                (_, Value::Number(n)) => p.set(k, &n.to_string())?,
                (_, other) => {
                    // Names are checked first, so an unknown one is reported as such.
                    p.set(k, "0")?;
                    return Err(format!("parameter {k} takes a number, not {other}"));
                }
            }
        }
        Ok(p)
    }

    /// The known keys of an Ollama `params` layer; anything else (Ollama-only options, a
    /// negative `num_predict`) is skipped, not refused: the layer is Ollama's, not ours.
    pub fn from_ollama_json(v: &Value) -> Parameters {
        let mut p = Parameters::default();
        let Value::Object(map) = v else { return p };
        for (k, v) in map {
            match v {
                Value::Array(items) if k == "stop" => p.stop.extend(items.iter().filter_map(|s| s.as_str().map(str::to_string))),
                Value::String(s) if k == "stop" => p.stop.push(s.clone()),
                Value::Number(n) => {
                    let _ = p.set(k, &n.to_string());
                }
                _ => {}
            }
        }
        p
    }

    /// `self` with every unset field taken from `base` (`self` wins; stop strings too: a
    /// non-empty list replaces the base's).
    pub fn or(&self, base: &Parameters) -> Parameters {
        Parameters {
            temperature: self.temperature.or(base.temperature),
            top_k: self.top_k.or(base.top_k),
            top_p: self.top_p.or(base.top_p),
            min_p: self.min_p.or(base.min_p),
            num_ctx: self.num_ctx.or(base.num_ctx),
            num_predict: self.num_predict.or(base.num_predict),
            repeat_penalty: self.repeat_penalty.or(base.repeat_penalty),
            repeat_last_n: self.repeat_last_n.or(base.repeat_last_n),
            seed: self.seed.or(base.seed),
            stop: if self.stop.is_empty() { base.stop.clone() } else { self.stop.clone() },
        }
    }

    /// One `name value` pair per line, as Ollama's `/api/show` `parameters` and a Modelfile's
    /// `PARAMETER` lines write them.
    pub fn lines(&self) -> Vec<(&'static str, String)> {
        let mut out: Vec<(&'static str, String)> = Vec::new();
        let mut put = |k: &'static str, v: Option<String>| {
            if let Some(v) = v {
                out.push((k, v));
            }
        };
        put("temperature", self.temperature.map(|x| x.to_string()));
        put("top_k", self.top_k.map(|x| x.to_string()));
        put("top_p", self.top_p.map(|x| x.to_string()));
        put("min_p", self.min_p.map(|x| x.to_string()));
        put("num_ctx", self.num_ctx.map(|x| x.to_string()));
        put("num_predict", self.num_predict.map(|x| x.to_string()));
        put("repeat_penalty", self.repeat_penalty.map(|x| x.to_string()));
        put("repeat_last_n", self.repeat_last_n.map(|x| x.to_string()));
        put("seed", self.seed.map(|x| x.to_string()));
        for s in &self.stop {
            out.push(("stop", serde_json::to_string(s).unwrap_or_default()));
        }
        out
    }
}

/// A `"quoted"` value unquoted (JSON string escapes), else the text as is.
pub(crate) fn unquote(v: &str) -> String {
    if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
        if let Ok(s) = serde_json::from_str::<String>(v) {
            return s;
        }
        return v[1..v.len() - 1].to_string();
    }
    v.to_string()
}

/// What a model brings besides its weights: a system prompt, a template (shown, not used:
/// formwork renders the GGUF's own chat template) and generation parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Defaults {
    /// The system prompt used when a request has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// A prompt template (kept and shown; formwork uses the model's own chat template).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// Generation parameters.
    #[serde(default, skip_serializing_if = "Parameters::is_empty")]
    pub parameters: Parameters,
}

impl Defaults {
    /// `self` over `base`: each of `self`'s settings wins.
    pub fn or(&self, base: &Defaults) -> Defaults {
        Defaults {
            system: self.system.clone().or_else(|| base.system.clone()),
            template: self.template.clone().or_else(|| base.template.clone()),
            parameters: self.parameters.or(&base.parameters),
        }
    }

    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        self.system.is_none() && self.template.is_none() && self.parameters.is_empty()
    }
}

/// A model found on this machine (by [`crate::Cache::find`] or [`crate::Cache::list`]).
#[derive(Clone, Debug, PartialEq)]
pub struct LocalModel {
    /// The name it is known by (`llama3.2:1b`, `hf.co/org/repo:Q4_K_M`, an alias).
    pub name: String,
    /// Where it was found.
    pub source: Source,
    /// The GGUF file (for an alias: its base model's file). Read in place, never copied.
    pub path: PathBuf,
    /// The file's size in bytes.
    pub size: u64,
    /// When the file (for an alias: its manifest) last changed.
    pub modified: Option<SystemTime>,
    /// What an alias names as its base (a model name or a GGUF path); `None` otherwise.
    pub base: Option<String>,
    /// System prompt, template and parameters (an alias's merged over its base's).
    pub defaults: Defaults,
}

impl LocalModel {
    /// A model that is the file at `path` (size and time from its metadata).
    pub(crate) fn file(name: impl Into<String>, source: Source, path: PathBuf) -> LocalModel {
        let meta = std::fs::metadata(&path).ok();
        LocalModel {
            name: name.into(),
            source,
            size: meta.as_ref().map_or(0, |m| m.len()),
            modified: meta.and_then(|m| m.modified().ok()),
            path,
            base: None,
            defaults: Defaults::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parameters_from_text_and_json() {
        let mut p = Parameters::default();
        p.set("temperature", "0.2").unwrap();
        p.set("stop", "\"<|end|>\"").unwrap();
        p.set("stop", "END").unwrap();
        p.set("num_ctx", "4096").unwrap();
        assert_eq!((p.temperature, p.num_ctx), (Some(0.2), Some(4096)));
        assert_eq!(p.stop, ["<|end|>", "END"]);
        assert!(p.set("top_k", "many").unwrap_err().contains("whole number"));
        assert!(p.set("mirostat", "1").unwrap_err().contains("unknown parameter `mirostat`"));

        let q = Parameters::from_json(&json!({"top_p": 0.5, "stop": ["a", "b"], "seed": 7})).unwrap();
        assert_eq!((q.top_p, q.seed, q.stop.len()), (Some(0.5), Some(7), 2));
        assert!(Parameters::from_json(&json!({"tempo": 1})).unwrap_err().contains("unknown parameter"));
        assert!(Parameters::from_json(&json!({"top_k": "x"})).unwrap_err().contains("takes a number"));
        assert!(Parameters::from_json(&json!([1])).is_err());

        // Ollama's layer: unknown keys and values out of range are skipped.
        let o = Parameters::from_ollama_json(&json!({"stop": ["<|eot_id|>"], "num_predict": -1, "mirostat": 2, "temperature": 0.6}));
        assert_eq!(o.stop, ["<|eot_id|>"]);
        assert_eq!((o.num_predict, o.temperature), (None, Some(0.6)));
    }

    #[test]
    fn defaults_merge_outer_wins() {
        let base = Defaults {
            system: Some("base".into()),
            template: None,
            parameters: Parameters { temperature: Some(0.9), top_k: Some(10), stop: vec!["x".into()], ..Default::default() },
        };
        let outer = Defaults { system: None, template: Some("t".into()), parameters: Parameters { temperature: Some(0.1), ..Default::default() } };
        let m = outer.or(&base);
        assert_eq!(m.system.as_deref(), Some("base"));
        assert_eq!(m.template.as_deref(), Some("t"));
        assert_eq!((m.parameters.temperature, m.parameters.top_k), (Some(0.1), Some(10)));
        assert_eq!(m.parameters.stop, ["x"]);
        assert_eq!(m.parameters.lines().iter().map(|(k, _)| *k).collect::<Vec<_>>(), ["temperature", "top_k", "stop"]);
    }
}
