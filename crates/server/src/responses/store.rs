//! The responses `/v1/responses` keeps, for `previous_response_id` and
//! `GET /v1/responses/{id}`: in memory, for the server's lifetime, bounded by a count and a
//! byte total (oldest forgotten first).
//!
//! Each entry holds the response object and the whole conversation up to and including its
//! output, so continuing from it costs one lookup and a copy of its turns, never a walk back
//! through earlier responses.

use crate::backend::ChatMessage;
use crate::wire::responses::Response;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// A conversation as the next request continues it: its turns (without `instructions`,
/// which OpenAI does not carry over) and the function of every call id seen in it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Conversation {
    /// The turns, in order.
    pub turns: Vec<ChatMessage>,
    /// `(call_id, function name)` of each call made, for `function_call_output` items.
    pub call_names: Vec<(String, String)>,
}

impl Conversation {
    /// Bytes of text held (roughly), for the store's bound.
    fn bytes(&self) -> usize {
        let turn = |t: &ChatMessage| t.content.len() + t.tool_calls.iter().map(|c| c.function.name.len() + c.function.arguments.to_string().len()).sum::<usize>() + 32;
        self.turns.iter().map(turn).sum::<usize>() + self.call_names.iter().map(|(a, b)| a.len() + b.len()).sum::<usize>()
    }
}

/// One kept response.
#[derive(Clone, Debug)]
pub struct Stored {
    /// The response object, as returned.
    pub response: Response,
    /// The conversation through this response's output.
    pub conversation: Conversation,
}

/// The bounded store; see the module docs.
pub struct Store {
    max_entries: usize,
    max_bytes: usize,
    inner: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    /// Ids, oldest first.
    order: VecDeque<String>,
    /// Each entry and its size in bytes.
    map: HashMap<String, (Arc<Stored>, usize)>,
    bytes: usize,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.inner.lock().map(|e| e.map.len()).unwrap_or(0);
        f.debug_struct("Store").field("entries", &n).field("max_entries", &self.max_entries).finish()
    }
}

impl Store {
    /// A store keeping at most `max_entries` responses and about `max_bytes` bytes.
    pub fn new(max_entries: usize, max_bytes: usize) -> Self {
        Store { max_entries, max_bytes, inner: Mutex::new(Entries::default()) }
    }

    /// Keeps `stored` under its response's id, forgetting the oldest entries past the bounds
    /// (an entry larger than the whole byte bound is not kept).
    pub fn put(&self, stored: Stored) {
        let size = stored.conversation.bytes() + serde_json::to_vec(&stored.response).map(|v| v.len()).unwrap_or(0);
        if self.max_entries == 0 || size > self.max_bytes {
            return;
        }
        let id = stored.response.id.clone();
        let mut e = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, old)) = e.map.remove(&id) {
            e.bytes -= old;
            e.order.retain(|x| x != &id);
        }
        while e.map.len() >= self.max_entries || e.bytes + size > self.max_bytes {
            let Some(oldest) = e.order.pop_front() else { break };
            if let Some((_, n)) = e.map.remove(&oldest) {
                e.bytes -= n;
            }
        }
        e.order.push_back(id.clone());
        e.map.insert(id, (Arc::new(stored), size));
        e.bytes += size;
    }

    /// The response kept under `id`.
    pub fn get(&self, id: &str) -> Option<Arc<Stored>> {
        let e = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        e.map.get(id).map(|(s, _)| s.clone())
    }

    /// Forgets `id`; whether it was kept.
    pub fn remove(&self, id: &str) -> bool {
        let mut e = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match e.map.remove(id) {
            Some((_, n)) => {
                e.bytes -= n;
                e.order.retain(|x| x != id);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::responses::{TextConfig, ToolChoice};

    fn stored(id: &str, text: &str) -> Stored {
        let response = Response {
            id: id.into(),
            object: "response".into(),
            created_at: 0,
            status: "completed".into(),
            error: None,
            incomplete_details: None,
            instructions: None,
            max_output_tokens: None,
            model: "m".into(),
            output: vec![],
            parallel_tool_calls: true,
            previous_response_id: None,
            reasoning: None,
            store: true,
            temperature: None,
            text: TextConfig::default(),
            tool_choice: ToolChoice::Mode("auto".into()),
            tools: vec![],
            top_p: None,
            truncation: "disabled".into(),
            usage: None,
            user: None,
            metadata: serde_json::json!({}),
        };
        let turn = ChatMessage { role: "user".into(), content: text.into(), ..Default::default() };
        Stored { response, conversation: Conversation { turns: vec![turn], call_names: vec![] } }
    }

    #[test]
    fn oldest_go_first_past_the_count() {
        let s = Store::new(2, 1 << 20);
        for id in ["a", "b", "c"] {
            s.put(stored(id, "x"));
        }
        assert!(s.get("a").is_none());
        assert!(s.get("b").is_some() && s.get("c").is_some());
        assert!(s.remove("b"));
        assert!(!s.remove("b"));
    }

    #[test]
    fn bytes_are_bounded() {
        let s = Store::new(100, 2000);
        s.put(stored("a", &"x".repeat(900)));
        s.put(stored("b", &"y".repeat(900)));
        assert!(s.get("a").is_none(), "the oldest makes room");
        assert!(s.get("b").is_some());
        s.put(stored("huge", &"z".repeat(5000)));
        assert!(s.get("huge").is_none() && s.get("b").is_some(), "too large to keep; nothing else dropped");
    }
}
