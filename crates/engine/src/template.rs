//! Chat templates: a model's Jinja template (from its GGUF metadata) rendered with
//! `minijinja`, the way HuggingFace's `apply_chat_template` renders it.
//!
//! What real templates need and this module provides:
//! - the variables `messages`, `add_generation_prompt`, `bos_token`, `eos_token`, `tools`
//!   (only when given: templates test `tools is defined` / `tools is not none`), `date_string`;
//! - `trim_blocks` and `lstrip_blocks` on, as in HuggingFace's renderer;
//! - Python string methods (`.strip()`, `.startswith()`, `.split()`, `.items()`, ...)
//!   through `minijinja-contrib`'s pycompat layer, `tojson`, loop controls;
//! - `raise_exception(msg)`, which fails rendering with [`TemplateError::Raised`];
//! - `strftime_now(fmt)` (Llama 3.x templates put today's date in the system prompt).
//!
//! A model without a template gets ChatML ([`CHATML_TEMPLATE`]), with a `tracing` warning.
//!
//! Tools: a template that shows the `tools` it is given ([`ChatTemplate::shows_tools`]) gets
//! them as they are. One that does not (SmolLM2's, ChatML) would silently drop them, so
//! [`ChatTemplate::render`] writes them into the system message instead, in the format
//! documented in [`crate::tool_prompt`], and renders the chat without `tools`.

use crate::chat::ChatMessage;
use minijinja::{Environment, ErrorKind, Value};
use std::sync::OnceLock;

/// The ChatML template used when a model has none:
/// `<|im_start|>{role}\n{content}<|im_end|>\n` per message, then `<|im_start|>assistant\n`.
pub const CHATML_TEMPLATE: &str = "{% for message in messages %}\
{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}\
{% endfor %}\
{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

const TEMPLATE_NAME: &str = "chat";

/// The name of the function [`ChatTemplate::shows_tools`] offers: no template mentions it.
const PROBE: &str = "formwork_probe_function";

/// Errors from compiling or rendering a chat template.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// The template text is not valid Jinja (as far as minijinja understands it).
    #[error("the model's chat template does not compile: {0}; pass a raw prompt or override the template")]
    Syntax(String),
    /// The template called `raise_exception(...)`: it rejects these messages (for example
    /// roles not alternating user/assistant). The message is the template's own.
    #[error("the chat template rejected the messages: {0}")]
    Raised(String),
    /// Rendering failed for another reason (an undefined method, a type error, ...).
    #[error("rendering the chat template failed: {0}")]
    Render(String),
}

/// A compiled chat template with its special-token strings.
///
/// Compile once per model ([`ChatTemplate::new`]), render per request ([`ChatTemplate::render`]).
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
    is_fallback: bool,
    /// [`ChatTemplate::shows_tools`], worked out on first use.
    shows_tools: OnceLock<bool>,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("bos_token", &self.bos_token)
            .field("eos_token", &self.eos_token)
            .field("is_fallback", &self.is_fallback)
            .finish_non_exhaustive()
    }
}

impl ChatTemplate {
    /// Compiles `source`, or the ChatML fallback (with a warning) when `source` is `None`
    /// or blank. `bos_token` / `eos_token` are the strings the template sees.
    pub fn new(source: Option<&str>, bos_token: Option<&str>, eos_token: Option<&str>) -> Result<Self, TemplateError> {
        let (source, is_fallback) = match source {
            Some(s) if !s.trim().is_empty() => (s.to_string(), false),
            _ => {
                tracing::warn!("the model has no chat template; using ChatML (<|im_start|>role ... <|im_end|>)");
                (CHATML_TEMPLATE.to_string(), true)
            }
        };
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_template_owned(TEMPLATE_NAME, source).map_err(|e| TemplateError::Syntax(describe(&e)))?;
        Ok(ChatTemplate {
            env,
            bos_token: bos_token.unwrap_or("").to_string(),
            eos_token: eos_token.unwrap_or("").to_string(),
            is_fallback,
            shows_tools: OnceLock::new(),
        })
    }

    /// Whether the template shows the model the tools it is offered: a conversation
    /// rendered with one probe tool mentions that tool. A template that only names `tools`
    /// (to refuse them with `raise_exception`, say) or fails to render with them does not
    /// count. Worked out once per template (one extra rendering).
    pub fn shows_tools(&self) -> bool {
        *self.shows_tools.get_or_init(|| {
            let tools = serde_json::json!([{"type": "function", "function": {"name": PROBE, "description": "A probe.",
                "parameters": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}}}]);
            self.render_as_is(&[ChatMessage::new("user", "Hi")], Some(&tools), true, &serde_json::Map::new())
                .is_ok_and(|p| p.contains(PROBE))
        })
    }

    /// True when the model had no template and ChatML is used.
    pub fn is_fallback(&self) -> bool {
        self.is_fallback
    }

    /// The BOS string the template sees (empty when the model has none).
    pub fn bos_token(&self) -> &str {
        &self.bos_token
    }

    /// Renders `messages` (and `tools`, a JSON array of tool definitions, when given).
    /// `add_generation_prompt` appends the header that starts the assistant's turn.
    ///
    /// When the template does not show tools ([`ChatTemplate::shows_tools`]), the tool
    /// definitions are written into the system message ([`crate::tool_prompt`]) and the
    /// template renders the chat without `tools`.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
    ) -> Result<String, TemplateError> {
        self.render_with(messages, tools, add_generation_prompt, &serde_json::Map::new())
    }

    /// [`ChatTemplate::render`] with extra template variables, for the switches some
    /// templates read (Qwen3's `enable_thinking`, gpt-oss's `reasoning_effort`). A variable
    /// named like a standard one (`messages`, `bos_token`, ...) is ignored.
    pub fn render_with(
        &self,
        messages: &[ChatMessage],
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
        vars: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<String, TemplateError> {
        if let Some(t) = tools {
            if !self.shows_tools() {
                if let Some(with_tools) = crate::tool_prompt::messages_with_tools(messages, t) {
                    return self.render_as_is(&with_tools, None, add_generation_prompt, vars);
                }
            }
        }
        self.render_as_is(messages, tools, add_generation_prompt, vars)
    }

    /// Renders with exactly these variables: no tool fallback.
    fn render_as_is(
        &self,
        messages: &[ChatMessage],
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
        vars: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<String, TemplateError> {
        let tmpl = self.env.get_template(TEMPLATE_NAME).map_err(|e| TemplateError::Syntax(describe(&e)))?;
        let mut ctx = serde_json::Map::new();
        ctx.insert("messages".into(), serde_json::to_value(messages).map_err(|e| TemplateError::Render(e.to_string()))?);
        ctx.insert("add_generation_prompt".into(), add_generation_prompt.into());
        ctx.insert("bos_token".into(), self.bos_token.clone().into());
        ctx.insert("eos_token".into(), self.eos_token.clone().into());
        ctx.insert("date_string".into(), format_date("%d %b %Y").into());
        if let Some(t) = tools {
            ctx.insert("tools".into(), t.clone());
        }
        for (k, v) in vars {
            ctx.entry(k.clone()).or_insert_with(|| v.clone());
        }
        tmpl.render(Value::from_serialize(&ctx)).map_err(|e| {
            if let Some(msg) = raised_message(&e) {
                TemplateError::Raised(msg)
            } else {
                TemplateError::Render(describe(&e))
            }
        })
    }
}

/// Prefix that marks errors produced by `raise_exception`, so `render` can tell them apart.
const RAISED: &str = "raise_exception: ";

fn raise_exception(msg: String) -> Result<Value, minijinja::Error> {
    Err(minijinja::Error::new(ErrorKind::InvalidOperation, format!("{RAISED}{msg}")))
}

fn raised_message(e: &minijinja::Error) -> Option<String> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(mj) = err.downcast_ref::<minijinja::Error>() {
            if let Some(d) = mj.detail() {
                if let Some(rest) = d.strip_prefix(RAISED) {
                    return Some(rest.to_string());
                }
            }
        }
        cur = err.source();
    }
    None
}

fn describe(e: &minijinja::Error) -> String {
    let mut s = e.to_string();
    if let Some(line) = e.line() {
        if !s.contains("line") {
            s.push_str(&format!(" (line {line})"));
        }
    }
    s
}

fn strftime_now(fmt: String) -> Value {
    Value::from(format_date(&fmt))
}

/// Today's date (UTC) formatted with a small strftime subset:
/// `%d %e %m %y %Y %b %B %a %A %H %M %S %j %%`; other directives are left as written.
fn format_date(fmt: &str) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    format_unix(secs, fmt)
}

fn format_unix(secs: i64, fmt: &str) -> String {
    const MONTHS: [&str; 12] = [
        "January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November",
        "December",
    ];
    const DAYS: [&str; 7] = ["Thursday", "Friday", "Saturday", "Sunday", "Monday", "Tuesday", "Wednesday"];
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let weekday = DAYS[days.rem_euclid(7) as usize];
    let month = MONTHS[(m - 1) as usize];
    let yday = days - days_from_civil(y, 1, 1) + 1;
    let mut out = String::new();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('e') => out.push_str(&format!("{d:>2}")),
            Some('m') => out.push_str(&format!("{m:02}")),
            Some('y') => out.push_str(&format!("{:02}", y.rem_euclid(100))),
            Some('Y') => out.push_str(&y.to_string()),
            Some('b') => out.push_str(&month[..3]),
            Some('B') => out.push_str(month),
            Some('a') => out.push_str(&weekday[..3]),
            Some('A') => out.push_str(weekday),
            Some('H') => out.push_str(&format!("{:02}", sod / 3600)),
            Some('M') => out.push_str(&format!("{:02}", sod / 60 % 60)),
            Some('S') => out.push_str(&format!("{:02}", sod % 60)),
            Some('j') => out.push_str(&format!("{yday:03}")),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Days since 1970-01-01 → (year, month 1..=12, day 1..=31), proleptic Gregorian.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: &str, content: &str) -> ChatMessage {
        ChatMessage::new(role, content)
    }

    const SMOLLM2: &str = include_str!("../tests/fixtures/smollm2.jinja");
    const LLAMA3: &str = include_str!("../tests/fixtures/llama3.jinja");

    #[test]
    fn smollm2_adds_default_system_prompt() {
        let t = ChatTemplate::new(Some(SMOLLM2), Some("<|im_start|>"), Some("<|im_end|>")).unwrap();
        let out = t.render(&[msg("user", "Hi")], None, true).unwrap();
        assert_eq!(
            out,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n\
             <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        let out = t.render(&[msg("system", "Be terse."), msg("user", "Hi")], None, false).unwrap();
        assert_eq!(out, "<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
    }

    #[test]
    fn llama3_style_template_uses_string_methods_and_tools() {
        let t = ChatTemplate::new(Some(LLAMA3), Some("<|begin_of_text|>"), Some("<|eot_id|>")).unwrap();
        let out = t.render(&[msg("system", "  Be brief.  "), msg("user", " Hello ")], None, true).unwrap();
        assert!(out.starts_with("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"), "{out}");
        assert!(out.contains("Be brief.<|eot_id|>"), "strip() applied: {out}");
        assert!(out.contains("Today Date: "), "{out}");
        assert!(out.contains("<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"), "{out}");
        assert!(out.ends_with("<|start_header_id|>assistant<|end_header_id|>\n\n"), "{out}");
        assert!(!out.contains("Tools:"), "{out}");

        let tools = serde_json::json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]);
        let out = t.render(&[msg("user", "Weather?")], Some(&tools), true).unwrap();
        assert!(out.contains("Tools:\n{\"function\":{\"name\":\"get_weather\""), "{out}");
    }

    #[test]
    fn tools_go_into_the_system_prompt_when_the_template_cannot_show_them() {
        let tools = serde_json::json!([{"type": "function", "function": {"name": "get_weather",
            "description": "Weather in a city.", "parameters": {"type": "object"}}}]);
        let t = ChatTemplate::new(Some(SMOLLM2), Some("<|im_start|>"), Some("<|im_end|>")).unwrap();
        assert!(!t.shows_tools());
        let out = t.render(&[msg("user", "Hi")], Some(&tools), true).unwrap();
        let expected_system = format!("<|im_start|>system\n{}<|im_end|>\n", crate::tool_prompt::tools_instruction(&tools).unwrap());
        assert!(out.starts_with(&expected_system), "{out}");
        assert!(out.contains("### get_weather\nWeather in a city.\nParameters (JSON Schema): {\"type\":\"object\"}"), "{out}");
        assert!(out.ends_with("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"), "{out}");
        // ChatML (no template) too; a template that shows tools gets them as they are.
        let chatml = ChatTemplate::new(None, None, None).unwrap();
        assert!(chatml.render(&[msg("user", "Hi")], Some(&tools), true).unwrap().contains("### get_weather"));
        let llama = ChatTemplate::new(Some(LLAMA3), None, None).unwrap();
        assert!(llama.shows_tools());
        assert!(!llama.render(&[msg("user", "Hi")], Some(&tools), true).unwrap().contains("### get_weather"));
        // A template that refuses tools renders with them in the system prompt.
        let refuses = "{% if tools %}{{ raise_exception('no tools') }}{% endif %}{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}";
        let out = ChatTemplate::new(Some(refuses), None, None).unwrap().render(&[msg("user", "Hi")], Some(&tools), true).unwrap();
        assert!(out.starts_with("system:You can call these functions:"), "{out}");
    }

    #[test]
    fn raise_exception_becomes_a_typed_error() {
        let t = ChatTemplate::new(Some(LLAMA3), None, None).unwrap();
        let err = t.render(&[msg("user", "a"), msg("user", "b")], None, true).unwrap_err();
        match err {
            TemplateError::Raised(m) => assert_eq!(m, "Conversation roles must alternate user/assistant"),
            other => panic!("expected Raised, got {other:?}"),
        }
    }

    #[test]
    fn missing_template_falls_back_to_chatml() {
        let t = ChatTemplate::new(None, None, None).unwrap();
        assert!(t.is_fallback());
        let out = t.render(&[msg("user", "Hi")], None, true).unwrap();
        assert_eq!(out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    }

    #[test]
    fn syntax_errors_are_reported() {
        let err = ChatTemplate::new(Some("{% for m in messages %}"), None, None).unwrap_err();
        assert!(matches!(err, TemplateError::Syntax(_)), "{err:?}");
        assert!(err.to_string().contains("does not compile"), "{err}");
    }

    #[test]
    fn message_fields_reach_the_template() {
        let src = "{% for m in messages %}{{ m.role }}|{% if m.tool_calls %}{% for c in m.tool_calls %}\
{{ c.function.name }}({{ c.function.arguments | tojson }}){% endfor %}{% endif %}\
{% if m.thinking %}[{{ m.thinking }}]{% endif %}{{ m.content.split(' ') | join('_') }};{% endfor %}";
        let t = ChatTemplate::new(Some(src), None, None).unwrap();
        let mut m = msg("assistant", "a b c");
        m.thinking = Some("hmm".into());
        m.tool_calls = vec![crate::ToolCall::new("f", serde_json::json!({"x": 1}))];
        let out = t.render(&[m], None, false).unwrap();
        assert_eq!(out, "assistant|f({\"x\":1})[hmm]a_b_c;");
    }

    #[test]
    fn extra_variables_reach_the_template_but_do_not_override_standard_ones() {
        let src = "{% if enable_thinking is defined and not enable_thinking %}off{% else %}on{% endif %}|{{ messages | length }}";
        let t = ChatTemplate::new(Some(src), None, None).unwrap();
        assert_eq!(t.render(&[msg("user", "a")], None, true).unwrap(), "on|1");
        let mut vars = serde_json::Map::new();
        vars.insert("enable_thinking".into(), false.into());
        vars.insert("messages".into(), serde_json::json!([]));
        assert_eq!(t.render_with(&[msg("user", "a")], None, true, &vars).unwrap(), "off|1");
    }

    #[test]
    fn dates() {
        // 2024-02-29 12:34:56 UTC (a Thursday), and the epoch.
        assert_eq!(format_unix(1_709_210_096, "%d %b %Y %A %H:%M:%S %j"), "29 Feb 2024 Thursday 12:34:56 060");
        assert_eq!(format_unix(0, "%Y-%m-%d %a %%"), "1970-01-01 Thu %");
    }
}
