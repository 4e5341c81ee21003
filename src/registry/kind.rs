//! Which kind a registry is: the few facts about a kind that everything else compares and
//! prints (its `kind = "..."` name, how it canonicalises a package name, how a bare token is
//! sent). The rest of a kind (its keys, its front) is its row in [`super::protocol`].

/// The identity of one registry kind.
#[derive(Debug)]
pub(crate) struct KindInfo {
    /// The `kind = "..."` name, and the `kind` label in metrics and logs.
    pub(crate) name: &'static str,
    /// The name in the form this registry treats as identical (what `allow`/`deny` match).
    pub(crate) canonical: fn(&str) -> String,
    /// The scheme a bare token in a `credentials_file` is sent with (`None`: sent bare, as
    /// cargo sends registry tokens).
    pub(crate) bare_token_scheme: Option<&'static str>,
}

/// Which kind a registry is.
#[derive(Clone, Copy)]
pub(crate) struct Kind(&'static KindInfo);

impl Kind {
    /// The kind these facts describe.
    pub(crate) const fn of(info: &'static KindInfo) -> Kind {
        Kind(info)
    }

    /// The label used in configuration, metrics and logs.
    pub(crate) fn as_str(self) -> &'static str {
        self.0.name
    }

    /// `name` in the form this kind treats as identical.
    pub(crate) fn canonical(self, name: &str) -> String {
        (self.0.canonical)(name)
    }

    /// The scheme a bare token in a `credentials_file` is sent with.
    pub(crate) fn bare_token_scheme(self) -> Option<&'static str> {
        self.0.bare_token_scheme
    }
}

impl PartialEq for Kind {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for Kind {}

impl std::hash::Hash for Kind {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.name.hash(state);
    }
}

impl std::fmt::Debug for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name)
    }
}
