//! What a value standing where a credential goes looks like when it is not
//! one: a placeholder (`<token>`, `your-api-key-here`, `xxxx`, a name that
//! only names itself) or code (`os.environ[...]`, `config.token`, a call).
//! Shared by the provider rules (`secrets.rs`) and the keyed assignments
//! (`assignment.rs`).

pub(crate) fn is_placeholder(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    let all_same = |c: u8| lower.bytes().all(|b| b == c);
    lower.starts_with("[redacted")
        || all_same(b'x')
        || all_same(b'*')
        || all_same(b'.')
        || lower.starts_with('<') && lower.ends_with('>')
        || lower.starts_with("${")
        || lower.starts_with('$') && lower[1..].bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        || lower.starts_with('%') && lower.ends_with('%')
        || lower.starts_with("{{")
        || lower.starts_with("your")
        || lower.contains("xxxx")
        || lower.contains("****")
        || lower.contains("placeholder")
        || lower.contains("changeme")
        || lower.contains("change_me")
        || lower.contains("change-me")
        || lower.contains("replace_me")
        || lower.contains("replaceme")
        || lower.contains("replace-me")
        || lower.contains("example")
        || lower.contains("your_")
        || lower.contains("your-")
        || lower.ends_with("_here")
        || lower.ends_with("-here")
        || lower.starts_with("insert")
        || lower.starts_with("enter_")
        || lower.starts_with("enter-")
        || lower.contains("redacted")
        || lower.starts_with("{%")
        || names_itself(&lower)
        || matches!(
            lower.as_str(),
            "example"
                | "passwd"
                | "pass"
                | "apikey"
                | "api_key"
                | "key"
                | "test"
                | "testing"
                | "foo"
                | "bar"
                | "foobar"
                | "empty"
                | "n/a"
                | "default"
                | "hidden"
                | "masked"
                | "value"
                | "todo"
                | "fixme"
                | "tbd"
                | "secret_key"
                | "private_key"
                | "access_token"
                | "dummy"
                | "redacted"
                | "null"
                | "none"
                | "nil"
                | "true"
                | "false"
                | "undefined"
                | "string"
                | "required"
                | "optional"
                | "password"
                | "secret"
                | "token"
                | "notset"
                | "unset"
        )
}

/// A value that only names what belongs there: lower-case words joined by
/// `-`, `_` or `.`, one of them a credential word (`my-anthropic-api-key`,
/// `super-secret-token`, `db.password`). Documentation writes these where a
/// real value goes; a real secret has digits, capitals or random letters.
fn names_itself(lower: &str) -> bool {
    let mut words = lower.split(['-', '_', '.']);
    lower.bytes().all(|b| b.is_ascii_lowercase() || matches!(b, b'-' | b'_' | b'.'))
        && lower.bytes().any(|b| matches!(b, b'-' | b'_' | b'.'))
        && words.any(|word| {
            matches!(
                word,
                "key" | "apikey" | "token" | "secret" | "password" | "passwd" | "pass" | "credential" | "credentials"
            )
        })
}

pub(crate) fn looks_like_code(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    value.contains('(')
        || value.contains(')')
        || value.starts_with("self.")
        || value.starts_with("this.")
        || lower.starts_with("os.environ")
        || lower.starts_with("process.env")
        || lower.starts_with("env.")
        || lower.starts_with("settings.")
        || lower.starts_with("config.")
        || lower.starts_with("http://")
        || lower.starts_with("https://")
}
