//! `bookie apply-config-from-env [--prefix P] FILE...`: the Pulsar image's
//! `bin/apply-config-from-env.py`, which the Pulsar Helm chart runs on `conf/bookkeeper.conf`
//! before `bin/pulsar bookie` (deploy/pulsar/). It writes exactly what Pulsar's script (3.0 to
//! 4.0: the same script) writes, so an image of ours started by the chart reads the file a Java
//! bookie would have read:
//!
//! 1. Every line that holds a `=` registers the key before it (one leading `#` dropped, then
//!    trimmed): commented-out keys count, and the **last** line of a key is the one kept.
//! 2. Each environment variable (in name order) whose name is a registered key replaces that
//!    line with `key=value` (the value trimmed; an empty one gives `key=`), uncommenting it.
//! 3. A blank line is appended (the script always does).
//! 4. Each variable `P<key>` (default prefix `PULSAR_PREFIX_`), in name order, replaces the
//!    key's line, or appends `key=value` when the file has no such key. It runs after step 2,
//!    so `PULSAR_PREFIX_<key>` wins over `<key>`.
//!
//! Lines are read as Python reads text (`\r\n` and `\r` become `\n`); the messages printed are
//! the script's, passwords masked alike. A file that is not UTF-8 is an error, as the script's
//! decoding fails on it.

use std::path::Path;

pub const DEFAULT_PREFIX: &str = "PULSAR_PREFIX_";

/// Keys whose values the script does not print.
const SENSITIVE: &[&str] = &[
    "brokerClientAuthenticationParameters",
    "bookkeeperClientAuthenticationParameters",
    "tokenSecretKey",
];

/// The rewritten text of one file and the lines the script prints for it.
pub fn rewrite(
    name: &str,
    text: &str,
    env: &[(String, String)],
    prefix: &str,
) -> (String, Vec<String>) {
    let mut lines = python_lines(text);
    let mut keys: Vec<(String, usize)> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let stripped = python_strip(line);
        if stripped.is_empty() {
            continue;
        }
        let Some((k, _)) = stripped.split_once('=') else {
            continue; // the script's split fails and skips the line
        };
        let k = python_strip(k.strip_prefix('#').unwrap_or(k)).to_string();
        match keys.iter_mut().find(|(key, _)| *key == k) {
            Some(entry) => entry.1 = i,
            None => keys.push((k, i)),
        }
    }
    let index = |k: &str| keys.iter().find(|(key, _)| key == k).map(|(_, i)| *i);
    let mut sorted: Vec<&(String, String)> = env.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut log = Vec::new();
    for (k, v) in &sorted {
        let v = python_strip(v);
        if let Some(i) = index(k) {
            log.push(format!(
                "[{name}] Applying config {k} = {}",
                display_value(k, v)
            ));
            lines[i] = format!("{k}={v}\n");
        }
    }
    lines.push("\n".to_string());
    for (k, v) in &sorted {
        let Some(k) = k.strip_prefix(prefix) else {
            continue;
        };
        let v = python_strip(v);
        match index(k) {
            None => {
                log.push(format!(
                    "[{name}] Adding config {k} = {}",
                    display_value(k, v)
                ));
                lines.push(format!("{k}={v}\n"));
            }
            Some(i) => {
                log.push(format!(
                    "[{name}] Updating config {k} = {}",
                    display_value(k, v)
                ));
                lines[i] = format!("{k}={v}\n");
            }
        }
    }
    (lines.concat(), log)
}

/// The script's `sanitize_display_value`.
fn display_value<'a>(k: &str, v: &'a str) -> &'a str {
    if k.to_lowercase().contains("password") || SENSITIVE.contains(&k) {
        "********"
    } else {
        v
    }
}

/// Lines as Python's text mode reads them: universal newlines, each keeping its `\n`.
fn python_lines(text: &str) -> Vec<String> {
    let normalized = text.replace("\r\n", "\n").replace('\r', "\n");
    normalized.split_inclusive('\n').map(String::from).collect()
}

/// Python's `str.strip()`: Unicode whitespace, and the separators `\x1c`–`\x1f`.
fn python_strip(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || ('\x1c'..='\x1f').contains(&c))
}

/// The command: each file rewritten in place, the messages on stdout. Exit 1 without files
/// (the script prints its usage then).
pub fn main(args: &[String]) -> Result<(), String> {
    let mut prefix = DEFAULT_PREFIX.to_string();
    let mut files = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--prefix" => {
                prefix = it.next().ok_or("--prefix needs a value")?.to_string();
            }
            p if p.starts_with("--prefix=") => prefix = p["--prefix=".len()..].to_string(),
            "-h" | "--help" => {
                println!("usage: apply-config-from-env [--prefix PREFIX] [conf_files ...]");
                return Ok(());
            }
            f => files.push(f.to_string()),
        }
    }
    if files.is_empty() {
        return Err("usage: apply-config-from-env [--prefix PREFIX] [conf_files ...]".into());
    }
    let env: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    for f in &files {
        let path = Path::new(f);
        let bytes = std::fs::read(path).map_err(|e| format!("{f}: {e}"))?;
        let text = String::from_utf8(bytes).map_err(|e| format!("{f}: not UTF-8: {e}"))?;
        let (out, log) = rewrite(f, &text, &env, &prefix);
        for line in log {
            println!("{line}");
        }
        std::fs::write(path, out).map_err(|e| format!("{f}: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_scripts_rules() {
        let file = "# comment\nbookiePort=3181\n#journalDirectories=/tmp/bk-journal\n\
                    zkServers=localhost:2181\n# zkServers=example:2181\nnot a key line\n\
                    advertisedAddress=\nlast=1";
        let (out, log) = rewrite(
            "conf/bookkeeper.conf",
            file,
            &env(&[
                ("bookiePort", "  4181 \n"),
                ("journalDirectories", "/pulsar/data/bookkeeper/journal"),
                ("zkServers", ""),
                ("PATH", "/bin"),
                ("PULSAR_PREFIX_newKey", "v"),
                ("PULSAR_PREFIX_bookiePort", "5181"),
                ("httpServerKeyStorePassword", "secret"),
            ]),
            DEFAULT_PREFIX,
        );
        assert_eq!(
            out,
            "# comment\nbookiePort=5181\njournalDirectories=/pulsar/data/bookkeeper/journal\n\
             zkServers=localhost:2181\nzkServers=\nnot a key line\nadvertisedAddress=\nlast=1\
             \nnewKey=v\n"
        );
        assert_eq!(
            log,
            vec![
                "[conf/bookkeeper.conf] Applying config bookiePort = 4181",
                "[conf/bookkeeper.conf] Applying config journalDirectories = \
                 /pulsar/data/bookkeeper/journal",
                "[conf/bookkeeper.conf] Applying config zkServers = ",
                "[conf/bookkeeper.conf] Updating config bookiePort = 5181",
                "[conf/bookkeeper.conf] Adding config newKey = v",
            ]
        );
        // A secret is masked in the log, not in the file.
        let (out, log) = rewrite(
            "f",
            "#tlsKeyStorePassword=x\n",
            &env(&[("PULSAR_PREFIX_tlsKeyStorePassword", "s3cret")]),
            DEFAULT_PREFIX,
        );
        assert_eq!(out, "tlsKeyStorePassword=s3cret\n\n");
        assert_eq!(
            log,
            vec!["[f] Updating config tlsKeyStorePassword = ********"]
        );
    }

    #[test]
    fn newlines_as_python_reads_them() {
        let (out, _) = rewrite(
            "f",
            "a=1\r\nb=2\rc=3\n",
            &env(&[("b", "x")]),
            DEFAULT_PREFIX,
        );
        assert_eq!(out, "a=1\nb=x\nc=3\n\n");
        let (out, _) = rewrite("f", "", &[], DEFAULT_PREFIX);
        assert_eq!(out, "\n");
    }
}
