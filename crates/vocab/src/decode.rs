//! Token-string conventions shared by the GGUF and tokenizer.json readers.
//!
//! - Byte-level BPE (GPT-2 style) spells every byte as a printable character: bytes
//!   `!`..=`~`, `¡`..=`¬` and `®`..=`ÿ` stand for themselves, and the other 68 bytes (controls,
//!   space, DEL, NBSP, soft hyphen) are shifted to U+0100.. in increasing byte order
//!   (so a leading space is `Ġ` = U+0120). [`byte_level_to_bytes`] inverts that.
//! - SentencePiece spells a space as `▁` (U+2581) and byte-fallback tokens as `<0xXX>`.

/// Bytes that byte-level BPE does not spell as themselves, in the order they are shifted to
/// U+0100, U+0101, ...
fn shifted_bytes() -> impl Iterator<Item = u8> {
    (0u8..=255).filter(|&b| !is_printable_self(b))
}

fn is_printable_self(b: u8) -> bool {
    matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF)
}

/// The byte a byte-level BPE character stands for, if it is one of the 256.
pub(crate) fn byte_level_char_to_byte(c: char) -> Option<u8> {
    let u = c as u32;
    if u < 256 && is_printable_self(u as u8) {
        return Some(u as u8);
    }
    if (256..256 + 68).contains(&u) {
        return shifted_bytes().nth((u - 256) as usize);
    }
    None
}

/// The character byte-level BPE spells byte `b` as.
#[cfg(test)]
pub(crate) fn byte_to_byte_level_char(b: u8) -> char {
    if is_printable_self(b) {
        return b as char;
    }
    let n = shifted_bytes().position(|x| x == b).expect("every non-printable byte is shifted");
    char::from_u32(256 + n as u32).expect("U+0100..U+0143 are chars")
}

/// Decodes a byte-level BPE token string to its bytes. Characters outside the table (which a
/// well-formed byte-level vocabulary never has in normal tokens) are kept as their UTF-8.
pub(crate) fn byte_level_to_bytes(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut buf = [0u8; 4];
    for c in s.chars() {
        match byte_level_char_to_byte(c) {
            Some(b) => out.push(b),
            None => out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes()),
        }
    }
    out
}

/// Decodes a SentencePiece piece: `▁` becomes a space.
pub(crate) fn sentencepiece_to_bytes(s: &str) -> Vec<u8> {
    s.replace('\u{2581}', " ").into_bytes()
}

/// Parses a SentencePiece byte-fallback token `<0xXX>`.
pub(crate) fn parse_byte_token(s: &str) -> Option<u8> {
    let hex = s.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// Names of control tokens that end a turn or the text, in order of preference (chat
/// end-of-turn markers before end-of-text markers).
pub(crate) const END_OF_TURN_NAMES: &[&str] = &[
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "</s>",
    "<eos>",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_level_table_is_a_bijection() {
        let mut seen = std::collections::HashSet::new();
        for b in 0u8..=255 {
            let c = byte_to_byte_level_char(b);
            assert!(seen.insert(c));
            assert_eq!(byte_level_char_to_byte(c), Some(b));
        }
        assert_eq!(byte_to_byte_level_char(b' '), 'Ġ');
        assert_eq!(byte_to_byte_level_char(b'\n'), 'Ċ');
        assert_eq!(byte_to_byte_level_char(b'a'), 'a');
        assert_eq!(byte_level_char_to_byte('β'), None);
        assert_eq!(byte_level_to_bytes("Ġthe"), b" the");
        // "é" is the two bytes C3 A9, spelled "Ã©".
        assert_eq!(byte_level_to_bytes("Ã©"), "é".as_bytes());
    }

    #[test]
    fn sentencepiece_pieces() {
        assert_eq!(sentencepiece_to_bytes("▁the"), b" the");
        assert_eq!(parse_byte_token("<0x0A>"), Some(b'\n'));
        assert_eq!(parse_byte_token("<0xfF>"), Some(0xFF));
        assert_eq!(parse_byte_token("<0x100>"), None);
        assert_eq!(parse_byte_token("<s>"), None);
    }
}
