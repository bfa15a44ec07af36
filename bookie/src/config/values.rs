//! The values of a configuration as the Java bookie's getters return them
//! (commons-configuration2 behind `ServerConfiguration`, BookKeeper 4.17.2+):
//!
//! - **Lists.** Every value is split on `,` into trimmed elements, twice (once by the composite
//!   configuration, once by the in-memory one it copies into): `a,,b` is `[a, "", b]`, and a
//!   literal comma survives only behind five or six backslashes. A key given twice is a list
//!   of both values. A scalar getter returns the **first** element: `k=1` then `k=2` reads 1,
//!   and `tlsEnabledProtocols=TLSv1.2,TLSv1.3` reads `TLSv1.2`.
//! - **Interpolation** at get time, applied twice as commons-configuration2 does: `${key}`
//!   (another key's first element), `${env:VAR}`, `${sys:PROP}` (the few Java system
//!   properties a bookie's file could mean, taken from the process), `${file:[charset:]PATH}`,
//!   `${base64Decoder:…}`, `${base64Encoder:…}`. An unknown variable stays as written, as in
//!   Java; another lookup (`date:`, `const:`, `java:` …) is refused with a message; a value
//!   that refers to itself is an error, as Java's getter throws.
//! - **Conversions** as `PropertyConverter`: integers in decimal with an optional sign, or
//!   `0x`/`0b` (lowercase) in hex or binary narrowed to the type's width as Java narrows a
//!   `BigInteger`; doubles with `NaN`, `Infinity`, exponents and an `f`/`d` suffix; booleans
//!   `true/false yes/no on/off y/n t/f 1/0` in any case. An empty value is not a number or a
//!   boolean: Java's getters throw on it, even with a default.

use base64::Engine;

/// Interpolation depth before a chain of `${…}` is taken for a loop.
const MAX_DEPTH: usize = 32;

/// The values of one key: its elements (every occurrence, split and trimmed), where it was
/// set first, and the raw texts as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub elements: Vec<String>,
    /// Where the key was set (first occurrence): "line 12", "line 3 of inc.conf" or
    /// "environment variable BK_key".
    pub origin: String,
    /// Lines of later occurrences (a key given twice), for the warning that says so.
    pub repeated_at: Vec<String>,
    /// The raw value of the first occurrence (for messages and `server_config`).
    pub raw: String,
}

impl Entry {
    /// The value a scalar getter sees before interpolation: the first element.
    pub fn first(&self) -> &str {
        self.elements.first().map_or("", String::as_str)
    }
}

/// Splits a value as `DefaultListDelimiterHandler.splitString(s, trim=true)` does.
pub fn split_once(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut token = String::new();
    let mut escape = false;
    for c in s.chars() {
        if escape {
            if c != ',' && c != '\\' {
                token.push('\\');
            }
            token.push(c);
            escape = false;
        } else if c == ',' {
            out.push(super::properties::java_trim(&token).to_string());
            token.clear();
        } else if c == '\\' {
            escape = true;
        } else {
            token.push(c);
        }
    }
    if escape {
        token.push('\\');
    }
    out.push(super::properties::java_trim(&token).to_string());
    out
}

/// The elements of a value as `ServerConfiguration` holds them: split twice.
pub fn elements(s: &str) -> Vec<String> {
    split_once(s).iter().flat_map(|e| split_once(e)).collect()
}

/// A key's elements as `getStringArray` returns them: each interpolated, and an element that is
/// one `${key}` naming a list standing for that whole list (commons-configuration2).
/// `lookup_list` gives another key's elements (uninterpolated).
pub fn interpolated_elements(
    elements: &[String],
    lookup_list: &dyn Fn(&str) -> Option<Vec<String>>,
) -> Result<Vec<String>, String> {
    let first = |k: &str| lookup_list(k).and_then(|l| l.into_iter().next());
    let mut out = Vec::with_capacity(elements.len());
    for e in elements {
        let whole = e
            .strip_prefix("${")
            .and_then(|r| r.strip_suffix('}'))
            .filter(|name| !name.contains(['$', '{', '}', ':']));
        match whole.and_then(lookup_list).filter(|l| l.len() > 1) {
            Some(list) => {
                for x in &list {
                    out.push(interpolate(x, &first)?);
                }
            }
            None => out.push(interpolate(e, &first)?),
        }
    }
    Ok(out)
}

/// Resolves `${…}` in `s`: twice, as commons-configuration2's conversion handler does.
/// `lookup_key` gives another key's first element (uninterpolated), or `None`.
pub fn interpolate(s: &str, lookup_key: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let once = substitute(s, lookup_key, 0)?;
    substitute(&once, lookup_key, 0)
}

fn substitute(
    s: &str,
    lookup_key: &dyn Fn(&str) -> Option<String>,
    depth: usize,
) -> Result<String, String> {
    if depth > MAX_DEPTH {
        return Err("infinite loop in property interpolation".into());
    }
    if !s.contains("${") {
        return Ok(s.to_string());
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("${") {
        // `$${x}` escapes: it stands for a literal `${x}` (for this pass).
        if at > 0 && rest.as_bytes()[at - 1] == b'$' {
            out.push_str(&rest[..at - 1]);
            let end = rest[at..].find('}').map_or(rest.len(), |e| at + e + 1);
            out.push_str(&rest[at..end]);
            rest = &rest[end..];
            continue;
        }
        out.push_str(&rest[..at]);
        let Some(close) = rest[at + 2..].find('}') else {
            out.push_str(&rest[at..]);
            rest = "";
            break;
        };
        let name = &rest[at + 2..at + 2 + close];
        let whole = &rest[at..at + 3 + close];
        match resolve(name, lookup_key)? {
            Some(v) => out.push_str(&substitute(&v, lookup_key, depth + 1)?),
            None => out.push_str(whole),
        }
        rest = &rest[at + 3 + close..];
    }
    out.push_str(rest);
    Ok(out)
}

/// One variable: `Ok(None)` leaves it as written (Java's behaviour for an unknown one).
fn resolve(
    name: &str,
    lookup_key: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<String>, String> {
    let Some((prefix, arg)) = name.split_once(':') else {
        return Ok(lookup_key(name));
    };
    Ok(match prefix {
        "env" => std::env::var(arg).ok(),
        "sys" => system_property(arg),
        "file" => {
            // `${file:UTF-8:/path}` or `${file:/path}`
            let path = match arg.split_once(':') {
                Some((charset, path)) if !charset.contains('/') => path,
                _ => arg,
            };
            let bytes = std::fs::read(path)
                .map_err(|e| format!("${{file:{arg}}}: cannot read {path}: {e}"))?;
            Some(String::from_utf8_lossy(&bytes).into_owned())
        }
        "base64Decoder" => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(arg)
                .map_err(|e| format!("${{base64Decoder:{arg}}}: {e}"))?;
            Some(String::from_utf8_lossy(&bytes).into_owned())
        }
        "base64Encoder" => Some(base64::engine::general_purpose::STANDARD.encode(arg)),
        _ if prefix.chars().all(|c| c.is_ascii_alphanumeric()) && !prefix.is_empty() => {
            return Err(format!(
                "${{{prefix}:…}} interpolation is not supported by this bookie (supported: \
                 another key, env:, sys:, file:, base64Decoder:, base64Encoder:)"
            ))
        }
        // Not a lookup prefix (a key with a colon in its name, say): a key.
        _ => lookup_key(name),
    })
}

/// The Java system properties a bookie's configuration could refer to, from the process.
fn system_property(name: &str) -> Option<String> {
    match name {
        "user.home" => std::env::var("HOME").ok(),
        "user.name" => std::env::var("USER").ok().or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.name)
        }),
        "user.dir" => std::env::current_dir()
            .ok()
            .map(|d| d.display().to_string()),
        "java.io.tmpdir" => Some("/tmp".into()),
        "os.name" => Some("Linux".into()),
        "file.separator" => Some("/".into()),
        "path.separator" => Some(":".into()),
        "line.separator" => Some("\n".into()),
        _ => None,
    }
}

/// A Java `int` as `PropertyConverter.toInteger` reads it.
pub fn java_int(s: &str) -> Result<i32, String> {
    match radix_prefixed(s)? {
        Some(wide) => Ok(wide as i32), // narrowed as BigInteger.intValue()
        None => decimal(s, i32::MIN as i128, i32::MAX as i128).map(|n| n as i32),
    }
}

/// A Java `long` as `PropertyConverter.toLong` reads it.
pub fn java_long(s: &str) -> Result<i64, String> {
    match radix_prefixed(s)? {
        Some(wide) => Ok(wide as i64), // narrowed as BigInteger.longValue()
        None => decimal(s, i64::MIN as i128, i64::MAX as i128).map(|n| n as i64),
    }
}

/// `0x…` or `0b…` (lowercase prefix only, as Java): the value's low 128 bits.
fn radix_prefixed(s: &str) -> Result<Option<i128>, String> {
    let (digits, radix) = match (s.strip_prefix("0x"), s.strip_prefix("0b")) {
        (Some(d), _) => (d, 16),
        (_, Some(d)) => (d, 2),
        _ => return Ok(None),
    };
    let (negative, digits) = match digits.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, digits.strip_prefix('+').unwrap_or(digits)),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err("not a number".into());
    }
    // Keep the low 128 bits (wrapping), then narrow: what BigInteger.intValue/longValue keep.
    let mut v: u128 = 0;
    for c in digits.chars() {
        v = v
            .wrapping_mul(radix as u128)
            .wrapping_add(c.to_digit(radix).unwrap_or(0) as u128);
    }
    let v = v as i128;
    Ok(Some(if negative { v.wrapping_neg() } else { v }))
}

/// `Integer.valueOf` / `Long.valueOf`: an optional sign and decimal digits, in range.
fn decimal(s: &str, min: i128, max: i128) -> Result<i128, String> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(if s.is_empty() {
            "empty".into()
        } else {
            "not a whole number".into()
        });
    }
    let n: i128 = digits
        .parse()
        .map_err(|_| "out of range".to_string())
        .map(|n: i128| if s.starts_with('-') { -n } else { n })?;
    if n < min || n > max {
        return Err(format!("out of range ({min}..={max})"));
    }
    Ok(n)
}

/// A Java `double` as `PropertyConverter.toDouble` reads it (`Double.valueOf`, after the
/// `0x`/`0b` integer forms).
pub fn java_double(s: &str) -> Result<f64, String> {
    if let Some(wide) = radix_prefixed(s)? {
        return Ok(wide as f64);
    }
    let body = s
        .strip_suffix(['f', 'F', 'd', 'D'])
        .filter(|b| !b.is_empty())
        .unwrap_or(s);
    let (negative, unsigned) = match body.strip_prefix('-') {
        Some(u) => (true, u),
        None => (false, body.strip_prefix('+').unwrap_or(body)),
    };
    let sign = if negative { -1.0 } else { 1.0 };
    match unsigned {
        "NaN" if body == s => return Ok(f64::NAN),
        "Infinity" if body == s => return Ok(sign * f64::INFINITY),
        _ => {}
    }
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(i) => (&unsigned[..i], Some(&unsigned[i + 1..])),
        None => (unsigned, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits_ok = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = digits_ok(int) && digits_ok(frac) && !(int.is_empty() && frac.is_empty());
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && digits_ok(e)
    });
    if !mantissa_ok || !exponent_ok {
        return Err(if s.is_empty() {
            "empty".into()
        } else {
            "not a number".into()
        });
    }
    unsigned
        .parse::<f64>()
        .map(|f| sign * f)
        .map_err(|_| "not a number".into())
}

/// A Java boolean as commons-configuration2 reads it (`BooleanUtils.toBooleanObject`, and
/// `1`/`0`).
pub fn java_bool(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" | "y" | "t" | "1" => Ok(true),
        "false" | "no" | "off" | "n" | "f" | "0" => Ok(false),
        "" => Err("empty".into()),
        _ => Err("expected true or false".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_split_twice_and_trimmed_as_commons_configuration2() {
        let cases: &[(&str, &[&str])] = &[
            ("a,b,c", &["a", "b", "c"]),
            (" a , b ,c ", &["a", "b", "c"]),
            ("a,,b", &["a", "", "b"]),
            ("a,", &["a", ""]),
            (",a", &["", "a"]),
            (",", &["", ""]),
            ("", &[""]),
            ("a;b c", &["a;b c"]),
            ("a\\,b", &["a", "b"]),
            // three backslashes (five or six in the file, before the reader unescapes): the
            // only literal comma; two split it and keep one
            ("a\\\\\\,b", &["a,b"]),
            ("a\\\\,b", &["a\\", "b"]),
            ("a\\\\b", &["a\\b"]),
        ];
        for (value, want) in cases {
            assert_eq!(elements(value), *want, "splitting {value:?}");
        }
    }

    fn keys(k: &str) -> Option<String> {
        match k {
            "sp2" => Some("leading".into()),
            "ref" => Some("${sp2}/x".into()),
            "loop" => Some("${loop}".into()),
            _ => None,
        }
    }

    #[test]
    fn a_variable_naming_a_list_is_the_list() {
        let lists = |k: &str| match k {
            "list1" => Some(vec!["a".to_string(), "b".to_string(), "c".to_string()]),
            "one" => Some(vec!["x".to_string()]),
            _ => None,
        };
        let el = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            interpolated_elements(&el(&["${list1}"]), &lists).unwrap(),
            el(&["a", "b", "c"])
        );
        assert_eq!(
            interpolated_elements(&el(&["p/${list1}"]), &lists).unwrap(),
            el(&["p/a"])
        );
        assert_eq!(
            interpolated_elements(&el(&["${one}", "z"]), &lists).unwrap(),
            el(&["x", "z"])
        );
    }

    #[test]
    fn interpolation() {
        let i = |s: &str| interpolate(s, &keys);
        assert_eq!(i("${sp2}").unwrap(), "leading");
        assert_eq!(i("a-${ref}-b").unwrap(), "a-leading/x-b");
        assert_eq!(i("${nope}").unwrap(), "${nope}");
        assert_eq!(
            i("${sys:no.such.property}").unwrap(),
            "${sys:no.such.property}"
        );
        assert_eq!(i("${sys:java.io.tmpdir}").unwrap(), "/tmp");
        assert_eq!(
            i("${env:NO_SUCH_VAR_FOR_TEST_1}").unwrap(),
            "${env:NO_SUCH_VAR_FOR_TEST_1}"
        );
        std::env::set_var("BOOKIE_VALUES_TEST_VAR", "8123");
        assert_eq!(i("${env:BOOKIE_VALUES_TEST_VAR}").unwrap(), "8123");
        assert_eq!(i("${base64Decoder:SGVsbG8=}").unwrap(), "Hello");
        assert_eq!(i("${base64Encoder:Hello}").unwrap(), "SGVsbG8=");
        // commons-configuration2 interpolates twice: the escape is undone
        assert_eq!(i("$${sp2}").unwrap(), "leading");
        assert_eq!(i("no vars").unwrap(), "no vars");
        assert_eq!(i("${unclosed").unwrap(), "${unclosed");
        assert!(i("${loop}").unwrap_err().contains("infinite loop"));
        assert!(i("${date:yyyy}").unwrap_err().contains("date:"));
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("secret");
        std::fs::write(&f, "s3cret").unwrap();
        assert_eq!(
            i(&format!("${{file:UTF-8:{}}}", f.display())).unwrap(),
            "s3cret"
        );
        assert_eq!(i(&format!("${{file:{}}}", f.display())).unwrap(), "s3cret");
    }

    #[test]
    fn integers_as_property_converter() {
        for (s, want) in [
            ("42", 42),
            ("+42", 42),
            ("-42", -42),
            ("010", 10),
            ("0x1F", 31),
            ("0b101", 5),
        ] {
            assert_eq!(java_int(s), Ok(want), "{s}");
        }
        // out-of-range hex narrows as BigInteger.intValue()
        assert_eq!(java_int("0x1FFFFFFFF"), Ok(-1));
        assert_eq!(java_long("0x1FFFFFFFF"), Ok(8589934591));
        assert_eq!(java_long("0xFFFFFFFFFFFFFFFFFF"), Ok(-1));
        assert_eq!(java_long("2147483648"), Ok(2147483648));
        for bad in [
            "2147483648",
            "0X1F",
            "-0x1F",
            "1_000",
            "1e3",
            "1.0",
            "42L",
            "0o17",
            "",
            " 42",
            "+",
        ] {
            assert!(java_int(bad).is_err(), "{bad:?}");
        }
        assert!(java_long("9223372036854775808").is_err());
        assert_eq!(java_int(""), Err("empty".to_string()));
    }

    #[test]
    fn doubles_as_double_value_of() {
        for (s, want) in [
            ("1e3", 1000.0),
            ("0.5", 0.5),
            (".5", 0.5),
            ("5.", 5.0),
            ("+1.5", 1.5),
            ("1.5f", 1.5),
            ("2d", 2.0),
            ("-2.5E-3", -0.0025),
            ("0x10", 16.0),
            ("Infinity", f64::INFINITY),
            ("-Infinity", f64::NEG_INFINITY),
        ] {
            assert_eq!(java_double(s), Ok(want), "{s}");
        }
        assert!(java_double("NaN").unwrap().is_nan());
        for bad in ["", "0x1p3", "inf", "nan", "1e", ".", "e5", "1.5ff", "abc"] {
            assert!(java_double(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn booleans_as_commons_configuration2() {
        for t in [
            "true", "TRUE", "tRuE", "yes", "YES", "on", "On", "y", "Y", "t", "T", "1",
        ] {
            assert_eq!(java_bool(t), Ok(true), "{t}");
        }
        for f in ["false", "no", "off", "oFf", "n", "N", "f", "F", "0"] {
            assert_eq!(java_bool(f), Ok(false), "{f}");
        }
        for bad in ["", "01", "+1", "-1", "2", "enabled", "truee"] {
            assert!(java_bool(bad).is_err(), "{bad:?}");
        }
    }
}
