//! The schema in the prompt: the grammar constrains the output, but the model never sees it.
//! Telling the model what is expected (the JSON Schema and a short instruction) lets it plan
//! its answer instead of being steered token by token, which changes what it writes: `formwork
//! bench extract` measures the effect on an extraction set.
//!
//! [`add_schema_instruction`] edits a chat [`Prompt`] in place; raw prompts are left alone
//! (their caller writes every byte the model sees).

use crate::chat::ChatMessage;
use crate::generate::Prompt;
use serde_json::Value;

/// Where the instruction goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SchemaPlacement {
    /// Appended to the system message (one is added at the start when the chat has none).
    System,
    /// Appended to the last user message (the default: small models follow the latest turn
    /// more closely than the system message).
    #[default]
    User,
}

impl std::str::FromStr for SchemaPlacement {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "system" => Ok(SchemaPlacement::System),
            "user" => Ok(SchemaPlacement::User),
            other => Err(format!("unknown schema placement `{other}`: use `system` or `user`")),
        }
    }
}

/// The instruction text: `schema` `None` means "any JSON object" (`format: json`).
///
/// Annotation-only keywords are kept (titles and descriptions tell the model what a field
/// means); the schema is printed compactly to spend few prompt tokens.
pub fn schema_instruction(schema: Option<&Value>) -> String {
    match schema {
        None => "Reply with a JSON object only, without any other text.".to_string(),
        Some(s) => format!(
            "Reply with JSON only, without any other text. The JSON must match this JSON Schema:\n{}",
            serde_json::to_string(s).unwrap_or_default()
        ),
    }
}

/// A plain-language alternative to [`schema_instruction`] for object schemas: the keys with
/// their types, enums and descriptions, one per line (small models copy a raw schema into
/// their answers more often than they follow it). `None` when the schema is not an object
/// schema with `properties`.
pub fn fields_instruction(schema: &Value) -> Option<String> {
    let props = schema.get("properties")?.as_object()?;
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let mut out = String::from("Reply with a JSON object only, without any other text. Its keys:");
    for (k, v) in props {
        out.push_str(&format!("\n- \"{k}\": {}", describe(v)));
        if !required.contains(&k.as_str()) {
            out.push_str(" (optional)");
        }
        if let Some(d) = v.get("description").and_then(Value::as_str) {
            out.push_str(&format!(" — {d}"));
        }
    }
    Some(out)
}

fn describe(v: &Value) -> String {
    if let Some(e) = v.get("enum").and_then(Value::as_array) {
        let names: Vec<String> = e.iter().map(Value::to_string).collect();
        return format!("one of {}", names.join(", "));
    }
    match v.get("type").and_then(Value::as_str) {
        Some("array") => match v.get("items") {
            Some(items) => format!("a list of {}", describe(items)),
            None => "a list".into(),
        },
        Some("object") => "an object".into(),
        Some("integer") => "an integer".into(),
        Some("number") => "a number".into(),
        Some("boolean") => "true or false".into(),
        Some("string") => "a string".into(),
        Some(t) => t.to_string(),
        None => "a JSON value".into(),
    }
}

/// The instruction [`add_schema_instruction`] uses: [`fields_instruction`] for object
/// schemas with `properties`, else [`schema_instruction`]. On the default model the key list
/// extracts as many fields as no instruction at all, in fewer tokens, while the raw schema
/// costs accuracy (`formwork bench extract`; figures in the README).
pub fn instruction_for(schema: Option<&Value>) -> String {
    schema.and_then(fields_instruction).unwrap_or_else(|| schema_instruction(schema))
}

/// Adds [`instruction_for`]`(schema)` to a chat prompt at `placement`. Returns `false` (and
/// changes nothing) for raw prompts, or when `User` is asked and the chat has no user message.
pub fn add_schema_instruction(prompt: &mut Prompt, schema: Option<&Value>, placement: SchemaPlacement) -> bool {
    add_instruction(prompt, &instruction_for(schema), placement)
}

/// Adds an instruction `text` to a chat prompt at `placement` (see [`add_schema_instruction`]).
pub fn add_instruction(prompt: &mut Prompt, text: &str, placement: SchemaPlacement) -> bool {
    let Prompt::Chat { messages, .. } = prompt else { return false };
    let text = text.to_string();
    match placement {
        SchemaPlacement::System => {
            match messages.first_mut() {
                Some(m) if m.role == "system" => append(&mut m.content, &text),
                _ => messages.insert(0, ChatMessage::new("system", text)),
            }
            true
        }
        SchemaPlacement::User => match messages.iter_mut().rev().find(|m| m.role == "user") {
            Some(m) => {
                append(&mut m.content, &text);
                true
            }
            None => false,
        },
    }
}

fn append(content: &mut String, text: &str) {
    if !content.trim_end().is_empty() {
        content.truncate(content.trim_end().len());
        content.push_str("\n\n");
    }
    content.push_str(text);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chat(msgs: &[(&str, &str)]) -> Prompt {
        Prompt::Chat { messages: msgs.iter().map(|(r, c)| ChatMessage::new(*r, *c)).collect(), tools: None }
    }

    fn messages(p: &Prompt) -> Vec<(String, String)> {
        match p {
            Prompt::Chat { messages, .. } => messages.iter().map(|m| (m.role.clone(), m.content.clone())).collect(),
            Prompt::Raw(_) => vec![],
        }
    }

    #[test]
    fn user_placement_appends_the_schema_to_the_last_user_message() {
        let schema = json!({"type": "array", "items": {"type": "string"}});
        let mut p = chat(&[("user", "first"), ("assistant", "ok"), ("user", "Who wrote Hamlet?  \n")]);
        assert!(add_schema_instruction(&mut p, Some(&schema), SchemaPlacement::User));
        let m = messages(&p);
        assert_eq!(m[0].1, "first");
        assert!(m[2].1.starts_with("Who wrote Hamlet?\n\nReply with JSON only"), "{}", m[2].1);
        assert!(m[2].1.ends_with(r#"{"type":"array","items":{"type":"string"}}"#), "{}", m[2].1);
        // Object schemas with properties get the key list.
        let obj = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
        assert_eq!(instruction_for(Some(&obj)), fields_instruction(&obj).unwrap());
    }

    #[test]
    fn system_placement_extends_or_adds_a_system_message() {
        let mut p = chat(&[("user", "hi")]);
        assert!(add_schema_instruction(&mut p, None, SchemaPlacement::System));
        assert_eq!(messages(&p)[0], ("system".into(), schema_instruction(None)));
        let mut p = chat(&[("system", "Be brief."), ("user", "hi")]);
        add_schema_instruction(&mut p, None, SchemaPlacement::System);
        assert_eq!(messages(&p)[0].1, format!("Be brief.\n\n{}", schema_instruction(None)));
        assert_eq!(messages(&p).len(), 2);
    }

    #[test]
    fn fields_instruction_lists_keys_types_and_optional_ones() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "description": "full name"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "level": {"enum": ["low", "high"]}}, "required": ["name", "level"]});
        let text = fields_instruction(&schema).unwrap();
        assert!(text.contains("\n- \"name\": a string — full name"), "{text}");
        assert!(text.contains("\n- \"tags\": a list of a string (optional)"), "{text}");
        assert!(text.contains("\n- \"level\": one of \"low\", \"high\""), "{text}");
        assert_eq!(fields_instruction(&json!({"type": "string"})), None);
    }

    #[test]
    fn raw_prompts_and_chats_without_a_user_turn_are_left_alone() {
        let mut raw = Prompt::Raw("text".into());
        assert!(!add_schema_instruction(&mut raw, None, SchemaPlacement::User));
        assert!(matches!(raw, Prompt::Raw(ref t) if t == "text"));
        let mut p = chat(&[("system", "s")]);
        assert!(!add_schema_instruction(&mut p, None, SchemaPlacement::User));
        assert_eq!(messages(&p), vec![("system".to_string(), "s".to_string())]);
        assert_eq!("system".parse::<SchemaPlacement>(), Ok(SchemaPlacement::System));
        assert!("top".parse::<SchemaPlacement>().unwrap_err().contains("`top`"));
    }
}
