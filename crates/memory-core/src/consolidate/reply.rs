//! Lenient extraction of the JSON object in a model's reply, and the typed
//! items with the per-consolidation caps applied.

use serde_json::{Map, Value};

/// Finds the JSON object in `reply`: the whole text, the inside of a code
/// fence, or the span from the first `{` to the last `}`, in that order.
/// Anything that does not parse to a JSON object is an error.
pub(crate) fn extract_object(reply: &str) -> Result<Map<String, Value>, String> {
    let trimmed = reply.trim();
    let mut candidates: Vec<&str> = vec![trimmed];
    if let Some(fenced) = fenced_block(trimmed) {
        candidates.push(fenced);
    }
    if let (Some(start), Some(end)) = (trimmed.find('{'), trimmed.rfind('}'))
        && start < end
    {
        candidates.push(&trimmed[start..=end]);
    }
    let mut last_error = String::from("the reply is empty");
    for candidate in candidates {
        match serde_json::from_str::<Value>(candidate) {
            Ok(Value::Object(object)) => return Ok(object),
            Ok(other) => last_error = format!("the reply is JSON but not an object ({})", kind(&other)),
            Err(error) => last_error = format!("the reply is not valid JSON: {error}"),
        }
    }
    Err(last_error)
}

fn fenced_block(text: &str) -> Option<&str> {
    let start = text.find("```")?;
    let after = &text[start + 3..];
    let body_start = after.find('\n')? + 1;
    let body = &after[body_start..];
    let end = body.find("```")?;
    Some(body[..end].trim())
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The array under `key`, cut to `cap` items; returns the kept items and
/// how many were dropped. A missing or null key is an empty array; any
/// other non-array is an error.
pub(crate) fn capped_array(object: &Map<String, Value>, key: &str, cap: usize) -> Result<(Vec<Value>, usize), String> {
    match object.get(key) {
        None | Some(Value::Null) => Ok((Vec::new(), 0)),
        Some(Value::Array(items)) => {
            let dropped = items.len().saturating_sub(cap);
            Ok((items.iter().take(cap).cloned().collect(), dropped))
        }
        Some(other) => Err(format!("\"{key}\" must be an array, found {}", kind(other))),
    }
}

/// The string under `key`; missing, null or blank is `None`.
pub(crate) fn optional_text(object: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if text.trim().is_empty() => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(format!("\"{key}\" must be a string, found {}", kind(other))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_are_found_in_fences_and_prose() {
        let plain = extract_object(r#"{"history": "x"}"#).unwrap();
        assert_eq!(plain["history"], json!("x"));
        let fenced = extract_object("Here you go:\n```json\n{\"semantic\": []}\n```\nDone.").unwrap();
        assert!(fenced.contains_key("semantic"));
        let prose = extract_object("Sure! {\"lessons\": [{\"rule\": \"a {b}\"}]} hope that helps").unwrap();
        assert_eq!(prose["lessons"][0]["rule"], json!("a {b}"));
    }

    #[test]
    fn anything_else_is_refused() {
        for reply in ["", "no json here", "{\"semantic\": [", "[1, 2]", "```json\n{oops}\n```", "\"text\""] {
            assert!(extract_object(reply).is_err(), "{reply:?}");
        }
    }

    #[test]
    fn arrays_are_capped_and_types_checked() {
        let object = extract_object(r#"{"a": [1, 2, 3], "b": null, "c": "x", "d": " "}"#).unwrap();
        assert_eq!(capped_array(&object, "a", 2).unwrap(), (vec![json!(1), json!(2)], 1));
        assert_eq!(capped_array(&object, "b", 2).unwrap(), (vec![], 0));
        assert_eq!(capped_array(&object, "missing", 2).unwrap(), (vec![], 0));
        assert!(capped_array(&object, "c", 2).is_err());
        assert_eq!(optional_text(&object, "c").unwrap(), Some("x".to_owned()));
        assert_eq!(optional_text(&object, "d").unwrap(), None);
        assert!(optional_text(&object, "a").is_err());
    }
}
