//! Protobuf text format (what `TextFormat` prints and parses): `name: value`, `name { ... }`
//! (or `< ... >`), `#` comments, strings in either quote with C escapes, adjacent strings
//! concatenated.

use crate::error::{MetaError, Result};

fn bad(what: impl std::fmt::Display) -> MetaError {
    MetaError::BadData(format!("protobuf text: {what}"))
}

pub enum Value {
    /// A number or an enum name.
    Scalar(String),
    /// A string or bytes value (escapes resolved).
    Bytes(Vec<u8>),
    Message(Vec<Field>),
}

pub struct Field {
    pub name: String,
    pub value: Value,
}

pub fn parse(text: &str) -> Result<Vec<Field>> {
    let mut p = Parser {
        b: text.as_bytes(),
        i: 0,
        depth: 0,
    };
    let fields = p.message(None)?;
    Ok(fields)
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
    depth: u32,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while let Some(&c) = self.b.get(self.i) {
            if c.is_ascii_whitespace() {
                self.i += 1;
            } else if c == b'#' {
                while self.b.get(self.i).is_some_and(|&c| c != b'\n') {
                    self.i += 1;
                }
            } else {
                break;
            }
        }
    }

    fn word(&mut self) -> &str {
        let start = self.i;
        while self.b.get(self.i).is_some_and(|&c| {
            c.is_ascii_alphanumeric() || c == b'_' || c == b'-' || c == b'+' || c == b'.'
        }) {
            self.i += 1;
        }
        // Only ASCII was taken.
        std::str::from_utf8(&self.b[start..self.i]).unwrap_or("")
    }

    /// Fields until `close` (or the end of the text at the top).
    fn message(&mut self, close: Option<u8>) -> Result<Vec<Field>> {
        self.depth += 1;
        if self.depth > 100 {
            return Err(bad("text format nested too deeply"));
        }
        let mut out = Vec::new();
        loop {
            self.skip_ws();
            match (self.b.get(self.i), close) {
                (None, None) => break,
                (None, Some(_)) => return Err(bad("text format: unterminated message")),
                (Some(&c), Some(cl)) if c == cl => {
                    self.i += 1;
                    break;
                }
                _ => {}
            }
            let name = self.word().to_string();
            if name.is_empty() {
                return Err(bad(format!(
                    "text format: unexpected {:?} at byte {}",
                    self.b[self.i] as char, self.i
                )));
            }
            self.skip_ws();
            let colon = self.b.get(self.i) == Some(&b':');
            if colon {
                self.i += 1;
                self.skip_ws();
            }
            let value = match self.b.get(self.i) {
                Some(b'{') => {
                    self.i += 1;
                    Value::Message(self.message(Some(b'}'))?)
                }
                Some(b'<') => {
                    self.i += 1;
                    Value::Message(self.message(Some(b'>'))?)
                }
                _ if !colon => return Err(bad(format!("text format: field {name} has no ':'"))),
                Some(b'"') | Some(b'\'') => Value::Bytes(self.strings()?),
                _ => {
                    let w = self.word().to_string();
                    if w.is_empty() {
                        return Err(bad(format!("text format: field {name} has no value")));
                    }
                    Value::Scalar(w)
                }
            };
            out.push(Field { name, value });
            self.skip_ws();
            if matches!(self.b.get(self.i), Some(b',') | Some(b';')) {
                self.i += 1;
            }
        }
        self.depth -= 1;
        Ok(out)
    }

    /// One or more adjacent quoted strings.
    fn strings(&mut self) -> Result<Vec<u8>> {
        let mut v = Vec::new();
        while let Some(&q @ (b'"' | b'\'')) = self.b.get(self.i) {
            self.i += 1;
            loop {
                let Some(&c) = self.b.get(self.i) else {
                    return Err(bad("text format: unterminated string"));
                };
                self.i += 1;
                if c == q {
                    break;
                }
                if c == b'\n' {
                    return Err(bad("text format: newline in a string"));
                }
                if c != b'\\' {
                    v.push(c);
                    continue;
                }
                let Some(&e) = self.b.get(self.i) else {
                    return Err(bad("text format: dangling escape"));
                };
                self.i += 1;
                match e {
                    b'a' => v.push(0x07),
                    b'b' => v.push(0x08),
                    b'f' => v.push(0x0c),
                    b'n' => v.push(b'\n'),
                    b'r' => v.push(b'\r'),
                    b't' => v.push(b'\t'),
                    b'v' => v.push(0x0b),
                    b'\\' | b'\'' | b'"' | b'?' => v.push(e),
                    b'0'..=b'7' => {
                        let mut n = u32::from(e - b'0');
                        for _ in 0..2 {
                            match self.b.get(self.i) {
                                Some(&d @ b'0'..=b'7') => {
                                    n = n * 8 + u32::from(d - b'0');
                                    self.i += 1;
                                }
                                _ => break,
                            }
                        }
                        v.push(
                            u8::try_from(n)
                                .map_err(|_| bad("text format: octal escape out of range"))?,
                        );
                    }
                    b'x' => {
                        let mut n = 0u32;
                        let mut digits = 0;
                        while digits < 2 {
                            match self.b.get(self.i).and_then(|d| (*d as char).to_digit(16)) {
                                Some(d) => {
                                    n = n * 16 + d;
                                    self.i += 1;
                                    digits += 1;
                                }
                                None => break,
                            }
                        }
                        if digits == 0 {
                            return Err(bad("text format: empty hex escape"));
                        }
                        v.push(n as u8);
                    }
                    _ => return Err(bad(format!("text format: invalid escape \\{}", e as char))),
                }
            }
            self.skip_ws();
        }
        Ok(v)
    }
}

/// Writes the text format as protobuf's `TextFormat` prints it: one `name: value` per line,
/// a nested message as `name {` … `}` indented by two spaces, strings in double quotes with
/// `\n \r \t \" \' \\` escaped and any other byte outside 0x20..0x7e as three octal digits
/// (what LightProto, BookKeeper 4.18's codec, prints; protobuf-java prints BEL and VT as `\a`
/// and `\v`, which every reader takes alike).
#[derive(Default)]
pub struct Writer {
    pub out: String,
    indent: usize,
}

impl Writer {
    pub fn new() -> Writer {
        Writer::default()
    }

    fn pad(&mut self) {
        for _ in 0..self.indent {
            self.out.push_str("  ");
        }
    }

    /// A number or an enum name.
    pub fn scalar(&mut self, name: &str, value: impl std::fmt::Display) {
        self.pad();
        self.out.push_str(&format!("{name}: {value}\n"));
    }

    pub fn string(&mut self, name: &str, value: &[u8]) {
        self.pad();
        self.out.push_str(name);
        self.out.push_str(": \"");
        escape_into(&mut self.out, value);
        self.out.push_str("\"\n");
    }

    pub fn begin(&mut self, name: &str) {
        self.pad();
        self.out.push_str(name);
        self.out.push_str(" {\n");
        self.indent += 1;
    }

    pub fn end(&mut self) {
        debug_assert!(self.indent > 0, "end without begin");
        self.indent -= 1;
        self.pad();
        self.out.push_str("}\n");
    }
}

/// `TextFormat.escapeBytes`.
pub fn escape_into(out: &mut String, value: &[u8]) {
    for &b in value {
        match b {
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b'"' => out.push_str("\\\""),
            b'\'' => out.push_str("\\'"),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_output_parses_back() {
        let mut w = Writer::new();
        w.scalar("quorumSize", 2);
        w.begin("segment");
        w.string("ensembleMember", b"a:1");
        w.scalar("firstEntryId", 0);
        w.end();
        w.string("password", b"\x00\x01\xff\"\\\n'\x07");
        assert_eq!(
            w.out,
            "quorumSize: 2\nsegment {\n  ensembleMember: \"a:1\"\n  firstEntryId: 0\n}\n\
             password: \"\\000\\001\\377\\\"\\\\\\n\\'\\007\"\n"
        );
        let fields = parse(&w.out).unwrap();
        assert_eq!(fields.len(), 3);
        match &fields[2].value {
            Value::Bytes(b) => assert_eq!(b, b"\x00\x01\xff\"\\\n'\x07"),
            _ => panic!("password is bytes"),
        }
    }
}
