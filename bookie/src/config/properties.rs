//! The syntax of `bk_server.conf`, read exactly as the Java bookie reads it: Apache Commons
//! Configuration's `PropertiesConfiguration` reader (commons-configuration2, which BookKeeper
//! uses from 4.17.2 on and Pulsar 3.3/4.0 bundle; docs/config-keys.md, "How the file is read",
//! lists where the 1.10 reader of 4.14–4.17.1 differs).
//!
//! - The file is ISO-8859-1: every byte is one character (a UTF-8 `é` reads as `Ã©`, as in
//!   Java, so a path written in UTF-8 names the directory Java names).
//! - Lines end at `\n`, `\r\n` or `\r`. A line that is blank or whose first non-blank character
//!   is `#` or `!` is skipped — also in the middle of a continuation.
//! - A line is trimmed (every character up to U+0020); one that then ends in an odd number of
//!   backslashes continues on the next line, the backslash dropped. A continuation still open at
//!   the end of the file is dropped, as Java drops it ([`Read::dropped_at_end`]).
//! - The key runs to the first unescaped blank, `=` or `:`; the separator is blanks, or `=`/`:`
//!   with blanks around it, or nothing; the rest is the value. Key and value are trimmed.
//! - Values unescape `\t \n \r \f \b \uXXXX` and `\` before one of ``:#=!\'"``; any other
//!   backslash is kept. Keys unescape as Java source does and drop any other backslash.
//! - `include=FILE` (any case) reads FILE there, relative to the including file; a missing one
//!   is an error; `includeoptional=FILE` is skipped when missing. Neither is a key.
//! - A key may appear more than once: every value is kept ([`crate::config::values`] makes a
//!   list of them, and the first is what a scalar getter returns, as in Java).

use std::path::{Path, PathBuf};

/// One `key=value` of a file, before list splitting and interpolation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Property {
    pub key: String,
    /// The value after unescaping.
    pub value: String,
    /// The line where its logical line starts; 0: a `BK_<key>` environment variable.
    pub line: usize,
    /// The file it was read from when not the main file (an included file).
    pub file: Option<PathBuf>,
}

/// What reading a file found besides its properties.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Read {
    pub properties: Vec<Property>,
    /// The file starts with a UTF-8 byte-order mark: Java makes it part of the first key.
    pub byte_order_mark: bool,
    /// The line of a continuation left open at the end of the file (its property is lost).
    pub dropped_at_end: Option<usize>,
}

/// Includes nest at most this deep (a cycle is reported before).
const MAX_INCLUDE_DEPTH: usize = 16;

/// Reads a properties file, following its includes.
pub fn read_file(path: &Path) -> Result<Read, String> {
    let mut out = Read::default();
    let mut stack = Vec::new();
    read_into(path, None, &mut stack, &mut out)?;
    Ok(out)
}

fn read_into(
    path: &Path,
    included_by: Option<&Path>,
    stack: &mut Vec<PathBuf>,
    out: &mut Read,
) -> Result<(), String> {
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if stack.contains(&canonical) {
        return Err(format!("{}: include cycle", path.display()));
    }
    if stack.len() >= MAX_INCLUDE_DEPTH {
        return Err(format!("{}: includes nest too deep", path.display()));
    }
    let bytes = std::fs::read(path).map_err(|e| match included_by {
        Some(by) => format!(
            "{}: cannot read included file {}: {e}",
            by.display(),
            path.display()
        ),
        None => format!("cannot read {}: {e}", path.display()),
    })?;
    stack.push(canonical);
    let text = latin1(&bytes);
    if stack.len() == 1 {
        out.byte_order_mark = text.starts_with("\u{ef}\u{bb}\u{bf}");
    }
    let file = included_by.map(|_| path.to_path_buf());
    let parsed = parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if stack.len() == 1 {
        out.dropped_at_end = parsed.dropped_at_end;
    }
    let base = path.parent().unwrap_or(Path::new("."));
    for p in parsed.properties {
        let include = p.key.eq_ignore_ascii_case("include");
        if include || p.key.eq_ignore_ascii_case("includeoptional") {
            for target in include_targets(&p.value, base) {
                if !include && !target.exists() {
                    continue;
                }
                read_into(&target, Some(path), stack, out)?;
            }
            continue;
        }
        out.properties.push(Property {
            file: file.clone(),
            ..p
        });
    }
    stack.pop();
    Ok(())
}

/// The files an include names: the value as one path, or — when no such file exists and it
/// holds commas — each comma-separated part (commons-configuration 1.10 split it; 2.x does
/// not, and fails on such a line).
fn include_targets(value: &str, base: &Path) -> Vec<PathBuf> {
    let resolve = |v: &str| {
        let p = PathBuf::from(v.trim());
        if p.is_absolute() {
            p
        } else {
            base.join(p)
        }
    };
    let whole = resolve(value);
    if whole.exists() || !value.contains(',') {
        return vec![whole];
    }
    value.split(',').map(resolve).collect()
}

/// Bytes as ISO-8859-1 text: byte `b` is `char::from(b)`.
pub fn latin1(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| char::from(b)).collect()
}

/// Parses the text of a properties file (no includes followed: `include` lines are returned as
/// properties, for [`read_file`] to act on).
pub fn parse(text: &str) -> Result<Read, String> {
    let mut out = Read::default();
    let mut lines = natural_lines(text).into_iter();
    'property: loop {
        let mut logical = String::new();
        let mut start = 0;
        loop {
            let Some((number, line)) = lines.next() else {
                if start != 0 {
                    out.dropped_at_end = Some(start);
                }
                break 'property;
            };
            if is_comment_line(line) {
                continue;
            }
            if start == 0 {
                start = number;
            }
            let line = java_trim(line);
            if trailing_backslashes(line) & 1 == 0 {
                logical.push_str(line);
                break;
            }
            logical.push_str(&line[..line.len() - 1]);
        }
        let (key, value) = split_key_value(&logical);
        let key = unescape_key(java_trim(key)).map_err(|e| format!("line {start}: {e}"))?;
        let value = unescape_value(java_trim(value)).map_err(|e| format!("line {start}: {e}"))?;
        out.properties.push(Property {
            key,
            value,
            line: start,
            file: None,
        });
    }
    Ok(out)
}

/// Java's `String.trim`: every character up to U+0020 at either end.
pub fn java_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c <= ' ')
}

fn is_comment_line(line: &str) -> bool {
    let t = java_trim(line);
    t.is_empty() || t.starts_with('#') || t.starts_with('!')
}

/// Lines split on `\n`, `\r\n` or `\r`, numbered from 1.
fn natural_lines(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let (mut start, mut i, mut number) = (0, 0, 1);
    while i < bytes.len() {
        match bytes[i] {
            b'\n' | b'\r' => {
                out.push((number, &text[start..i]));
                number += 1;
                i += if bytes[i] == b'\r' && bytes.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                start = i;
            }
            _ => i += 1,
        }
    }
    if start < bytes.len() {
        out.push((number, &text[start..]));
    }
    out
}

fn trailing_backslashes(s: &str) -> usize {
    s.bytes().rev().take_while(|&b| b == b'\\').count()
}

/// Java's `\s`: space, tab, newline, vertical tab, form feed, carriage return.
fn is_java_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r')
}

/// The raw key and value of a logical line, as the reader's pattern cuts them:
/// `(([\S&&[^\\=:]]|\\.)*+)(\s*(\s+|[=:])\s*)?(.*)`.
fn split_key_value(line: &str) -> (&str, &str) {
    let mut chars = line.char_indices().peekable();
    let mut key_end = line.len();
    while let Some(&(i, c)) = chars.peek() {
        if c == '\\' {
            chars.next();
            if chars.next().is_none() {
                key_end = i; // a lone backslash at the end cannot be part of the key
                break;
            }
            continue;
        }
        if is_java_space(c) || c == '=' || c == ':' {
            key_end = i;
            break;
        }
        chars.next();
    }
    let key = &line[..key_end];
    let rest = &line[key_end..];
    let after_blanks = rest.trim_start_matches(is_java_space);
    let value = match after_blanks.strip_prefix(['=', ':']) {
        Some(v) => v.trim_start_matches(is_java_space),
        // blanks alone separate (or nothing does: a key with no value)
        None => after_blanks,
    };
    (key, value)
}

/// A value's escapes, as `PropertiesConfiguration.unescapeJava`: `\t \n \r \f \b \uXXXX`, and
/// `\` before one of ``:#=!\'"`` are unescaped; any other backslash is kept with its character.
pub fn unescape_value(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('b') => out.push('\x08'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                if hex.chars().count() < 4 {
                    // Java drops an escape cut short by the end of the value.
                    break;
                }
                out.push(unicode(&hex)?);
            }
            Some(c @ (':' | '#' | '=' | '!' | '\\' | '\'' | '"')) => out.push(c),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    Ok(out)
}

/// A key's escapes, as commons-text's `unescapeJava`: octal, `\uXXXX` (with any number of
/// `u`s), `\b \n \t \f \r \\ \" \'`; any other backslash is dropped.
fn unescape_key(s: &str) -> Result<String, String> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(&next) = chars.get(i) else { break };
        i += 1;
        match next {
            'b' => out.push('\x08'),
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'f' => out.push('\x0c'),
            'r' => out.push('\r'),
            'u' => {
                while chars.get(i) == Some(&'u') {
                    i += 1;
                }
                let hex: String = chars.iter().skip(i).take(4).collect();
                if hex.chars().count() < 4 {
                    return Err(format!("malformed \\uXXXX escape in a key: \\u{hex}"));
                }
                out.push(unicode(&hex)?);
                i += 4;
            }
            '0'..='7' => {
                let mut value = next.to_digit(8).unwrap_or(0);
                let max_digits = if next <= '3' { 3 } else { 2 };
                let mut digits = 1;
                while digits < max_digits {
                    match chars.get(i).and_then(|c| c.to_digit(8)) {
                        Some(d) => {
                            value = value * 8 + d;
                            i += 1;
                            digits += 1;
                        }
                        None => break,
                    }
                }
                out.push(char::from_u32(value).unwrap_or('\u{fffd}'));
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

fn unicode(hex: &str) -> Result<char, String> {
    let code = u32::from_str_radix(hex, 16)
        .ok()
        .filter(|_| hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| format!("malformed \\uXXXX escape: \\u{hex}"))?;
    // A lone surrogate half cannot be a char: keep the replacement character.
    Ok(char::from_u32(code).unwrap_or('\u{fffd}'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(text: &str) -> Vec<(String, String)> {
        parse(text)
            .unwrap()
            .properties
            .into_iter()
            .map(|p| (p.key, p.value))
            .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The reader's rules, each row checked against the real commons-configuration2 reader
    /// (ServerConfiguration.loadConf of BookKeeper 4.17.2 and 4.18.2) when this was written.
    #[test]
    fn the_syntax_as_commons_configuration_reads_it() {
        let cases: &[(&str, &[(&str, &str)])] = &[
            ("a=1", &[("a", "1")]),
            ("a:1", &[("a", "1")]),
            ("a 1", &[("a", "1")]),
            ("ws2    wsval2 more", &[("ws2", "wsval2 more")]),
            ("  a  =  1  ", &[("a", "1")]),
            ("sp3\t=\ttabs\t", &[("sp3", "tabs")]),
            ("sepf\x0cformfeed", &[("sepf", "formfeed")]),
            ("a=", &[("a", "")]),
            ("keyonly", &[("keyonly", "")]),
            ("=novalkey", &[("", "novalkey")]),
            ("# comment\n! other\n\n   \na=1", &[("a", "1")]),
            ("  # indented comment\n\t! too\na=1", &[("a", "1")]),
            ("a=1 # not a comment", &[("a", "1 # not a comment")]),
            ("eqcolon=a:b=c", &[("eqcolon", "a:b=c")]),
            ("a==b", &[("a", "=b")]),
            ("cont=abc\\\n    def\\\n  ghi", &[("cont", "abcdefghi")]),
            (
                "cont_even=abc\\\\\nb=2",
                &[("cont_even", "abc\\"), ("b", "2")],
            ),
            // comment and blank lines inside a continuation are skipped
            ("c1=x\\\n#y\n\nafterc1=1", &[("c1", "xafterc1=1")]),
            // an escaped trailing blank is trimmed away first: the line continues
            ("e=trail\\ \nnext=1", &[("e", "trailnext=1")]),
            ("a=x\\\r\n  y\\\r  z", &[("a", "xyz")]),
            ("k\\=ey=v", &[("k=ey", "v")]),
            ("key\\ with\\ space=v", &[("key with space", "v")]),
            ("key\\:colon=v", &[("key:colon", "v")]),
            ("key\\u0041uni=v", &[("keyAuni", "v")]),
            ("keytrail\\ =v", &[("keytrail", "v")]),
            ("a=\\t\\n\\u0041\\u00e9", &[("a", "\t\nA\u{e9}")]),
            ("a=\\qb", &[("a", "\\qb")]),
            ("a=\\\\b", &[("a", "\\b")]),
            ("a=\\ lead", &[("a", "\\ lead")]),
            (
                "h=\\#x\ni=a\\=b\nj=a\\:b\nq=\\\"q\\'",
                &[("h", "#x"), ("i", "a=b"), ("j", "a:b"), ("q", "\"q'")],
            ),
            ("a=\\u00", &[("a", "")]),
            ("a=1\ra=2", &[("a", "1"), ("a", "2")]),
            ("dirs=/d1, /d2", &[("dirs", "/d1, /d2")]),
            (
                "CaseKey=upper\ncasekey=lower",
                &[("CaseKey", "upper"), ("casekey", "lower")],
            ),
        ];
        for (text, want) in cases {
            assert_eq!(kv(text), pairs(want), "parsing {text:?}");
        }
    }

    #[test]
    fn an_open_continuation_at_the_end_is_dropped_and_reported() {
        let r = parse("a=1\nb=x\\").unwrap();
        assert_eq!(r.properties.len(), 1);
        assert_eq!(r.dropped_at_end, Some(2));
        assert_eq!(parse("a=1\n").unwrap().dropped_at_end, None);
    }

    #[test]
    fn latin1_and_the_byte_order_mark() {
        assert_eq!(latin1("é".as_bytes()), "\u{c3}\u{a9}");
        assert_eq!(latin1(&[0xe9]), "é");
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("bom.conf");
        std::fs::write(&f, b"\xef\xbb\xbfbookiePort=1234\nzkTimeout=5\n").unwrap();
        let r = read_file(&f).unwrap();
        assert!(r.byte_order_mark);
        assert_eq!(r.properties[0].key, "\u{ef}\u{bb}\u{bf}bookiePort");
        assert_eq!(r.properties[1].key, "zkTimeout");
    }

    #[test]
    fn bad_escape_is_an_error_not_a_panic() {
        for text in ["a=\\uzzzz", "\\u00=1", "a=\\u00G1"] {
            let err = parse(text).unwrap_err();
            assert!(err.contains("line 1"), "{err}");
        }
        // Odd input never panics.
        for text in [
            "\\",
            "=",
            ":",
            "\\\n",
            "é=ü",
            "\u{feff}a=1",
            "\r\r\n\n",
            "a\\",
            "\\u",
        ] {
            let _ = parse(text);
        }
    }

    #[test]
    fn includes_are_followed_relative_to_the_including_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("inc")).unwrap();
        std::fs::write(dir.path().join("inc/child.conf"), "b=2\na=from-child\n").unwrap();
        std::fs::write(
            dir.path().join("main.conf"),
            "a=1\nINCLUDE=inc/child.conf\nincludeoptional=nope.conf\nc=3\n",
        )
        .unwrap();
        let r = read_file(&dir.path().join("main.conf")).unwrap();
        let got: Vec<(&str, &str, bool)> = r
            .properties
            .iter()
            .map(|p| (p.key.as_str(), p.value.as_str(), p.file.is_some()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("a", "1", false),
                ("b", "2", true),
                ("a", "from-child", true),
                ("c", "3", false)
            ]
        );
        std::fs::write(dir.path().join("bad.conf"), "include=missing.conf\n").unwrap();
        let err = read_file(&dir.path().join("bad.conf")).unwrap_err();
        assert!(err.contains("missing.conf"), "{err}");
        std::fs::write(dir.path().join("self.conf"), "include=self.conf\n").unwrap();
        let err = read_file(&dir.path().join("self.conf")).unwrap_err();
        assert!(err.contains("cycle"), "{err}");
        // A 4.14-style list of includes.
        std::fs::write(dir.path().join("d.conf"), "d=4\n").unwrap();
        std::fs::write(
            dir.path().join("list.conf"),
            "include=inc/child.conf, d.conf\n",
        )
        .unwrap();
        let r = read_file(&dir.path().join("list.conf")).unwrap();
        assert_eq!(r.properties.len(), 3);
    }
}
