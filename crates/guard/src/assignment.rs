//! Generic `key = value` credentials: does a key name a secret, and does the
//! value assigned to it look like one?
//!
//! A key names a secret when one of its words is a credential word
//! (`password`, `passwd`, `secret`, `token`, `api_key`, `private_key`,
//! `db_pass`, ...) and no word after it turns the name into metadata about
//! the secret (`password_hint`, `token_ttl`, `api_key_header`). Keys that
//! only hint at a credential (`key`, `auth`, a provider's name) need a value
//! that is token-shaped on its own.
//!
//! A value counts when it is not a placeholder (`${PASSWORD}`,
//! `<your-password>`, `changeme`, `****`), not code (`os.environ["PW"]`,
//! `getpass()`, `config.db.password`, an unquoted identifier) and, by its
//! shape, could be typed as a secret: a quoted literal of six or more
//! characters, an unquoted value mixing character classes, a token with
//! enough entropy, or a quoted passphrase of a few words that does not read
//! as prose.

/// Rule name of [`is_secret_key`] values in redaction markers.
pub const SECRET_KEY_RULE: &str = "secret-key";

/// The marker that replaces a value stored under a secret-named key.
pub const SECRET_KEY_MARKER: &str = "[REDACTED:secret-key]";

/// How strongly a key names a secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyKind {
    /// `password`, `client_secret`, `api_key`, `access_token`: any
    /// plausible value is a credential.
    Credential,
    /// `key`, `auth`, a provider's name: only a token-shaped value is.
    Hint,
}

/// Words that make a key a credential on their own.
const CREDENTIAL_WORDS: &[&str] = &[
    "password",
    "passwd",
    "passwort",
    "passphrase",
    "pass",
    "pwd",
    "pw",
    "secret",
    "secrets",
    "token",
    "apikey",
    "credential",
    "credentials",
    "creds",
    "privatekey",
    "secretkey",
    "accesskey",
    "authtoken",
    "accesstoken",
    "apitoken",
    "contrasena",
    "mdp",
    // Glued `<qualifier>key` names (detect-secrets' keyword list).
    "appkey",
    "authkey",
    "servicekey",
    "applicationkey",
    "accountkey",
    "dbkey",
    "databasekey",
    "clientkey",
    "privkey",
    "keypass",
    "secreto",
    "secrete",
];

/// Substrings that make a one-word key a credential (`PGPASSWORD`,
/// `dbpassword`, `myapikey`).
const CREDENTIAL_SUBSTRINGS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "apikey",
    "credential",
    "privatekey",
    "accesstoken",
    "authtoken",
    "apitoken",
];

/// Words before `key` that make it a credential (`api_key`, `signing_key`).
const KEY_QUALIFIERS: &[&str] = &[
    "api",
    "private",
    "secret",
    "access",
    "signing",
    "sign",
    "encryption",
    "encrypt",
    "decryption",
    "master",
    "client",
    "app",
    "application",
    "license",
    "licence",
    "service",
    "account",
    "admin",
    "session",
    "consumer",
    "shared",
    "ssh",
    "gpg",
    "pgp",
    "deploy",
    "auth",
    "write",
    "root",
    "webhook",
    "hmac",
    "jwt",
    "cipher",
    "aes",
    "rsa",
    "subscription",
    "server",
    "role",
    "integration",
    "ingest",
    "management",
    "mgmt",
    "developer",
    "dev",
    "user",
    "personal",
    "db",
    "database",
    "priv",
];

/// Words before a credential word that make the key something else
/// (`public_key`, `page_token`, `csrf_token`, `max_tokens`).
const NEGATING_QUALIFIERS: &[&str] = &[
    "public",
    "pub",
    "page",
    "cursor",
    "continuation",
    "pagination",
    "next",
    "csrf",
    "xsrf",
    "max",
    "min",
    "num",
    "total",
    "input",
    "output",
    "completion",
    "prompt",
    "bypass",
    "sync",
];

/// Words before `key` that make it a name for data, not a secret
/// (`primary_key`, `cache_key`, `s3_key`, `sort_key`).
const KEY_NEGATING_QUALIFIERS: &[&str] = &[
    "primary",
    "foreign",
    "sort",
    "partition",
    "cache",
    "idempotency",
    "composite",
    "unique",
    "row",
    "lookup",
    "map",
    "dict",
    "hot",
    "shortcut",
    "keyboard",
    "music",
    "i18n",
    "translation",
    "object",
    "s3",
    "redis",
    "registry",
    "routing",
    "group",
    "message",
    "dedup",
    "dedupe",
    "index",
    "hash",
    "range",
    "shard",
    "natural",
    "surrogate",
    "candidate",
    "storage",
];

/// Words after the credential word that make the key metadata about the
/// secret rather than the secret (`password_hint`, `token_ttl`).
const METADATA_WORDS: &[&str] = &[
    "hint",
    "label",
    "placeholder",
    "help",
    "prompt",
    "field",
    "fields",
    "name",
    "names",
    "type",
    "types",
    "url",
    "uri",
    "urls",
    "endpoint",
    "path",
    "file",
    "filename",
    "files",
    "dir",
    "directory",
    "policy",
    "policies",
    "length",
    "len",
    "min",
    "max",
    "minimum",
    "maximum",
    "expiry",
    "expires",
    "expiration",
    "expired",
    "expire",
    "ttl",
    "lifetime",
    "timeout",
    "age",
    "header",
    "headers",
    "format",
    "regex",
    "pattern",
    "count",
    "counter",
    "enabled",
    "enable",
    "disabled",
    "disable",
    "required",
    "require",
    "reset",
    "rotation",
    "rotate",
    "env",
    "var",
    "variable",
    "description",
    "desc",
    "message",
    "msg",
    "text",
    "title",
    "error",
    "errors",
    "validation",
    "validator",
    "valid",
    "strength",
    "version",
    "id",
    "ids",
    "index",
    "size",
    "mode",
    "method",
    "methods",
    "class",
    "provider",
    "store",
    "storage",
    "manager",
    "source",
    "location",
    "prefix",
    "suffix",
    "separator",
    "param",
    "parameter",
    "params",
    "input",
    "column",
    "attribute",
    "attr",
    "property",
    "template",
    "generator",
    "algorithm",
    "algo",
    "scheme",
    "schema",
    "kind",
    "level",
    "limit",
    "limits",
    "ref",
    "reference",
    "at",
    "date",
    "time",
    "timestamp",
    "seconds",
    "secs",
    "ms",
    "days",
    "hours",
    "minutes",
    "duration",
    "interval",
    "period",
    "rule",
    "rules",
    "strategy",
    "usage",
    "uses",
    "used",
    "exists",
    "set",
    "status",
    "state",
    "changed",
    "updated",
    "created",
    "flag",
    "option",
    "options",
    "request",
    "response",
    "button",
    "link",
    "page",
    "form",
    "dialog",
    "screen",
    "view",
    "icon",
    "visible",
    "visibility",
    "shown",
    "show",
    "hidden",
    "size",
    "bits",
    "bytes",
    "encoding",
    "tokens",
];

/// Provider names that hint at a credential when a key holds them.
pub(crate) const PROVIDER_WORDS: &[&str] = &[
    "adafruit",
    "adobe",
    "airtable",
    "algolia",
    "alibaba",
    "asana",
    "atlassian",
    "jira",
    "confluence",
    "beamer",
    "bitbucket",
    "bittrex",
    "cloudflare",
    "cloudant",
    "codecov",
    "cohere",
    "coinbase",
    "confluent",
    "contentful",
    "datadog",
    "discord",
    "dropbox",
    "droneci",
    "etsy",
    "facebook",
    "fastly",
    "finicity",
    "finnhub",
    "flickr",
    "freshbooks",
    "gitter",
    "gocardless",
    "heroku",
    "hubspot",
    "intercom",
    "jfrog",
    "artifactory",
    "kraken",
    "kucoin",
    "launchdarkly",
    "linkedin",
    "mailchimp",
    "mailgun",
    "mapbox",
    "mattermost",
    "meraki",
    "messagebird",
    "netlify",
    "newrelic",
    "nytimes",
    "okta",
    "plaid",
    "rapidapi",
    "sendbird",
    "sentry",
    "shopify",
    "slack",
    "snyk",
    "sonar",
    "squarespace",
    "stripe",
    "sumologic",
    "telegram",
    "travis",
    "twitch",
    "twitter",
    "typeform",
    "yandex",
    "zendesk",
    "softlayer",
    "ibm",
    "sendgrid",
    "twilio",
    "mistral",
    "anthropic",
    "openai",
    "gemini",
    "groq",
    "pusher",
    "paypal",
    "braintree",
    "vonage",
    "nexmo",
    "trello",
    "zoom",
    "vercel",
    "supabase",
    "firebase",
    "github",
    "gitlab",
    "npm",
    "pypi",
    "docker",
    "dockerhub",
    "sourcegraph",
    "sumo",
    "messagebird",
    "algolia",
];

/// The words of a key: split on every non-alphanumeric character, on
/// lower-to-upper case changes (`oktaApiToken` → `okta`, `api`, `token`)
/// and before the last capital of an acronym (`COMToken` → `com`, `token`),
/// lower-cased.
fn key_words(key: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    let chars: Vec<char> = key.chars().collect();
    for (index, &c) in chars.iter().enumerate() {
        if !c.is_ascii_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            previous_lower = false;
            continue;
        }
        let acronym_end = c.is_ascii_uppercase()
            && index > 0
            && chars[index - 1].is_ascii_uppercase()
            && chars.get(index + 1).is_some_and(char::is_ascii_lowercase);
        if c.is_ascii_uppercase() && (previous_lower || acronym_end) && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        current.push(c.to_ascii_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// Classifies `key` (the name in a `key = value` pair, or a memory key such
/// as `pref.db_password`): `None` when it does not name a secret.
pub(crate) fn key_kind(key: &str) -> Option<KeyKind> {
    let words = key_words(key);
    // The last credential word found decides, and metadata words after it
    // undo it (`config.password.hint` is a hint; `db.password` a password).
    let mut found: Option<(usize, KeyKind)> = None;
    for (index, word) in words.iter().enumerate() {
        let previous = index.checked_sub(1).map(|i| words[i].as_str());
        let kind = if CREDENTIAL_WORDS.contains(&word.as_str()) {
            // `api` + `key` and `api` + `token` come as two words too.
            Some(KeyKind::Credential)
        } else if word == "key" || word == "keys" {
            match previous {
                Some(previous) if KEY_QUALIFIERS.contains(&previous) => Some(KeyKind::Credential),
                _ => Some(KeyKind::Hint),
            }
        } else if matches!(word.as_str(), "auth" | "authorization" | "login" | "accessid" | "accesskeyid")
            || PROVIDER_WORDS.contains(&word.as_str())
            || words.get(index + 1).is_some_and(|next| PROVIDER_WORDS.contains(&format!("{word}{next}").as_str()))
        {
            Some(KeyKind::Hint)
        } else if word == "access" && words.get(index + 1).is_some_and(|next| next == "id") {
            // `accessId`: the identifier half of an access-key pair.
            return Some(KeyKind::Hint);
        } else if words.len() == 1 && CREDENTIAL_SUBSTRINGS.iter().any(|part| word.contains(part)) {
            Some(KeyKind::Credential)
        } else if CREDENTIAL_SUBSTRINGS.iter().any(|part| word.contains(part) && word.len() <= part.len() + 4) {
            // `dbpassword`, `mysecret`: a short prefix glued to the word.
            Some(KeyKind::Credential)
        } else {
            None
        };
        let Some(kind) = kind else { continue };
        let negating = |previous: &str| {
            NEGATING_QUALIFIERS.contains(&previous)
                || (word.starts_with("key") && KEY_NEGATING_QUALIFIERS.contains(&previous))
        };
        if previous.is_some_and(negating) {
            found = None;
            continue;
        }
        found = Some(match found {
            Some((_, KeyKind::Credential)) if kind == KeyKind::Hint => (index, KeyKind::Credential),
            _ => (index, kind),
        });
    }
    let (index, kind) = found?;
    let after = &words[index + 1..];
    if after.iter().any(|word| METADATA_WORDS.contains(&word.as_str())) {
        return None;
    }
    Some(kind)
}

/// True when `key` names a credential: a value stored under it is a secret
/// whatever its shape (`pref.db_password`, `user.api_token`,
/// `service.client_secret`), while metadata about a secret is not
/// (`pref.password_hint`, `user.token_ttl`, `ui.show_password`).
///
/// ```
/// use cairn_guard::is_secret_key;
/// assert!(is_secret_key("pref.db_password"));
/// assert!(is_secret_key("user.api_token"));
/// assert!(!is_secret_key("pref.password_hint"));
/// assert!(!is_secret_key("user.favorite_color"));
/// ```
pub fn is_secret_key(key: &str) -> bool {
    key_kind(key) == Some(KeyKind::Credential)
}

/// Where an assignment stands, for [`keyed_value_is_secret`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct AssignmentContext {
    /// The value was inside quotes.
    pub(crate) quoted: bool,
    /// Only indentation (or `export`, a list dash) precedes the key.
    pub(crate) line_start: bool,
    /// Nothing but punctuation or a comment follows the value.
    pub(crate) line_end: bool,
}

/// Shannon entropy of the bytes of `value`, in bits per byte.
pub(crate) fn entropy(value: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in value.bytes() {
        counts[usize::from(b)] += 1;
    }
    let length = value.len() as f64;
    counts
        .iter()
        .filter(|&&count| count > 0)
        .map(|&count| {
            let p = f64::from(count) / length;
            -p * p.log2()
        })
        .sum()
}

/// How many of lower case, upper case, digits and symbols (other than the
/// identifier joiners `_`, `.` and `-`) `value` mixes.
fn char_classes(value: &str) -> usize {
    let has = |f: fn(&u8) -> bool| value.as_bytes().iter().any(f);
    [
        has(u8::is_ascii_lowercase),
        has(u8::is_ascii_uppercase),
        has(u8::is_ascii_digit),
        has(|b| !b.is_ascii_alphanumeric() && !matches!(b, b'_' | b'.' | b'-')),
    ]
    .iter()
    .filter(|present| **present)
    .count()
}

/// Unquoted values that are names in code rather than literals:
/// `user_input`, `userInput`, `PASSWORD`, `config.db.password`.
fn is_identifier(value: &str) -> bool {
    let bytes = value.as_bytes();
    if !bytes.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.')) {
        return false;
    }
    if !bytes.first().is_some_and(u8::is_ascii_alphabetic) {
        return false;
    }
    let digits = bytes.iter().filter(|b| b.is_ascii_digit()).count();
    let dotted_or_snake = bytes.contains(&b'.') || bytes.contains(&b'_');
    let all_upper = !bytes.iter().any(u8::is_ascii_lowercase);
    // camelCase: lower case start, later capitals, each followed by lower case.
    let camel = bytes[0].is_ascii_lowercase()
        && bytes.iter().any(u8::is_ascii_uppercase)
        && bytes.windows(2).all(|w| !(w[0].is_ascii_uppercase() && w[1].is_ascii_uppercase()));
    digits <= 1 && (dotted_or_snake || all_upper || camel)
}

/// Words that mark a quoted phrase as prose or instructions, not a
/// passphrase.
const PROSE_WORDS: &[&str] = &[
    "your",
    "enter",
    "please",
    "must",
    "should",
    "here",
    "required",
    "characters",
    "least",
    "example",
    "e.g.",
    "placeholder",
    "todo",
    "see",
    "use",
    "set",
    "not",
    "is",
    "are",
    "will",
    "this",
    "that",
    "for",
    "with",
    "the",
    "a",
    "an",
    "to",
    "of",
    "and",
    "or",
    "in",
    "on",
    "if",
    "be",
    "can",
    "you",
    "we",
    "it",
    "password",
    "secret",
    "token",
    "key",
    "value",
    "insert",
    "type",
    "choose",
    "pick",
    "new",
    "old",
    "current",
];

/// A quoted value with spaces that reads as a passphrase (`"correct horse
/// battery staple"`) rather than prose (`"Enter your password"`).
fn is_passphrase(value: &str) -> bool {
    let words: Vec<String> = value.split_whitespace().map(|w| w.to_ascii_lowercase()).collect();
    (8..=100).contains(&value.len())
        && (2..=8).contains(&words.len())
        && !words.iter().any(|word| {
            let bare = word.trim_matches(|c: char| !c.is_ascii_alphanumeric());
            PROSE_WORDS.contains(&bare) || PROSE_WORDS.contains(&word.as_str())
        })
        && !words.last().is_some_and(|w| w.ends_with(['.', '?', ':']))
}

/// A file-system path or a URL, never the secret itself.
fn is_path_or_url(value: &str) -> bool {
    value.starts_with('/')
        || value.starts_with("./")
        || value.starts_with("../")
        || value.starts_with("~/")
        || value.as_bytes().get(1..3) == Some(b":\\")
        || value.contains("://")
}

/// Token-shaped on its own: long, mixed, with the entropy of random text.
/// Lower-case words and numbers joined by `-`, `_` or `.`, each part one
/// or the other: `oauth-2025-04-20`, `fast-mode-2026-02-01`, `us-west-2`.
fn is_slug(value: &str) -> bool {
    value.contains(['-', '_', '.'])
        && value.split(['-', '_', '.']).all(|part| {
            !part.is_empty()
                && (part.bytes().all(|b| b.is_ascii_lowercase()) || part.bytes().all(|b| b.is_ascii_digit()))
        })
}

fn is_token_shaped(value: &str) -> bool {
    value.len() >= 12 && !value.contains(' ') && char_classes(value) >= 2 && entropy(value) >= 3.0
}

/// Longer assigned values are data (a certificate, a document), not a
/// secret typed into a configuration line.
const MAX_VALUE_BYTES: usize = 200;

/// Whether `value`, assigned to `key`, is a credential (see the module
/// documentation).
pub(crate) fn keyed_value_is_secret(key: &str, value: &str, context: AssignmentContext) -> bool {
    let Some(kind) = key_kind(key) else { return false };
    let value = value.trim();
    if value.is_empty()
        || value.len() > MAX_VALUE_BYTES
        || crate::values::is_placeholder(value)
        || crate::values::looks_like_code(value)
    {
        return false;
    }
    if is_path_or_url(value) || value.starts_with(['$', '{', '[', '<', '=']) {
        return false;
    }
    // Unquoted, these open YAML tags, anchors and aliases, Windows
    // variables and references, not secrets.
    if !context.quoted && value.starts_with(['%', '@', '!', '&', '*']) {
        return false;
    }
    // `Anthropic::BedrockClient`: a key followed by `::` is a path in
    // Ruby, C++ or Rust (the separator took one colon), and an unquoted
    // `:name` a Ruby symbol, not a value.
    if !context.quoted && (value.starts_with(':') || value.contains("::")) {
        return false;
    }
    if value.contains(char::is_whitespace) {
        return context.quoted && kind == KeyKind::Credential && is_passphrase(value);
    }
    if kind == KeyKind::Hint {
        // A provider's name alone is only a hint: its value must look
        // like a token. Lower-case words and numbers joined by `-`, `_`
        // or `.` (`anthropic-beta: oauth-2025-04-20`, a model id, a
        // region) are names and dated versions, not credentials.
        return is_token_shaped(value) && !is_slug(value);
    }
    let length = value.chars().count();
    let classes = char_classes(value);
    if context.quoted {
        return length >= 6 && !(length < 8 && classes < 2);
    }
    if is_identifier(value) {
        return false;
    }
    if length >= 6 && classes >= 2 {
        return true;
    }
    // A lone lower-case word or number: only as the whole value of a
    // configuration line (`password: hunter2hunter`, `PASS=12345678`).
    length >= 8 && context.line_start && context.line_end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_name_secrets() {
        for key in [
            "password",
            "DB_PASSWORD",
            "pref.db_password",
            "user.api_token",
            "client_secret",
            "oktaApiToken",
            "x-api-key",
            "PGPASSWORD",
            "my_password_super_secure",
            "SUPABASE_SERVICE_ROLE_KEY",
            "db_pass",
            "smtp.pass",
            "private_key",
            "aws_secret_access_key",
            "passphrase",
            "auth_token",
            "signing_key",
        ] {
            assert!(is_secret_key(key), "{key}");
        }
    }

    #[test]
    fn keys_that_describe_secrets() {
        for key in [
            "password_hint",
            "pref.password_min_length",
            "token_ttl",
            "api_key_header",
            "secret_name",
            "public_key",
            "primary_key",
            "next_page_token",
            "max_tokens",
            "input_tokens",
            "csrf_token",
            "bypass",
            "passenger",
            "compass_heading",
            "user.favorite_color",
            "token_type",
            "password_reset_url",
        ] {
            assert!(!is_secret_key(key), "{key}");
        }
    }

    #[test]
    fn hint_keys_need_token_shaped_values() {
        let context = AssignmentContext { quoted: true, line_start: true, line_end: true };
        assert!(keyed_value_is_secret("DATADOG", "9f8e7d6c5b4a39281706f5e4d3c2b1a0", context));
        assert!(!keyed_value_is_secret("cache_key", "user:1234", context));
        assert!(!keyed_value_is_secret("monkey", "banana", context));
    }
}
