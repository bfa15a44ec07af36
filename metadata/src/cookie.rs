//! Cookies (`bookie/Cookie.java`, `LegacyCookieValidation.java`): the guard against a bookie
//! rejoining under a known id with missing or foreign data.
//!
//! A cookie binds bookie id, journal dirs, ledger dirs, optional index dirs and the cluster's
//! `INSTANCEID`. It is stored as `<dir>/current/VERSION` in every journal, ledger and index dir
//! and as `<root>/cookies/<bookieId>` in ZooKeeper, with identical bytes: a first line with the
//! layout version (we write 5, like Java 4.15+), then protobuf text format of `CookieFormat`
//! (`bookieHost`, `journalDir`, `ledgerDirs`, `instanceId`, `indexDirs`). The parser accepts
//! generic text format (comments, any field order, both quote styles, escapes) and the line
//! based version 3; versions below 3 are refused. Nothing here panics on bad bytes.

use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use zookeeper_client::{Client, Error as ZkError};

use crate::config::MetadataConfig;
use crate::error::{MetaError, Result};
use crate::zk::{self, PERSISTENT};

/// Layout version we write.
pub const COOKIE_LAYOUT_VERSION: u32 = 5;
/// Sub-directory holding the cookie in each dir (`BookKeeperConstants.CURRENT_DIR`).
pub const CURRENT_DIR: &str = "current";
/// Cookie file name (`BookKeeperConstants.VERSION_FILENAME`).
pub const VERSION_FILENAME: &str = "VERSION";

/// A parsed or generated cookie.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cookie {
    pub layout_version: u32,
    pub bookie_id: String,
    /// Journal dirs joined with `,`.
    pub journal_dirs: String,
    /// `N\t<dir>\t<dir>...`
    pub ledger_dirs: String,
    /// Same encoding as `ledger_dirs`, only when index dirs are configured.
    pub index_dirs: Option<String>,
    pub instance_id: Option<String>,
}

/// The directories a cookie covers, as configured (not their `current/` subdirectories).
#[derive(Clone, Debug, Default)]
pub struct CookieDirs {
    pub journal_dirs: Vec<String>,
    pub ledger_dirs: Vec<String>,
    /// `indexDirectories`, `None` when not configured.
    pub index_dirs: Option<Vec<String>>,
}

impl CookieDirs {
    /// Every dir that carries a `current/VERSION`: journal, ledger and index dirs, de-duplicated.
    pub fn all(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        let idx = self.index_dirs.iter().flatten();
        for d in self
            .journal_dirs
            .iter()
            .chain(self.ledger_dirs.iter())
            .chain(idx)
        {
            if !v.contains(d) {
                v.push(d.clone());
            }
        }
        v
    }
}

/// `Cookie.encodeDirPaths`: the count, then TAB + path for each dir.
pub fn encode_dir_paths(dirs: &[String]) -> String {
    let mut s = dirs.len().to_string();
    for d in dirs {
        s.push('\t');
        s.push_str(d);
    }
    s
}

fn decode_dir_paths(s: &str) -> Vec<&str> {
    match s.find('\t') {
        Some(i) => s[i + 1..].split('\t').collect(),
        None => Vec::new(),
    }
}

/// Google protobuf `TextFormat.escapeBytes`.
fn escape(s: &str) -> String {
    let mut o = String::new();
    for &b in s.as_bytes() {
        match b {
            0x07 => o.push_str("\\a"),
            0x08 => o.push_str("\\b"),
            0x0c => o.push_str("\\f"),
            b'\n' => o.push_str("\\n"),
            b'\r' => o.push_str("\\r"),
            b'\t' => o.push_str("\\t"),
            0x0b => o.push_str("\\v"),
            b'\\' => o.push_str("\\\\"),
            b'\'' => o.push_str("\\'"),
            b'"' => o.push_str("\\\""),
            0x20..=0x7e => o.push(b as char),
            _ => {
                let _ = write!(o, "\\{:03o}", b);
            }
        }
    }
    o
}

impl Cookie {
    /// The cookie this bookie expects (`Cookie.generateCookie` + instance id).
    pub fn generate(bookie_id: &str, dirs: &CookieDirs, instance_id: Option<String>) -> Cookie {
        Cookie {
            layout_version: COOKIE_LAYOUT_VERSION,
            bookie_id: bookie_id.to_string(),
            journal_dirs: dirs.journal_dirs.join(","),
            ledger_dirs: encode_dir_paths(&dirs.ledger_dirs),
            index_dirs: dirs.index_dirs.as_ref().map(|d| encode_dir_paths(d)),
            instance_id,
        }
    }

    /// The exact text Java writes (`Cookie.toString`).
    pub fn encode(&self) -> String {
        if self.layout_version <= 3 {
            return format!(
                "{}\n{}\n{}\n{}\n",
                self.layout_version, self.bookie_id, self.journal_dirs, self.ledger_dirs
            );
        }
        let mut s = format!("{}\n", self.layout_version);
        let _ = writeln!(s, "bookieHost: \"{}\"", escape(&self.bookie_id));
        let _ = writeln!(s, "journalDir: \"{}\"", escape(&self.journal_dirs));
        let _ = writeln!(s, "ledgerDirs: \"{}\"", escape(&self.ledger_dirs));
        if let Some(i) = &self.instance_id {
            let _ = writeln!(s, "instanceId: \"{}\"", escape(i));
        }
        if let Some(i) = &self.index_dirs {
            let _ = writeln!(s, "indexDirs: \"{}\"", escape(i));
        }
        s
    }

    /// Parses cookie bytes (`Cookie.parse`).
    pub fn parse(data: &[u8]) -> Result<Cookie> {
        let text = std::str::from_utf8(data)
            .map_err(|_| MetaError::InvalidCookie("cookie is not UTF-8".into()))?;
        let (first, rest) = match text.find('\n') {
            Some(i) => (&text[..i], &text[i + 1..]),
            None => (text, ""),
        };
        let version: u32 = first.trim().parse().map_err(|_| {
            MetaError::InvalidCookie(format!(
                "invalid string '{}', cannot parse cookie",
                first.trim()
            ))
        })?;
        if version < 3 {
            return Err(MetaError::InvalidCookie(format!(
                "cookie is of too old version {version}"
            )));
        }
        if version == 3 {
            let mut lines = rest.lines();
            let mut next = |what: &str| {
                lines.next().map(str::to_string).ok_or_else(|| {
                    MetaError::InvalidCookie(format!("version 3 cookie lacks {what}"))
                })
            };
            return Ok(Cookie {
                layout_version: 3,
                bookie_id: next("bookie id")?,
                journal_dirs: next("journal dir")?,
                ledger_dirs: next("ledger dirs")?,
                index_dirs: None,
                instance_id: None,
            });
        }
        let fields = parse_text_format(rest)?;
        let get = |name: &str| {
            fields
                .iter()
                .rev()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let required = |name: &str| {
            get(name).ok_or_else(|| {
                MetaError::InvalidCookie(format!("cookie lacks required field {name}"))
            })
        };
        Ok(Cookie {
            layout_version: version,
            bookie_id: required("bookieHost")?,
            journal_dirs: required("journalDir")?,
            ledger_dirs: required("ledgerDirs")?,
            instance_id: get("instanceId").filter(|s| !s.is_empty()),
            index_dirs: get("indexDirs").filter(|s| !s.is_empty()),
        })
    }

    /// `Cookie.verify` / `verifyIsSuperSet` with `self` = expected (from config), `found` = on
    /// disk or in ZooKeeper. The error names every field that differs and where.
    pub fn verify(&self, found: &Cookie, superset: bool, source: &str) -> Result<()> {
        let mut diffs = Vec::new();
        if found.bookie_id != self.bookie_id {
            diffs.push(format!(
                "bookie id: configured {:?}, cookie has {:?}",
                self.bookie_id, found.bookie_id
            ));
        }
        if found.journal_dirs != self.journal_dirs {
            diffs.push(format!(
                "journal dirs: configured {:?}, cookie has {:?}",
                self.journal_dirs, found.journal_dirs
            ));
        }
        let ledger_ok = if superset {
            let mine = decode_dir_paths(&self.ledger_dirs);
            decode_dir_paths(&found.ledger_dirs)
                .iter()
                .all(|d| mine.contains(d))
        } else {
            self.ledger_dirs == found.ledger_dirs
        };
        if !ledger_ok {
            diffs.push(format!(
                "ledger dirs: configured {:?}, cookie has {:?}",
                self.ledger_dirs, found.ledger_dirs
            ));
        }
        let index_ok = if self.layout_version >= 5 && found.layout_version < 5 {
            true
        } else {
            match (&self.index_dirs, &found.index_dirs) {
                (None, None) => true,
                (Some(a), Some(b)) if superset => {
                    let mine = decode_dir_paths(a);
                    decode_dir_paths(b).iter().all(|d| mine.contains(d))
                }
                (Some(a), Some(b)) => a == b,
                _ => false,
            }
        };
        if !index_ok {
            diffs.push(format!(
                "index dirs: configured {:?}, cookie has {:?}",
                self.index_dirs, found.index_dirs
            ));
        }
        if self.instance_id != found.instance_id {
            diffs.push(format!(
                "instance id: cluster has {:?}, cookie has {:?}",
                self.instance_id, found.instance_id
            ));
        }
        if diffs.is_empty() {
            Ok(())
        } else {
            Err(MetaError::InvalidCookie(format!(
                "cookie in {source} does not match: {}",
                diffs.join("; ")
            )))
        }
    }

    /// `<dir>/current/VERSION`.
    pub fn path_in(dir: &str) -> PathBuf {
        Path::new(dir).join(CURRENT_DIR).join(VERSION_FILENAME)
    }

    /// Reads `<dir>/current/VERSION`; `None` if the file does not exist.
    pub fn read_from_dir(dir: &str) -> Result<Option<Cookie>> {
        let p = Self::path_in(dir);
        match fs::read(&p) {
            Ok(b) => Cookie::parse(&b)
                .map(Some)
                .map_err(|e| MetaError::InvalidCookie(format!("{}: {e}", p.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(MetaError::io(&p, e)),
        }
    }

    /// Writes `<dir>/current/VERSION` durably (temp file, fsync, rename, fsync dir).
    pub fn write_to_dir(&self, dir: &str) -> Result<()> {
        let cur = Path::new(dir).join(CURRENT_DIR);
        fs::create_dir_all(&cur).map_err(|e| MetaError::io(&cur, e))?;
        let tmp = cur.join("VERSION.tmp");
        let dst = cur.join(VERSION_FILENAME);
        let mut f = fs::File::create(&tmp).map_err(|e| MetaError::io(&tmp, e))?;
        f.write_all(self.encode().as_bytes())
            .map_err(|e| MetaError::io(&tmp, e))?;
        f.sync_all().map_err(|e| MetaError::io(&tmp, e))?;
        fs::rename(&tmp, &dst).map_err(|e| MetaError::io(&dst, e))?;
        fs::File::open(&cur)
            .and_then(|d| d.sync_all())
            .map_err(|e| MetaError::io(&cur, e))?;
        Ok(())
    }
}

/// Minimal protobuf text-format reader for a message of string fields.
fn parse_text_format(s: &str) -> Result<Vec<(String, String)>> {
    let bad = |m: &str| MetaError::InvalidCookie(format!("cookie text format: {m}"));
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    let skip_ws = |i: &mut usize| {
        while *i < b.len() {
            if b[*i].is_ascii_whitespace() {
                *i += 1;
            } else if b[*i] == b'#' {
                while *i < b.len() && b[*i] != b'\n' {
                    *i += 1;
                }
            } else {
                break;
            }
        }
    };
    loop {
        skip_ws(&mut i);
        if i >= b.len() {
            break;
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        if start == i {
            return Err(bad(&format!("unexpected character {:?}", b[i] as char)));
        }
        let name = &s[start..i];
        if !matches!(
            name,
            "bookieHost" | "journalDir" | "ledgerDirs" | "instanceId" | "indexDirs"
        ) {
            return Err(bad(&format!("unknown field {name:?}")));
        }
        skip_ws(&mut i);
        if i < b.len() && b[i] == b':' {
            i += 1;
        }
        let mut value = Vec::new();
        let mut any = false;
        loop {
            skip_ws(&mut i);
            if i >= b.len() || (b[i] != b'"' && b[i] != b'\'') {
                break;
            }
            any = true;
            let q = b[i];
            i += 1;
            loop {
                let Some(&c) = b.get(i) else {
                    return Err(bad("unterminated string"));
                };
                i += 1;
                if c == q {
                    break;
                }
                if c == b'\n' {
                    return Err(bad("newline in string"));
                }
                if c != b'\\' {
                    value.push(c);
                    continue;
                }
                let Some(&e) = b.get(i) else {
                    return Err(bad("dangling escape"));
                };
                i += 1;
                match e {
                    b'a' => value.push(0x07),
                    b'b' => value.push(0x08),
                    b'f' => value.push(0x0c),
                    b'n' => value.push(b'\n'),
                    b'r' => value.push(b'\r'),
                    b't' => value.push(b'\t'),
                    b'v' => value.push(0x0b),
                    b'\\' | b'\'' | b'"' | b'?' => value.push(e),
                    b'0'..=b'7' => {
                        let mut v = u32::from(e - b'0');
                        for _ in 0..2 {
                            match b.get(i) {
                                Some(&d @ b'0'..=b'7') => {
                                    v = v * 8 + u32::from(d - b'0');
                                    i += 1;
                                }
                                _ => break,
                            }
                        }
                        value.push(u8::try_from(v).map_err(|_| bad("octal escape out of range"))?);
                    }
                    b'x' => {
                        let mut v = 0u32;
                        let mut n = 0;
                        while n < 2 {
                            match b.get(i).and_then(|d| (*d as char).to_digit(16)) {
                                Some(d) => {
                                    v = v * 16 + d;
                                    i += 1;
                                    n += 1;
                                }
                                None => break,
                            }
                        }
                        if n == 0 {
                            return Err(bad("empty hex escape"));
                        }
                        value.push(v as u8);
                    }
                    _ => return Err(bad(&format!("invalid escape \\{}", e as char))),
                }
            }
        }
        if !any {
            return Err(bad(&format!("field {name} has no string value")));
        }
        let value = String::from_utf8(value).map_err(|_| bad("string is not UTF-8"))?;
        out.push((name.to_string(), value));
    }
    Ok(out)
}

/// Options of the start-up check.
#[derive(Clone, Debug, Default)]
pub struct CookieOptions {
    /// `allowStorageExpansion`: ledger/index dirs need only be a superset of the recorded ones.
    pub allow_storage_expansion: bool,
    /// Other ids this bookie could have had (IP-based, hostname-based, advertised); a ZK cookie
    /// under any of them must match too, which catches a changed `useHostNameAsBookieID`.
    pub other_bookie_ids: Vec<String>,
}

/// What [`validate_and_stamp`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CookieOutcome {
    /// All cookies present and matching.
    Verified,
    /// A new bookie: cookies written to every dir and to ZooKeeper.
    NewBookie,
    /// Storage expansion: new dirs stamped, ZooKeeper cookie updated.
    Expanded,
}

/// The ZooKeeper cookie of `id`, with its znode version.
pub async fn read_zk_cookie(
    zk: &Client,
    cfg: &MetadataConfig,
    id: &str,
) -> Result<Option<(Cookie, i32)>> {
    let path = format!("{}/{id}", cfg.cookies_path());
    match zk::get_opt(zk, &path).await? {
        None => Ok(None),
        Some((data, stat)) => {
            let c = Cookie::parse(&data)
                .map_err(|e| MetaError::InvalidCookie(format!("{path}: {e}")))?;
            Ok(Some((c, stat.version)))
        }
    }
}

/// Writes the ZooKeeper cookie: create when `version` is `None`, else compare-and-set.
pub async fn write_zk_cookie(
    zk: &Client,
    cfg: &MetadataConfig,
    cookie: &Cookie,
    version: Option<i32>,
) -> Result<()> {
    let path = format!("{}/{}", cfg.cookies_path(), cookie.bookie_id);
    let data = cookie.encode();
    match version {
        None => {
            zk::ensure_node(zk, &cfg.cookies_path(), &[]).await?;
            match zk.create(&path, data.as_bytes(), &PERSISTENT).await {
                Ok(_) => Ok(()),
                Err(ZkError::NodeExists) => Err(MetaError::InvalidCookie(format!(
                    "{path} was created concurrently by someone else"
                ))),
                Err(e) => Err(MetaError::zk(format!("create {path}"), e)),
            }
        }
        Some(v) => zk
            .set_data(&path, data.as_bytes(), Some(v))
            .await
            .map(|_| ())
            .map_err(|e| MetaError::zk(format!("update {path}"), e)),
    }
}

/// Deletes the ZooKeeper cookie of `id` (`bookieformat -d`); missing is fine.
pub async fn delete_zk_cookie(zk: &Client, cfg: &MetadataConfig, id: &str) -> Result<()> {
    let path = format!("{}/{id}", cfg.cookies_path());
    match zk.delete(&path, None).await {
        Ok(()) | Err(ZkError::NoNode) => Ok(()),
        Err(e) => Err(MetaError::zk(format!("delete {path}"), e)),
    }
}

/// A dir counts as empty when it is missing or holds nothing but `lost+found` and an empty
/// `current/` (what a freshly formatted disk looks like).
pub fn dir_is_empty(dir: &str) -> Result<bool> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(MetaError::io(dir, e)),
    };
    for ent in rd {
        let ent = ent.map_err(|e| MetaError::io(dir, e))?;
        let name = ent.file_name();
        if name == "lost+found" {
            continue;
        }
        if name == CURRENT_DIR {
            let cur = ent.path();
            let mut it = fs::read_dir(&cur).map_err(|e| MetaError::io(&cur, e))?;
            if it.next().is_none() {
                continue;
            }
        }
        return Ok(false);
    }
    Ok(true)
}

/// The start-up cookie check of `LegacyCookieValidation.checkCookies`, refusing everything Java
/// refuses: a ZooKeeper or directory cookie that does not match the configuration (id, journal
/// dirs, ledger dirs, index dirs, instance id), dirs without a cookie while others or ZooKeeper
/// have one (a wiped disk), and cookies in every dir but none in ZooKeeper. A new bookie (no
/// cookie anywhere, all dirs empty) gets cookies stamped into every dir, then into ZooKeeper.
pub async fn validate_and_stamp(
    zk: &Client,
    cfg: &MetadataConfig,
    dirs: &CookieDirs,
    instance_id: Option<String>,
    opts: &CookieOptions,
) -> Result<CookieOutcome> {
    let expected = Cookie::generate(&cfg.bookie_id, dirs, instance_id);
    let expansion = opts.allow_storage_expansion;
    let zk_cookie = read_zk_cookie(zk, cfg, &cfg.bookie_id).await?;
    if let Some((c, _)) = &zk_cookie {
        expected.verify(
            c,
            expansion,
            &format!("ZooKeeper ({}/{})", cfg.cookies_path(), cfg.bookie_id),
        )?;
    }
    for other in &opts.other_bookie_ids {
        if other == &cfg.bookie_id {
            continue;
        }
        if let Some((c, _)) = read_zk_cookie(zk, cfg, other).await? {
            expected.verify(
                &c,
                expansion,
                &format!("ZooKeeper ({}/{other})", cfg.cookies_path()),
            )?;
        }
    }
    let mut missing = Vec::new();
    for d in dirs.all() {
        match Cookie::read_from_dir(&d)? {
            Some(c) => {
                expected.verify(&c, expansion, &Cookie::path_in(&d).display().to_string())?
            }
            None => missing.push(d),
        }
    }
    if missing.is_empty() {
        if zk_cookie.is_none() {
            return Err(MetaError::InvalidCookie(format!(
                "every directory has a cookie but ZooKeeper has none at {}/{}: the cookie was deleted \
                 from ZooKeeper, refusing to rejoin with possibly stale data",
                cfg.cookies_path(),
                cfg.bookie_id
            )));
        }
        return Ok(CookieOutcome::Verified);
    }
    match &zk_cookie {
        None => {
            for d in &missing {
                if !dir_is_empty(d)? {
                    return Err(MetaError::InvalidCookie(format!(
                        "{d} has no cookie but is not empty, and ZooKeeper has no cookie for {}: \
                         refusing to start a new bookie over existing data",
                        cfg.bookie_id
                    )));
                }
            }
            stamp(zk, cfg, &expected, dirs, None).await?;
            Ok(CookieOutcome::NewBookie)
        }
        Some((old, version)) if expansion => {
            let recorded: Vec<&str> = decode_dir_paths(&old.ledger_dirs)
                .into_iter()
                .chain(
                    old.index_dirs
                        .as_deref()
                        .map(decode_dir_paths)
                        .unwrap_or_default(),
                )
                .chain(old.journal_dirs.split(','))
                .collect();
            for d in &missing {
                if recorded.contains(&d.as_str()) {
                    return Err(MetaError::InvalidCookie(format!(
                        "{d} is recorded in the cookie but its cookie is missing (wiped or replaced disk)"
                    )));
                }
                if !dir_is_empty(d)? {
                    return Err(MetaError::InvalidCookie(format!(
                        "new directory {d} is not empty"
                    )));
                }
            }
            stamp(zk, cfg, &expected, dirs, Some(*version)).await?;
            Ok(CookieOutcome::Expanded)
        }
        Some(_) => Err(MetaError::InvalidCookie(format!(
            "cookie missing in {} while ZooKeeper has one for {} (a wiped or missing disk?)",
            missing.join(", "),
            cfg.bookie_id
        ))),
    }
}

/// Writes `cookie` into every dir, then into ZooKeeper (Java's `stampNewCookie` order).
pub async fn stamp(
    zk: &Client,
    cfg: &MetadataConfig,
    cookie: &Cookie,
    dirs: &CookieDirs,
    version: Option<i32>,
) -> Result<()> {
    for d in dirs.all() {
        cookie.write_to_dir(&d)?;
    }
    write_zk_cookie(zk, cfg, cookie, version).await
}

/// Local format helper: removes `current/VERSION` from every dir and, with `delete_zk`, the
/// ZooKeeper cookie (like `bookieformat -d`). Wiping the data itself is the bookie's job.
pub async fn remove_cookies(
    zk: &Client,
    cfg: &MetadataConfig,
    dirs: &CookieDirs,
    delete_zk: bool,
) -> Result<()> {
    for d in dirs.all() {
        let p = Cookie::path_in(&d);
        match fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(MetaError::io(&p, e)),
        }
    }
    if delete_zk {
        delete_zk_cookie(zk, cfg, &cfg.bookie_id).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs() -> CookieDirs {
        CookieDirs {
            journal_dirs: vec!["/j1".into(), "/j2".into()],
            ledger_dirs: vec!["/l1".into(), "/l2".into()],
            index_dirs: None,
        }
    }

    #[test]
    fn java_text() {
        let c = Cookie::generate("10.0.0.5:3181", &dirs(), Some("abc".into()));
        assert_eq!(
            c.encode(),
            "5\nbookieHost: \"10.0.0.5:3181\"\njournalDir: \"/j1,/j2\"\nledgerDirs: \"2\\t/l1\\t/l2\"\ninstanceId: \"abc\"\n"
        );
        assert_eq!(Cookie::parse(c.encode().as_bytes()).unwrap(), c);
        let mut d = dirs();
        d.index_dirs = Some(vec!["/i".into()]);
        let c = Cookie::generate("b", &d, None);
        assert!(c
            .encode()
            .ends_with("ledgerDirs: \"2\\t/l1\\t/l2\"\nindexDirs: \"1\\t/i\"\n"));
        assert_eq!(Cookie::parse(c.encode().as_bytes()).unwrap(), c);
    }

    #[test]
    fn generic_text_format_and_v3() {
        let t = "4\n# comment\n  ledgerDirs: '1\\t/l'\ninstanceId:\"x\" bookieHost \"h:1\"\njournalDir: \"/a\" \"/b\"\n";
        let c = Cookie::parse(t.as_bytes()).unwrap();
        assert_eq!(
            (
                c.bookie_id.as_str(),
                c.journal_dirs.as_str(),
                c.ledger_dirs.as_str()
            ),
            ("h:1", "/a/b", "1\t/l")
        );
        assert_eq!(c.instance_id.as_deref(), Some("x"));
        let c = Cookie::parse(b"3\nh:1\n/j\n1\t/l\n").unwrap();
        assert_eq!((c.layout_version, c.bookie_id.as_str()), (3, "h:1"));
        assert!(Cookie::parse(b"2\nh\n/j\n1\t/l\n").is_err());
        assert!(Cookie::parse(b"x\n").is_err());
        assert!(Cookie::parse(b"5\nbookieHost: \"h\"\n").is_err()); // required fields missing
        assert!(Cookie::parse(b"5\nfoo: \"h\"\n").is_err());
        assert!(Cookie::parse(b"5\nbookieHost: \"h").is_err());
        assert!(Cookie::parse(&[0xff, b'\n']).is_err());
        let weird = Cookie {
            bookie_id: "a\"b\\c\u{e9}".into(),
            ..Cookie::generate("x", &dirs(), None)
        };
        assert!(weird.encode().contains("\\303\\251"));
        assert_eq!(Cookie::parse(weird.encode().as_bytes()).unwrap(), weird);
    }

    #[test]
    fn verify_rules() {
        let exp = Cookie::generate("h:1", &dirs(), Some("i".into()));
        assert!(exp.verify(&exp, false, "t").is_ok());
        let m = |f: &dyn Fn(&mut Cookie)| {
            let mut c = exp.clone();
            f(&mut c);
            exp.verify(&c, false, "t").unwrap_err().to_string()
        };
        assert!(m(&|c| c.bookie_id = "h:2".into()).contains("bookie id"));
        assert!(m(&|c| c.journal_dirs = "/j1".into()).contains("journal dirs"));
        assert!(m(&|c| c.ledger_dirs = "1\t/l1".into()).contains("ledger dirs"));
        assert!(m(&|c| c.instance_id = None).contains("instance id"));
        assert!(m(&|c| c.instance_id = Some("other".into())).contains("instance id"));
        assert!(m(&|c| c.index_dirs = Some("1\t/i".into())).contains("index dirs"));
        // superset: found ledger dirs ⊂ configured
        let mut sub = exp.clone();
        sub.ledger_dirs = "1\t/l1".into();
        assert!(exp.verify(&sub, true, "t").is_ok());
        sub.ledger_dirs = "1\t/l9".into();
        assert!(exp.verify(&sub, true, "t").is_err());
        // a v4 cookie is not checked for index dirs
        let mut v4 = exp.clone();
        v4.layout_version = 4;
        let mut exp_i = exp.clone();
        exp_i.index_dirs = Some("1\t/i".into());
        assert!(exp_i.verify(&v4, false, "t").is_ok());
    }
}
