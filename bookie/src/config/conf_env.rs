//! Container-style configuration: `BK_<key>=value` environment variables, as the official
//! Apache BookKeeper image takes them (its entry point rewrites `bk_server.conf` with every
//! `BK_<key>` whose key the file names). Ours reads them directly: each `BK_<key>` whose key
//! is a bk_server.conf key overrides the file's value, and with no file at all the variables
//! are the whole configuration (over Java's defaults, as the image's file would start).
//! Precedence, lowest first: defaults, the file, the environment, the command-line flags.
//!
//! The image's own helper variables (`BK_DATA_DIR`, `BK_CLUSTER_ROOT_PATH`, `BK_HOME`,
//! `BK_USER`, `BK_PASSWORD`) are not keys: the image's entry point turns the first two into
//! keys (`deploy/entrypoint.sh` does the same here); the bookie itself passes over them
//! silently. Any other `BK_` variable that is not a key is reported, like an unknown key of the
//! file. A value that does not parse is an error naming the variable, as for a file's line.

use std::ffi::OsString;
use std::fmt::Write;
use std::path::PathBuf;

use crate::config::conf::origin;
use crate::config::properties::Property;
use crate::config::BookieConfig;

pub const PREFIX: &str = "BK_";

/// Variables of the official image's entry point that are not bk_server.conf keys.
const IMAGE_VARS: &[&str] = &["DATA_DIR", "CLUSTER_ROOT_PATH", "HOME", "USER", "PASSWORD"];

/// The `BK_<key>` variables among `vars` as properties (line 0: from the environment), sorted
/// by name; a variable whose name or value is not UTF-8 is an error naming it.
pub fn properties(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
) -> Result<Vec<Property>, String> {
    let mut out = Vec::new();
    for (name, value) in vars {
        let Some(name) = name.to_str() else {
            continue; // not ours: a BK_ variable's name is ASCII
        };
        let Some(key) = name.strip_prefix(PREFIX) else {
            continue;
        };
        if key.is_empty() || IMAGE_VARS.contains(&key) {
            continue;
        }
        let value = value
            .into_string()
            .map_err(|v| format!("environment variable {name}: value {v:?} is not UTF-8"))?;
        out.push(Property {
            key: key.to_string(),
            value,
            line: 0,
            file: None,
        });
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(out)
}

/// The whole configuration's sources: the file's properties, then the environment's (which
/// win for a key both name).
pub fn merge(file: Vec<Property>, env: Vec<Property>) -> Vec<Property> {
    let mut out: Vec<Property> = file
        .into_iter()
        .filter(|p| !env.iter().any(|e| e.key == p.key))
        .collect();
    out.extend(env);
    out
}

/// What the configuration was made of, for `--print-config` and the ignored-keys warning.
#[derive(Debug, Default)]
pub struct Sources {
    /// The conf file and its properties.
    pub file: Option<(PathBuf, Vec<Property>)>,
    /// The `BK_<key>` variables.
    pub env: Vec<Property>,
    /// Keys (`BK_<key>` for variables) this bookie knows and does not need.
    pub ignored: Vec<String>,
    /// Keys no bookie knows.
    pub unknown: Vec<String>,
    /// Warnings about the file and the keys (`conf::Applied::warnings`).
    pub warnings: Vec<String>,
}

/// `bookie serve --print-config`: every key set, its value and where it came from (a file's
/// value a variable overrides is named too), the flags, the ignored keys, and the resulting
/// settings (everything not set is the default shown there).
pub fn describe(sources: &Sources, flags: &[String], config: &BookieConfig) -> String {
    let mut out = String::new();
    let file_name = sources.file.as_ref().map(|(p, _)| p.display().to_string());
    let _ = writeln!(
        out,
        "# bookie serve: effective configuration (lowest precedence first: defaults, {}, \
         {PREFIX}<key> environment variables, command-line flags)",
        file_name.as_deref().unwrap_or("no conf file")
    );
    let file_props: &[Property] = sources.file.as_ref().map_or(&[], |f| &f.1);
    let mut keys: Vec<(&Property, String)> = Vec::new();
    for p in file_props {
        if sources.env.iter().any(|e| e.key == p.key) {
            continue;
        }
        let f = file_name.as_deref().unwrap_or("file");
        keys.push((p, format!("{f} {}", origin(p))));
    }
    for e in &sources.env {
        let mut from = origin(e);
        if let Some(p) = file_props.iter().find(|p| p.key == e.key) {
            let f = file_name.as_deref().unwrap_or("file");
            let _ = write!(from, ", over {f} line {} ({:?})", p.line, p.value);
        }
        keys.push((e, from));
    }
    let _ = writeln!(out, "# keys set ({}):", keys.len());
    for (p, from) in &keys {
        let note = match crate::config::keys::lookup(&p.key) {
            Some(k) => format!("; {}", crate::config::keys::fate_note(k)),
            None => "; unknown: no bookie reads it".to_string(),
        };
        let _ = writeln!(out, "{}={}    # {from}{note}", p.key, p.value);
    }
    let _ = writeln!(
        out,
        "# command-line flags (they win): {}",
        if flags.is_empty() {
            "none".to_string()
        } else {
            flags.join(" ")
        }
    );
    let _ = writeln!(out, "# resulting settings (the rest are defaults):");
    for line in format!("{config:#?}").lines() {
        let _ = writeln!(out, "#   {line}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        list.iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    #[test]
    fn bk_variables_become_properties_and_image_helpers_do_not() {
        let props = properties(vars(&[
            ("PATH", "/bin"),
            ("BK_zkServers", "zk1:2181,zk2:2181"),
            ("BK_DATA_DIR", "/data/bookkeeper"),
            ("BK_bookiePort", "3181"),
            ("BK_", "x"),
            ("bk_lower", "y"),
        ]))
        .unwrap();
        let got: Vec<(&str, &str, usize)> = props
            .iter()
            .map(|p| (p.key.as_str(), p.value.as_str(), p.line))
            .collect();
        assert_eq!(
            got,
            vec![
                ("bookiePort", "3181", 0),
                ("zkServers", "zk1:2181,zk2:2181", 0)
            ]
        );
        assert_eq!(origin(&props[0]), "environment variable BK_bookiePort");
    }

    #[test]
    fn non_utf8_value_is_an_error_naming_the_variable() {
        use std::os::unix::ffi::OsStringExt;
        let bad = vec![(
            OsString::from("BK_journalDirectories"),
            OsString::from_vec(vec![b'/', 0xff]),
        )];
        let e = properties(bad).unwrap_err();
        assert!(e.contains("BK_journalDirectories"), "{e}");
    }

    #[test]
    fn the_environment_wins_over_the_file() {
        let file = vec![
            Property {
                key: "bookiePort".into(),
                value: "3181".into(),
                line: 4,
                file: None,
            },
            Property {
                key: "zkServers".into(),
                value: "a:2181".into(),
                line: 9,
                file: None,
            },
        ];
        let env = vec![Property {
            key: "bookiePort".into(),
            value: "4181".into(),
            line: 0,
            file: None,
        }];
        let merged = merge(file, env);
        let got: Vec<(&str, &str)> = merged
            .iter()
            .map(|p| (p.key.as_str(), p.value.as_str()))
            .collect();
        assert_eq!(got, vec![("zkServers", "a:2181"), ("bookiePort", "4181")]);
    }
}
