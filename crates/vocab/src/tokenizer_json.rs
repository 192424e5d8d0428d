//! Reading a HuggingFace `tokenizer.json` into a [`crate::Vocabulary`].
