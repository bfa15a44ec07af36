//! JSON as the Java bookie's admin server prints it: Jackson's default pretty printer
//! (`writerWithDefaultPrettyPrinter`): objects one field a line, indented by two spaces, with
//! `" : "` between name and value; arrays on one line as `[ a, b ]`; empty ones as `{ }` and
//! `[ ]`. Scripts that parse Java's answers take ours alike; a test compares them byte for byte.

use serde_json::Value;

pub fn pretty(v: &Value) -> String {
    let mut out = String::new();
    write(&mut out, v, 0);
    out
}

/// An object whose fields keep the given order (Java's LinkedHashMap order).
pub fn pretty_object(fields: &[(String, Value)]) -> String {
    if fields.is_empty() {
        return "{ }".into();
    }
    let mut out = String::from("{\n");
    for (i, (k, v)) in fields.iter().enumerate() {
        if i > 0 {
            out.push_str(",\n");
        }
        indent(&mut out, 1);
        out.push_str(&Value::String(k.clone()).to_string());
        out.push_str(" : ");
        write(&mut out, v, 1);
    }
    out.push_str("\n}");
    out
}

fn indent(out: &mut String, level: usize) {
    for _ in 0..level {
        out.push_str("  ");
    }
}

fn write(out: &mut String, v: &Value, level: usize) {
    match v {
        Value::Object(m) if m.is_empty() => out.push_str("{ }"),
        Value::Object(m) => {
            out.push_str("{\n");
            for (i, (k, v)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                indent(out, level + 1);
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(" : ");
                write(out, v, level + 1);
            }
            out.push('\n');
            indent(out, level);
            out.push('}');
        }
        Value::Array(a) if a.is_empty() => out.push_str("[ ]"),
        Value::Array(a) => {
            out.push_str("[ ");
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write(out, v, level);
            }
            out.push_str(" ]");
        }
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
            pretty(&serde_json::json!({"a": {"b": 1}})),
            "{\n  \"a\" : {\n    \"b\" : 1\n  }\n}"
        );
    }
}
