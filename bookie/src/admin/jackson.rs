//! JSON as the Java bookie's admin server prints it: Jackson's default pretty printer
//! (`writerWithDefaultPrettyPrinter`): objects one field a line, indented by two spaces, with
//! `" : "` between name and value; arrays on one line as `[ a, b ]`; empty ones as `{ }` and
//! `[ ]`. Scripts that parse Java's answers take ours alike; a test compares them byte for byte.

use serde_json::Value;

pub fn pretty(v: &Value) -> String {
    pretty_json(&Json::from(v.clone()))
}

/// An object whose fields keep the given order (Java's LinkedHashMap order).
pub fn pretty_object(fields: &[(String, Value)]) -> String {
    let fields = fields
        .iter()
        .map(|(k, v)| (k.clone(), Json::Value(v.clone())))
        .collect();
    pretty_json(&Json::Object(fields))
}

/// A JSON value whose objects, at any depth, keep the order their fields were given in (a
/// Java POJO's declaration order, a LinkedHashMap's insertion order).
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Object(Vec<(String, Json)>),
    Array(Vec<Json>),
    Value(Value),
}

/// A `serde_json` value: its objects in their map's order, its scalars as they are.
impl From<Value> for Json {
    fn from(v: Value) -> Json {
        match v {
            Value::Object(m) => Json::Object(m.into_iter().map(|(k, v)| (k, v.into())).collect()),
            Value::Array(a) => Json::Array(a.into_iter().map(Json::from).collect()),
            scalar => Json::Value(scalar),
        }
    }
}

pub fn pretty_json(j: &Json) -> String {
    let mut out = String::new();
    write_json(&mut out, j, 0);
    out
}

fn write_json(out: &mut String, j: &Json, level: usize) {
    match j {
        Json::Object(f) if f.is_empty() => out.push_str("{ }"),
        Json::Object(fields) => {
            out.push_str("{\n");
            for (i, (k, v)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                indent(out, level + 1);
                string(out, k);
                out.push_str(" : ");
                write_json(out, v, level + 1);
            }
            out.push('\n');
            indent(out, level);
            out.push('}');
        }
        Json::Array(a) if a.is_empty() => out.push_str("[ ]"),
        Json::Array(a) => {
            out.push_str("[ ");
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_json(out, v, level);
            }
            out.push_str(" ]");
        }
        Json::Value(v @ (Value::Object(_) | Value::Array(_))) => {
            write_json(out, &Json::from(v.clone()), level)
        }
        Json::Value(v) => write_scalar(out, v),
    }
}

/// A string as Jackson quotes it: `"` and `\\` escaped, the five short escapes (`\\b \\t \\n
/// \\f \\r`), other control characters as `\\u00XX` in upper-case hex; everything else raw.
fn string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn indent(out: &mut String, level: usize) {
    for _ in 0..level {
        out.push_str("  ");
    }
}

/// A scalar; objects and arrays reach [`write_json`] as [`Json`].
fn write_scalar(out: &mut String, v: &Value) {
    match v {
        Value::String(v) => string(out, v),
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Outputs of Jackson 2.17's default pretty printer for these values.
    #[test]
    fn as_jackson_prints() {
        assert_eq!(
            pretty(&serde_json::json!({"enabled": true})),
            "{\n  \"enabled\" : true\n}"
        );
        assert_eq!(pretty(&serde_json::json!([1, 2, 3])), "[ 1, 2, 3 ]");
        assert_eq!(pretty(&serde_json::json!([])), "[ ]");
        assert_eq!(pretty(&serde_json::json!({})), "{ }");
        let mut m = serde_json::Map::new();
        m.insert("1".into(), serde_json::json!(["10.0.0.5:3181"]));
        m.insert("3".into(), serde_json::json!([]));
        assert_eq!(
            pretty(&Value::Object(m)),
            "{\n  \"1\" : [ \"10.0.0.5:3181\" ],\n  \"3\" : [ ]\n}"
        );
        assert_eq!(
            pretty(&serde_json::json!("a\"\\\u{1}\n\u{1f}é")),
            "\"a\\\"\\\\\\u0001\\n\\u001Fé\""
        );
        let nested = Json::Object(vec![
            ("z".into(), Json::Value(1.into())),
            (
                "a".into(),
                Json::Object(vec![("y".into(), Json::Value(true.into()))]),
            ),
        ]);
        assert_eq!(
            pretty_json(&nested),
            "{\n  \"z\" : 1,\n  \"a\" : {\n    \"y\" : true\n  }\n}"
        );
        assert_eq!(
            pretty(&serde_json::json!({"a": {"b": 1}})),
            "{\n  \"a\" : {\n    \"b\" : 1\n  }\n}"
        );
    }
}
