//! What a model can be asked for, for `/api/show`'s `capabilities`.
//!
//! Tools reach a model in one of two ways: its chat template shows them
//! ([`template_shows_tools`]), or, when it cannot, the engine writes them into the system
//! prompt ([`formwork_engine::tool_prompt`]). Either way the reply is constrained to text or
//! calls, so every model whose chat template compiles supports tools ([`supports_tools`]).

use formwork_engine::ChatTemplate;

/// Whether the chat template `source` shows the model the tools it is offered (see
/// [`ChatTemplate::shows_tools`]). A template that only names `tools` (to refuse them, say)
/// or fails to render does not count.
pub fn template_shows_tools(source: &str) -> bool {
    ChatTemplate::new(Some(source), None, None).is_ok_and(|t| t.shows_tools())
}

/// Whether a model with chat template `source` (`None`: it has none, and ChatML is used) can
/// be offered tools: its template shows them, or formwork renders them into the system
/// prompt. False only when the template does not compile (no chat works then).
pub fn supports_tools(source: Option<&str>) -> bool {
    ChatTemplate::new(source, None, None).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_shown_or_not() {
        let shows = "{% if tools %}<tools>{{ tools | tojson }}</tools>{% endif %}{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}";
        assert!(template_shows_tools(shows));
        // Mentions `tools` without showing them.
        let refuses = "{% if tools %}{{ raise_exception('tools are not supported') }}{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}";
        assert!(!template_shows_tools(refuses));
        let ignores = "{# no tools here #}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}";
        assert!(!template_shows_tools(ignores));
        assert!(!template_shows_tools("{% for m in messages %}"));
        // Tools are supported on all of them but the broken one: shown, or in the system prompt.
        for t in [shows, refuses, ignores] {
            assert!(supports_tools(Some(t)), "{t}");
        }
        assert!(supports_tools(None));
        assert!(!supports_tools(Some("{% for m in messages %}")));
    }
}
