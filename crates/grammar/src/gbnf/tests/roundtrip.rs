//! The round-trip property `parse(print(parse(text))) == parse(text)`.
