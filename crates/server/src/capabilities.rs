//! What a model's chat template can show it, for `/api/show`'s `capabilities`.

use formwork_engine::{ChatMessage, ChatTemplate};
use serde_json::json;

/// The name of the function [`template_shows_tools`] offers: no template mentions it.
const PROBE: &str = "formwork_probe_function";

/// Whether the chat template `source` shows the model the tools it is offered: a
/// conversation rendered with one tool mentions that tool. A template that only names
/// `tools` (to refuse them, say) or fails to render does not count.
pub fn template_shows_tools(source: &str) -> bool {
    let Ok(t) = ChatTemplate::new(Some(source), None, None) else { return false };
    let tools = json!([{"type": "function", "function": {"name": PROBE, "description": "A probe.",
        "parameters": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}}}]);
    t.render(&[ChatMessage::new("user", "Hi")], Some(&tools), true).is_ok_and(|p| p.contains(PROBE))
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
    }
}
