//! ECMA-262 regular expressions (JSON Schema's `pattern` dialect) rewritten into regex-syntax
//! syntax with the same meaning: `\d` and `\w` are ASCII, `\s` is ECMA's whitespace set, `.`
//! excludes the four line terminators, negated shorthands inside a class are nested classes.
//! A leaf: [`crate::regex`] lowers the result to grammars, and enum values are checked
//! against negated patterns with it.

pub(crate) const ECMA_WS: &str = "\\t\\n\\x0B\\x0C\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}";

/// Rewrites an ECMA-262 pattern into regex-syntax syntax with the same meaning.
pub(crate) fn ecma_to_rust(p: &str) -> Result<String, String> {
    let chars: Vec<char> = p.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    let mut in_class = false;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            let Some(&n) = chars.get(i + 1) else { return Err("trailing backslash".into()) };
            i += 2;
            let rep: String = match (in_class, n) {
                (false, 'd') => "[0-9]".into(),
                (false, 'D') => "[^0-9]".into(),
                (false, 'w') => "[A-Za-z0-9_]".into(),
                (false, 'W') => "[^A-Za-z0-9_]".into(),
                (false, 's') => format!("[{ECMA_WS}]"),
                (false, 'S') => format!("[^{ECMA_WS}]"),
                (true, 'd') => "0-9".into(),
                (true, 'w') => "A-Za-z0-9_".into(),
                (true, 's') => ECMA_WS.into(),
                // A negated shorthand inside a class is a nested class, which regex-syntax
                // unions with the rest (`[a\S]` = `a` or not whitespace; under `[^...]` the
                // union is negated, as in ECMA-262). As a range end it would be an error.
                (true, 'D' | 'W' | 'S') => {
                    let next_is_range = chars.get(i) == Some(&'-') && chars.get(i + 1).is_some_and(|&c| c != ']');
                    let prev_is_range = i >= 3 && chars[i - 3] == '-';
                    if next_is_range || prev_is_range {
                        return Err(format!("`\\{n}` as the end of a range in a character class"));
                    }
                    match n {
                        'D' => "[^0-9]".into(),
                        'W' => "[^A-Za-z0-9_]".into(),
                        _ => format!("[^{ECMA_WS}]"),
                    }
                }
                (_, 'c') => {
                    let Some(&l) = chars.get(i) else { return Err("bad \\c escape".into()) };
                    i += 1;
                    format!("\\x{{{:X}}}", (l as u32) % 32)
                }
                (_, '0') if !chars.get(i).is_some_and(|d| d.is_ascii_digit()) => "\\x00".into(),
                (_, d) if d.is_ascii_digit() => return Err("backreferences are not supported".into()),
                (_, 'k') => return Err("named backreferences are not supported".into()),
                (_, 'u') if chars.get(i) == Some(&'{') => "\\u".into(),
                (_, 'u') => {
                    let hex: String = chars.get(i..i + 4).map(|s| s.iter().collect()).unwrap_or_default();
                    if hex.len() == 4 && hex.chars().all(|h| h.is_ascii_hexdigit()) {
                        i += 4;
                        format!("\\x{{{hex}}}")
                    } else {
                        return Err("bad \\u escape".into());
                    }
                }
                (_, n) if n.is_ascii_alphanumeric() => format!("\\{n}"),
                (_, n) => {
                    let mut s = String::new();
                    regex_syntax::escape_into(&n.to_string(), &mut s);
                    if s.len() == n.len_utf8() && in_class && matches!(n, '-' | '&' | '~' | '[' | ']' | '^') {
                        format!("\\{n}")
                    } else {
                        s
                    }
                }
            };
            out.push_str(&rep);
            continue;
        }
        if in_class {
            match c {
                ']' => {
                    in_class = false;
                    out.push(']');
                }
                '[' | '&' | '~' => {
                    out.push('\\');
                    out.push(c);
                }
                '-' if chars.get(i + 1) == Some(&'-') => out.push_str("\\-"),
                c => out.push(c),
            }
            i += 1;
            continue;
        }
        match c {
            '[' => {
                in_class = true;
                out.push('[');
                i += 1;
                if chars.get(i) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                if chars.get(i) == Some(&']') {
                    return Err("empty character class `[]`".into());
                }
                continue;
            }
            '.' => out.push_str("[^\\n\\r\\x{2028}\\x{2029}]"),
            c => out.push(c),
        }
        i += 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ecma_classes_are_ascii() {
        assert_eq!(ecma_to_rust(r"^\d+$").unwrap(), "^[0-9]+$");
        assert_eq!(ecma_to_rust(r"[\w-]").unwrap(), "[A-Za-z0-9_-]");
        assert!(ecma_to_rust(r"(a)\1").is_err());
        assert_eq!(ecma_to_rust(r"[[]").unwrap(), r"[\[]");
        // Negated shorthands inside a class: nested classes, unioned (and negated with the
        // class), as ECMA-262 reads them.
        assert_eq!(ecma_to_rust(r"[\S]").unwrap(), format!("[[^{ECMA_WS}]]"));
        for (pat, yes, no) in [
            (r"^[\S]+$", &["ab", "é"][..], &["a b", "\u{FEFF}", "\u{1680}"][..]),
            (r"^[\s\S]$", &["x", " ", "\n"][..], &["", "xy"][..]),
            (r"^[^\S]$", &[" ", "\t", "\u{FEFF}"][..], &["x"][..]),
            (r"^[a\D]$", &["a", "x"][..], &["1"][..]),
            (r"^[^\W]$", &["a", "_", "9"][..], &["-", " "][..]),
        ] {
            let re = regex::Regex::new(&ecma_to_rust(pat).unwrap()).unwrap();
            for y in yes {
                assert!(re.is_match(y), "{pat} should match {y:?}");
            }
            for n in no {
                assert!(!re.is_match(n), "{pat} should not match {n:?}");
            }
        }
        assert!(ecma_to_rust(r"[\S-x]").is_err() && ecma_to_rust(r"[a-\S]").is_err());
        assert!(ecma_to_rust(r"[\S-]").is_ok());
    }
}
