//! Every bk_server.conf key this bookie knows, and its fate: **applied** (mapped onto the
//! settings by its setter), **ignored** (read and checked as Java reads it, with the reason it
//! changes nothing that matters here), or **unhonoured** (not applied, and some values change
//! durability, availability or security: those values get a warning line of their own that
//! says what the operator loses). The table is in `keys_table.rs`; docs/config-keys.md holds
//! its rendering, which a test keeps equal to it.
//!
//! The keys are those of BookKeeper 4.14–4.18's `ServerConfiguration` and
//! `AbstractConfiguration`, DbLedgerStorage's and the Prometheus provider's, every key of the
//! stock `bk_server.conf` of 4.14–4.18 and of Pulsar 3.0, 3.3 and 4.0's `conf/bookkeeper.conf`
//! (`bookie/tests/stock-conf/`), those the Pulsar Helm chart adds, and this bookie's own.

use crate::config::values::{self, Entry};
use crate::config::BookieConfig;

/// How the Java bookie reads a key's value (its getter), which decides what it refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    Bool,
    Int,
    Long,
    Float,
    Double,
    /// `getString`: the first element, any text.
    Str,
    /// `getStringArray`/`getList`: every element.
    List,
    /// A class name Java loads: an empty value is an error when Java reads it.
    Class,
    /// Read by Java only in code a bookie may not run (autorecovery, its embedded client, the
    /// table service, DbLedgerStorage's RocksDB tuning): not checked here.
    Lazy,
}

impl Ty {
    pub fn name(self) -> &'static str {
        match self {
            Ty::Bool => "boolean",
            Ty::Int => "int",
            Ty::Long => "long",
            Ty::Float => "float",
            Ty::Double => "double",
            Ty::Str => "string",
            Ty::List => "list",
            Ty::Class => "class",
            Ty::Lazy => "(not read at start)",
        }
    }

    fn numeric_or_bool(self) -> bool {
        matches!(self, Ty::Bool | Ty::Int | Ty::Long | Ty::Float | Ty::Double)
    }
}

/// The value of an unhonoured key that matches what this bookie does (no warning).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ours {
    Bool(bool),
    /// Unset or empty.
    Empty,
}

/// Maps a checked value onto the settings.
pub type Setter = fn(&mut Ctx, &V) -> Result<(), String>;

#[derive(Clone, Copy)]
pub enum Fate {
    Applied { does: &'static str, set: Setter },
    Ignored { why: &'static str },
    Unhonoured { ours: Ours, loses: &'static str },
}

#[derive(Clone, Copy)]
pub struct Key {
    pub name: &'static str,
    pub ty: Ty,
    /// Java takes an empty value for unset (the default applies): `metadataServiceUri`, the
    /// sizes DbLedgerStorage reads through `getLongVariableOrDefault`, ...
    pub empty_unset: bool,
    pub fate: Fate,
}

pub const fn applied(name: &'static str, ty: Ty, does: &'static str, set: Setter) -> Key {
    Key {
        name,
        ty,
        empty_unset: false,
        fate: Fate::Applied { does, set },
    }
}

pub const fn ignored(name: &'static str, ty: Ty, why: &'static str) -> Key {
    Key {
        name,
        ty,
        empty_unset: false,
        fate: Fate::Ignored { why },
    }
}

pub const fn unhonoured(name: &'static str, ty: Ty, ours: Ours, loses: &'static str) -> Key {
    Key {
        name,
        ty,
        empty_unset: false,
        fate: Fate::Unhonoured { ours, loses },
    }
}

impl Key {
    /// Java treats an empty value as unset.
    pub const fn empty_unset(mut self) -> Key {
        self.empty_unset = true;
        self
    }
}

/// The key named `name` (exact, case-sensitive, as Java's keys are).
pub fn lookup(name: &str) -> Option<&'static Key> {
    super::keys_table::KEYS.iter().find(|k| k.name == name)
}

/// What applying the keys changes besides the fields they set directly: values that depend on
/// more than one key, resolved once all are read.
#[derive(Debug, Default)]
pub struct Pending {
    pub lwm_set: bool,
    pub prealloc_bytes: Option<u64>,
    pub read_threads: Option<usize>,
    /// A non-empty `journalDirectories` was given: `journalDirectory` is unused (Java).
    pub has_journal_dirs: bool,
    /// `dbStorage_writeCacheMaxSizeMb` in bytes for the whole bookie.
    pub write_cache_total_bytes: Option<usize>,
    /// `zkLedgersRootPath` was given empty (where): an error unless metadataServiceUri is set.
    pub zk_root_empty: Option<String>,
    /// Values of keys Java reads only in its autorecovery that its getters would refuse: an
    /// error when autorecovery runs, a warning otherwise.
    pub lazy_errors: Vec<String>,
}

/// What a setter works on.
pub struct Ctx<'a> {
    pub c: &'a mut BookieConfig,
    pub pending: &'a mut Pending,
}

/// A key's value as its Java getter sees it: elements interpolated, with the helpers that turn
/// it into a setting or a clear error naming the key, the value and where it was set.
pub struct V<'a> {
    pub entry: &'a Entry,
    /// The first element, interpolated: what a scalar getter returns.
    first: String,
    /// Every element, interpolated.
    list: Vec<String>,
}

impl<'a> V<'a> {
    pub fn new(
        entry: &'a Entry,
        lookup_list: &dyn Fn(&str) -> Option<Vec<String>>,
    ) -> Result<V<'a>, String> {
        let list = values::interpolated_elements(&entry.elements, lookup_list)
            .map_err(|why| invalid(entry, &why))?;
        let first = list.first().cloned().unwrap_or_default();
        Ok(V { entry, first, list })
    }

    /// The text a scalar getter returns (the first element).
    pub fn text(&self) -> &str {
        &self.first
    }

    /// Every element (`getStringArray`).
    pub fn list(&self) -> &[String] {
        &self.list
    }

    /// The elements joined with commas: what the `tls`, `auth` and HTTPS modules split.
    pub fn joined(&self) -> String {
        self.list.join(",")
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
    }

    pub fn invalid(&self, why: &str) -> String {
        invalid(self.entry, why)
    }

    pub fn nonempty(&self) -> Result<&str, String> {
        match self.text() {
            "" => Err(self.invalid("empty")),
            t => Ok(t),
        }
    }

    pub fn optional(&self) -> Option<String> {
        Some(self.first.clone()).filter(|t| !t.is_empty())
    }

    pub fn boolean(&self) -> Result<bool, String> {
        values::java_bool(self.text()).map_err(|e| self.invalid(&e))
    }

    pub fn int(&self) -> Result<i32, String> {
        values::java_int(self.text()).map_err(|e| self.invalid(&e))
    }

    pub fn long(&self) -> Result<i64, String> {
        values::java_long(self.text()).map_err(|e| self.invalid(&e))
    }

    pub fn double(&self) -> Result<f64, String> {
        values::java_double(self.text()).map_err(|e| self.invalid(&e))
    }

    /// A `long` within `min..=max`.
    pub fn range(&self, min: i64, max: i64) -> Result<u64, String> {
        let n = self.long()?;
        if n < min || n > max {
            return Err(self.invalid(&format!("expected {min}..={max}")));
        }
        Ok(n as u64)
    }

    /// Checks the value as the Java getter of `ty` would (an error is what Java throws).
    pub fn check(&self, ty: Ty) -> Result<(), String> {
        match ty {
            Ty::Bool => self.boolean().map(|_| ()),
            Ty::Int => self.int().map(|_| ()),
            Ty::Long => self.long().map(|_| ()),
            Ty::Float | Ty::Double => self.double().map(|_| ()),
            Ty::Class => self.nonempty().map(|_| ()),
            Ty::Str | Ty::List | Ty::Lazy => Ok(()),
        }
    }
}

fn invalid(entry: &Entry, why: &str) -> String {
    format!(
        "invalid value {:?} for {} ({}): {why}",
        entry.raw, entry.key, entry.origin
    )
}

/// Whether an unhonoured key's value is the one that matches this bookie (no warning).
pub fn matches_ours(ours: Ours, v: &V) -> bool {
    match ours {
        Ours::Empty => v.list().iter().all(|e| e.is_empty()),
        Ours::Bool(b) => v.boolean().map_or(true, |x| x == b),
    }
}

/// What a key does here, for `--print-config`: applied, or why not.
pub fn fate_note(k: &Key) -> String {
    match k.fate {
        Fate::Applied { does, .. } => format!("applied: {does}"),
        Fate::Ignored { why } => format!("not needed: {why}"),
        Fate::Unhonoured { loses, .. } => format!("NOT HONOURED: {loses}"),
    }
}

/// Whether Java refuses an empty value for this key when it reads it.
pub fn empty_is_an_error(k: &Key) -> bool {
    !k.empty_unset && (k.ty.numeric_or_bool() || k.ty == Ty::Class)
}

/// The table as docs/config-keys.md shows it: one row per key, sorted by name.
#[cfg(test)]
pub fn markdown_table() -> String {
    let mut keys: Vec<&Key> = super::keys_table::KEYS.iter().collect();
    keys.sort_by_key(|k| k.name);
    let mut out = String::from(
        "| key | Java reads it as | empty value | fate | what this bookie does with it |\n\
         |---|---|---|---|---|\n",
    );
    for k in keys {
        let empty = if k.empty_unset {
            "unset (default)"
        } else if empty_is_an_error(k) {
            "refused"
        } else {
            "empty text"
        };
        let (fate, text) = match k.fate {
            Fate::Applied { does, .. } => ("applied", does.to_string()),
            Fate::Ignored { why } => ("ignored", why.to_string()),
            Fate::Unhonoured { ours, loses } => {
                let when = match ours {
                    Ours::Bool(b) => format!("warns when not `{b}`"),
                    Ours::Empty => "warns when set".to_string(),
                };
                ("**unhonoured**", format!("{when}: {loses}"))
            }
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            k.name,
            k.ty.name(),
            empty,
            fate,
            text.replace('|', "\\|")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    const DOC: &str = "docs/config-keys.md";
    const BEGIN: &str =
        "<!-- BEGIN keys table: generated from bookie/src/config/keys_table.rs -->\n";
    const END: &str = "<!-- END keys table -->";

    fn repo_file(rel: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(rel)
    }

    /// docs/config-keys.md's table is the code's: a key in one and not the other, or a fate
    /// that differs, fails here. `BOOKIE_UPDATE_DOCS=1 cargo test -p bookie config::keys`
    /// rewrites it.
    #[test]
    fn the_docs_table_is_the_code_table() {
        let path = repo_file(DOC);
        let doc = std::fs::read_to_string(&path).expect("docs/config-keys.md");
        let start = doc.find(BEGIN).expect("BEGIN marker") + BEGIN.len();
        let end = doc.find(END).expect("END marker");
        let want = markdown_table();
        if std::env::var_os("BOOKIE_UPDATE_DOCS").is_some() {
            let updated = format!("{}{want}{}", &doc[..start], &doc[end..]);
            std::fs::write(&path, updated).unwrap();
            return;
        }
        let have = &doc[start..end];
        let rows = |t: &str| -> BTreeSet<String> { t.lines().map(String::from).collect() };
        let (h, w) = (rows(have), rows(&want));
        let missing: Vec<_> = w.difference(&h).collect();
        let extra: Vec<_> = h.difference(&w).collect();
        assert!(
            missing.is_empty() && extra.is_empty() && have == want,
            "{DOC} is out of step with keys_table.rs (BOOKIE_UPDATE_DOCS=1 cargo test -p bookie \
             config::keys rewrites it)\nrows in the code, not the doc: {missing:#?}\nrows in the \
             doc, not the code: {extra:#?}"
        );
    }

    /// The keys the TLS, HTTPS and authentication modules set are applied, through them.
    #[test]
    fn the_security_modules_keys_are_applied() {
        let modules = [
            crate::security::tls::CONF_KEYS,
            crate::security::http_tls::CONF_KEYS,
            crate::security::auth::CONF_KEYS,
        ];
        for key in modules.concat() {
            let k = lookup(key).unwrap_or_else(|| panic!("{key} is not in keys_table.rs"));
            assert!(matches!(k.fate, Fate::Applied { .. }), "{key}");
        }
    }

    #[test]
    fn each_key_once_and_well_formed() {
        let mut seen = BTreeSet::new();
        for k in super::super::keys_table::KEYS {
            assert!(seen.insert(k.name), "{} listed twice", k.name);
            assert!(!k.name.is_empty() && !k.name.contains(char::is_whitespace));
            let text = match k.fate {
                Fate::Applied { does, .. } => does,
                Fate::Ignored { why } => why,
                Fate::Unhonoured { loses, .. } => loses,
            };
            assert!(text.len() > 10, "{}: say what happens", k.name);
            if let Fate::Unhonoured {
                ours: Ours::Bool(_),
                ..
            } = k.fate
            {
                assert_eq!(k.ty, Ty::Bool, "{}", k.name);
            }
        }
    }
}
