//! `format`: each supported format is a strict regular subset of its specification, written
//! as an (ECMA) pattern and compiled like `pattern`. Subsets chosen to be safe:
//! - `date`: February 29 is excluded (leap years are not tracked); months have their days;
//! - `time`/`date-time`: no leap second (`:60`); an offset or `Z` is required;
//! - `email`/`hostname`: ASCII dot-atoms and LDH labels with no `--`, short enough to stay
//!   under the RFC length limits; `idn-*` accept their ASCII subsets;
//! - `ipv6`: full form and `::`-compressed forms at either end; `uri`: scheme, optional
//!   authority with numeric port, path, query and fragment of RFC 3986 characters.
//!
//! Formats outside this list are annotations by default, as JSON Schema requires of formats
//! an implementation does not know: any string is accepted and a `Warning` says so
//! (`SchemaOptions::unknown_formats_as_annotations`; off, they are refused unless lenient).
//! The known ones are asserted unless `SchemaOptions::formats_as_annotations` (in draft
//! 2020-12 `format` is an annotation by default; asserting it only ever narrows what is
//! accepted).

const DEC_OCTET: &str = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
const DATE: &str = "[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))";
const TIME: &str = "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,9})?(?:[zZ]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
const LABEL: &str = "[A-Za-z0-9]{1,20}(?:-[A-Za-z0-9]{1,20}){0,2}";
const PCHAR: &str = "(?:[A-Za-z0-9\\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})";

/// What the compiler does with `format: f` on a string, under `opts`.
pub(crate) enum Treatment {
    /// Asserted: the string must match [`regex_for`].
    Asserted,
    /// Not enforced, with the warning's reason.
    Annotation(String),
    /// Refused (unless lenient), with the reason.
    Refused(String),
}

/// How `format: f` on a string is treated (see the module docs).
pub(crate) fn treatment(f: &str, opts: &crate::SchemaOptions) -> Treatment {
    if opts.formats_as_annotations {
        Treatment::Annotation(format!("format `{f}` treated as an annotation (formats_as_annotations)"))
    } else if regex_for(f).is_some() {
        Treatment::Asserted
    } else if opts.unknown_formats_as_annotations {
        Treatment::Annotation(format!("unknown format `{f}` treated as an annotation"))
    } else {
        Treatment::Refused(format!("format `{f}` is not supported (supported: {})", SUPPORTED.join(", ")))
    }
}

/// Formats with a grammar.
pub(crate) const SUPPORTED: &[&str] = &[
    "date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname", "ipv4", "ipv6", "uuid", "uri",
    "uri-reference", "iri", "iri-reference", "json-pointer", "relative-json-pointer",
];

/// The pattern for a supported format.
pub(crate) fn regex_for(f: &str) -> Option<String> {
    let h4 = "[0-9A-Fa-f]{1,4}";
    let host = format!("{LABEL}(?:\\.{LABEL}){{0,3}}");
    let email = format!("[A-Za-z0-9!#$%&'*+/=?^_`{{|}}~-]{{1,20}}(?:\\.[A-Za-z0-9!#$%&'*+/=?^_`{{|}}~-]{{1,20}}){{0,2}}@{host}");
    let authority = format!("(?:(?:[A-Za-z0-9\\-._~!$&'()*+,;=:]|%[0-9A-Fa-f]{{2}})*@)?(?:[A-Za-z0-9\\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{{2}})*(?::[0-9]{{1,5}})?");
    let tail = format!("(?:\\?(?:{PCHAR}|[/?])*)?(?:#(?:{PCHAR}|[/?])*)?");
    let uri = format!("[A-Za-z][A-Za-z0-9+.\\-]*:(?://{authority}(?:/{PCHAR}*)*|(?:/?{PCHAR}+(?:/{PCHAR}*)*)?){tail}");
    let nocolon = "(?:[A-Za-z0-9\\-._~!$&'()*+,;=@]|%[0-9A-Fa-f]{2})";
    let relref = format!("(?://{authority}(?:/{PCHAR}*)*|/(?:{PCHAR}+(?:/{PCHAR}*)*)?|{nocolon}+(?:/{PCHAR}*)*|){tail}");
    let dur_t = "T(?:[0-9]+H(?:[0-9]+M)?(?:[0-9]+S)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)";
    let s = match f {
        "date" => DATE.to_string(),
        "time" => TIME.to_string(),
        "date-time" => format!("{DATE}[Tt]{TIME}"),
        "duration" => format!("P(?:(?:[0-9]+Y(?:[0-9]+M)?(?:[0-9]+D)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)(?:{dur_t})?|{dur_t}|[0-9]+W)"),
        "email" | "idn-email" => email,
        "hostname" | "idn-hostname" => host,
        "ipv4" => format!("(?:{DEC_OCTET}\\.){{3}}{DEC_OCTET}"),
        "ipv6" => format!("(?:{h4}:){{7}}{h4}|::|(?:{h4}:){{1,7}}:|:(?::{h4}){{1,7}}"),
        "uuid" => "[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}".to_string(),
        "uri" | "iri" => uri,
        "uri-reference" | "iri-reference" => format!("(?:{uri}|{relref})"),
        "json-pointer" => "(?:/(?:[^~/]|~[01])*)*".to_string(),
        "relative-json-pointer" => "(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^~/]|~[01])*)*)".to_string(),
        _ => return None,
    };
    Some(format!("^(?:{s})$"))
}
