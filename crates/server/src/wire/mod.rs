//! Request and response types of the two APIs, as the official clients send and read them.
//! Unknown request fields are ignored (clients add fields over time); absent optional
//! response fields are omitted, as the real services do.

pub mod ollama;
pub mod openai;
pub mod responses;
