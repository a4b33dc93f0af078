//! Credential detection and redaction.
//!
//! Three kinds of rules, one pass each:
//!
//! - **Provider formats** with a recognisable prefix or shape, written from
//!   the public catalogues (gitleaks' rules, detect-secrets' plugins,
//!   trufflehog's detectors): AWS, GitHub, GitLab, Slack, OpenAI/Anthropic,
//!   Google, Azure, Stripe, package registries, JWTs, private key blocks,
//!   ... These fire on the token alone.
//! - **Assignments** whose key names a secret (`password=`, `api_key:`,
//!   `SNYK_TOKEN ?=`, `"oktaApiToken": "..."`, `define('DB_PASSWORD', ...)`,
//!   `if password == "..."`, `- name: X_PASSWORD` / `value:`), command-line
//!   credentials (`curl -u`, `--password`, `mysql -p`) and authorization
//!   headers: only the value is redacted, and only when it is not a
//!   placeholder or code and its shape and entropy make it a secret (see
//!   the `assignment` module).
//! - **Containers**: base64 blobs that decode to a credential, and the
//!   `data:` entries of a Kubernetes `Secret` manifest.
//!
//! All patterns are compiled once; a [`RegexSet`] pass decides which rules
//! need their capture groups run at all.

use std::borrow::Cow;
use std::sync::LazyLock;

use base64::Engine as _;
use regex::{Regex, RegexSet, SetMatches};

use crate::assignment::{AssignmentContext, KeyKind, key_kind, keyed_value_is_secret};
use crate::normalize::ascii_pattern;
use crate::values::{is_placeholder, looks_like_code};

/// A credential found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialFinding {
    /// Rule name, used in the redaction marker `[REDACTED:<rule>]`.
    pub rule: &'static str,
    /// Byte range of the secret part in the scanned text.
    pub span: std::ops::Range<usize>,
}

/// Extra check applied to a match before it counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// The format is specific enough on its own.
    None,
    /// Reject the vendor's documented example values.
    NotDocumentedExample,
    /// Must mix letters and digits.
    LettersAndDigits,
    /// Anything but a placeholder (`${VAR}`, `<password>`, `xxxx`).
    NotPlaceholder,
    /// Assignment value: not a placeholder, plausibly a secret.
    AssignedValue,
    /// A `key = value` pair: the key (group `key`) must name a secret and
    /// the value (the first other group) must look like one, see
    /// [`keyed_value_is_secret`].
    KeyedValue,
    /// A credential given to a command: anything but a placeholder, four or
    /// more characters.
    CommandLine,
    /// A quoted base64 string with the entropy of random bytes (4.3 bits a
    /// character, a little under detect-secrets' 4.5 so that 40-character
    /// random strings pass), mixing upper and lower case and digits.
    HighEntropyBase64,
}

struct CredentialRule {
    name: &'static str,
    pattern: &'static str,
    check: Check,
}

const fn cred(name: &'static str, check: Check, pattern: &'static str) -> CredentialRule {
    CredentialRule { name, pattern, check }
}

/// Provider formats first: where spans overlap, the earlier rule names the
/// marker. Rules with capture groups redact only the first group that took
/// part in the match.
const RULES: &[CredentialRule] = &[
    cred(
        "private-key",
        Check::None,
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)",
    ),
    cred("aws-access-key", Check::NotDocumentedExample, r"\b((?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16})\b"),
    cred(
        "aws-secret-key",
        Check::None,
        r#"(?i)\baws[\w.-]{0,20}?(?:secret|access)[\w.-]{0,20}["']?\s*(?:=|:|:=)\s*["']?([A-Za-z0-9/+=]{40})\b"#,
    ),
    cred("anthropic-api-key", Check::None, r"\bsk-ant-[a-z]{2,10}\d{2}-[A-Za-z0-9_-]{20,}"),
    cred("openai-api-key", Check::LettersAndDigits, r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    cred("github-token", Check::None, r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})"),
    cred("gitlab-token", Check::None, r"\bgl(?:pat|dt|rt|ptt|ft|cbt|soat|imt|agent|oas|ffct|wt)-[A-Za-z0-9_.-]{20,}"),
    cred(
        "slack-token",
        Check::None,
        r"\bxox[abposrec]-[A-Za-z0-9-]{10,}|\bxoxe\.xox[bp]-\d-[A-Za-z0-9]{20,}|\bxapp-\d-[A-Za-z0-9-]{20,}",
    ),
    cred(
        "slack-webhook",
        Check::None,
        r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}",
    ),
    cred(
        "discord-webhook",
        Check::None,
        r"https?://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]{20,}",
    ),
    cred("google-api-key", Check::None, r"\bAIza[0-9A-Za-z_-]{35}"),
    cred("google-oauth-token", Check::None, r"\bya29\.[0-9A-Za-z_-]{20,}"),
    cred("stripe-key", Check::None, r"\b(?:sk|rk)_(?:live|test|prod)_[0-9A-Za-z]{10,}|\bwhsec_[0-9A-Za-z]{24,}"),
    cred(
        "jwt",
        Check::None,
        r"\bey[A-Za-z0-9_-]{10,}\.ey[A-Za-z0-9_/-]{10,}(?:\.[A-Za-z0-9_/+-]*={0,2})?|\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",
    ),
    cred("bearer-token", Check::LettersAndDigits, r"(?i)\bbearer\s+([A-Za-z0-9._~+/-]{16,}=*)"),
    cred("basic-auth", Check::None, r#"(?i)\bauthorization["']?\s*[:=]\s*["']?basic\s+([A-Za-z0-9+/]{8,}={0,2})"#),
    cred(
        "authorization-header",
        Check::CommandLine,
        r#"(?i)\b(?:proxy-)?authorization["']?\s*[:=]\s*["']?(?:bearer|token|digest|apikey|api-key|sso-key|key|jwt|otp|oauth|hmac|signature)\s+([A-Za-z0-9._~+/=:,-]{8,})"#,
    ),
    cred("url-password", Check::NotPlaceholder, r#"\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/@"'<>]*:([^\s/@"'<>]+)@"#),
    cred("npm-token", Check::None, r"\bnpm_[A-Za-z0-9]{36}\b"),
    cred("pypi-token", Check::None, r"\bpypi-AgE[A-Za-z0-9_-]{50,}"),
    cred("huggingface-token", Check::None, r"\bhf_[A-Za-z]{34}\b"),
    cred("sendgrid-key", Check::None, r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b"),
    cred("twilio-key", Check::None, r"\b(?:AC|SK)[a-fA-F0-9]{32}\b|\b(?:AC|SK)[a-z0-9]{32}\b"),
    cred("artifactory-token", Check::None, r"\bAKC[a-zA-Z0-9]{10,}\b|\bAP[0-9A-F][a-zA-Z0-9]{8,}\b"),
    cred("discord-bot-token", Check::None, r"\b[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}"),
    cred("digitalocean-token", Check::None, r"\bdo[opr]_v1_[a-f0-9]{64}\b"),
    cred("shopify-token", Check::None, r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b"),
    cred("vault-token", Check::LettersAndDigits, r"\bhv[sbr]\.[A-Za-z0-9_-]{24,}"),
    cred("postman-key", Check::None, r"\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}\b"),
    cred("atlassian-token", Check::None, r"\bATATT3[A-Za-z0-9_=-]{100,}"),
    cred("linear-key", Check::None, r"\blin_api_[A-Za-z0-9]{40}\b"),
    cred("age-secret-key", Check::None, r"\bAGE-SECRET-KEY-1[0-9A-Z]{58}\b"),
    cred("databricks-token", Check::None, r"\bdapi[a-f0-9]{32}(?:-\d)?\b"),
    cred("grafana-token", Check::None, r"\bgl(?:c|sa)_[A-Za-z0-9_+/=-]{32,}"),
    cred("sourcegraph-token", Check::None, r"\bsgp_(?:local_)?[A-Za-z0-9_]{32,}"),
    cred("facebook-token", Check::None, r"\bEAA[A-Za-z0-9]{80,}|\b\d{15,16}(?:\||%7[Cc])[0-9A-Za-z_-]{27,}"),
    cred(
        "telegram-bot-token",
        Check::LettersAndDigits,
        r"\b\d{5,16}:A[A-Za-z0-9_-]{34}\b|\b\d{8,10}:[A-Za-z0-9_-]{35}\b",
    ),
    cred("azure-storage-key", Check::None, r"(?i)\bAccountKey=([A-Za-z0-9+/]{86}==)"),
    cred("square-token", Check::None, r"\bsq0(?:atp|csp|idp)-[A-Za-z0-9_-]{22,}"),
    cred("mailgun-key", Check::None, r"\bkey-[a-f0-9]{32}\b"),
    cred("alibaba-key", Check::None, r"\bLTAI[A-Za-z0-9]{20}\b"),
    cred("planetscale-token", Check::None, r"\bpscale_(?:tkn|pw|oauth)_[A-Za-z0-9=._-]{32,}"),
    cred("doppler-token", Check::None, r"\bdp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}"),
    cred(
        "onepassword-secret-key",
        Check::None,
        r"\bA3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}\b",
    ),
    cred("onepassword-service-token", Check::None, r"\bops_eyJ[A-Za-z0-9+/]{100,}={0,3}"),
    cred("adobe-client-secret", Check::LettersAndDigits, r"\bp8e-[A-Za-z0-9]{32}\b"),
    cred("airtable-token", Check::None, r"\bpat[A-Za-z0-9]{14}\.[a-f0-9]{64}\b"),
    cred(
        "authress-key",
        Check::None,
        r"\b(?:sc|ext|scauth|authress)_[A-Za-z0-9]{5,30}\.[A-Za-z0-9]{4,6}\.acc[_-][A-Za-z0-9-]{10,32}\.[A-Za-z0-9+/_=-]{30,120}",
    ),
    cred("aws-bedrock-key", Check::None, r"\bABSK[A-Za-z0-9+/]{40,}={0,2}"),
    cred(
        "azure-ad-client-secret",
        Check::LettersAndDigits,
        r"(?:^|[\s'\x22`=:(,>])([A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34})(?:$|[\s'\x22`<),;])",
    ),
    cred("azure-sas-token", Check::None, r"(?i)[?&]sig=([A-Za-z0-9%+/]{40,}={0,2})"),
    cred("clickhouse-key", Check::LettersAndDigits, r"\b4b1d[A-Za-z0-9]{38}\b"),
    cred("clojars-token", Check::None, r"(?i)\bCLOJARS_[a-z0-9]{60}\b"),
    cred("cloudflare-origin-ca-key", Check::None, r"\bv1\.0-[a-f0-9]{24}-[a-f0-9]{146}\b"),
    cred("crates-io-token", Check::LettersAndDigits, r"\bcio[A-Za-z0-9]{32}\b"),
    cred("defined-networking-token", Check::None, r"\bdnkey-[A-Za-z0-9=_-]{26}-[A-Za-z0-9=_-]{52}"),
    cred("docker-hub-token", Check::None, r"\bdckr_(?:pat|oat)_[A-Za-z0-9_-]{27,}"),
    cred("dropbox-token", Check::None, r"\bsl\.[A-Za-z0-9_=-]{130,}"),
    cred("duffel-token", Check::None, r"\bduffel_(?:test|live)_[A-Za-z0-9_=-]{43}"),
    cred("dynatrace-token", Check::None, r"\bdt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}\b"),
    cred("easypost-token", Check::None, r"\bEZ[AT]K[A-Za-z0-9]{54}\b"),
    cred("figma-token", Check::None, r"\bfig[dou]_[A-Za-z0-9_-]{40,}"),
    cred("flutterwave-key", Check::None, r"\bFLW(?:SECK|PUBK)(?:_TEST)?-[A-Za-z0-9]{12,32}(?:-X)?\b"),
    cred("flyio-token", Check::None, r"\b(?:fo1_[A-Za-z0-9_-]{43}|fm[12][ar]?_[A-Za-z0-9+/]{100,}={0,3})"),
    cred("frameio-token", Check::None, r"\bfio-u-[A-Za-z0-9_=-]{64}"),
    cred("gitlab-runner-registration-token", Check::None, r"\bGR1348941[A-Za-z0-9_-]{20}\b"),
    cred("gitlab-session-cookie", Check::None, r"_gitlab_session=([0-9a-z]{32})\b"),
    cred("google-oauth-client-secret", Check::None, r"\bGOCSPX-[A-Za-z0-9_-]{28}\b"),
    cred("grafana-api-key", Check::None, r"\beyJrIjoi[A-Za-z0-9]{70,400}={0,3}"),
    cred("groq-api-key", Check::None, r"\bgsk_[A-Za-z0-9]{52}\b"),
    cred("harness-token", Check::None, r"\b(?:pat|sat)\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}\b"),
    cred("hashicorp-terraform-token", Check::None, r"\b[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}"),
    cred("heroku-api-key", Check::None, r"\bHRKU-AA[0-9A-Za-z_-]{58}"),
    cred("huggingface-org-token", Check::None, r"\bapi_org_[A-Za-z]{34}\b"),
    cred("infracost-token", Check::LettersAndDigits, r"\bico-[A-Za-z0-9]{32}\b"),
    cred("intra42-secret", Check::None, r"\bs-s4t2(?:ud|af)-[a-f0-9]{64}\b"),
    cred("langsmith-key", Check::None, r"\blsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}\b"),
    cred("mailchimp-key", Check::LettersAndDigits, r"\b[a-z0-9]{32}-us\d{1,2}\b"),
    cred("mailgun-public-key", Check::None, r"\bpubkey-[a-f0-9]{32}\b"),
    cred("mapbox-token", Check::None, r"\b(?:sk|pk|tk)\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}"),
    cred("maxmind-license-key", Check::None, r"\b[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk\b"),
    cred(
        "microsoft-teams-webhook",
        Check::None,
        r"https://[a-z0-9-]+\.webhook\.office\.com/webhookb2/[A-Za-z0-9@/_-]{40,}",
    ),
    cred("neon-api-key", Check::None, r"\bnapi_[a-z0-9]{64}\b"),
    cred("netlify-token", Check::None, r"\bnf[pc]_[A-Za-z0-9]{36,}"),
    cred("new-relic-key", Check::None, r"\bNR(?:AK|JS|II|AA)-[A-Za-z0-9-]{19,32}\b"),
    cred("notion-token", Check::None, r"\bntn_[0-9]{11}[A-Za-z0-9]{35}\b|\bsecret_[A-Za-z0-9]{43}\b"),
    cred("nuget-api-key", Check::LettersAndDigits, r"\boy2[a-z0-9]{43}\b"),
    cred("octopus-deploy-key", Check::LettersAndDigits, r"\bAPI-[A-Z0-9]{26}\b"),
    cred("openshift-token", Check::None, r"\bsha256~[A-Za-z0-9_-]{43}"),
    cred("packagist-token", Check::None, r"\bpackagist_[ou]u?t_[a-f0-9]{68}\b"),
    cred("perplexity-key", Check::None, r"\bpplx-[A-Za-z0-9]{48}\b"),
    cred("pinecone-key", Check::None, r"\bpcsk_[A-Za-z0-9_]{30,}"),
    cred(
        "plaid-token",
        Check::None,
        r"\baccess-(?:sandbox|development|production)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b",
    ),
    cred("prefect-token", Check::None, r"\bpnu_[A-Za-z0-9]{36}\b"),
    cred("pulumi-token", Check::None, r"\bpul-[a-f0-9]{40}\b"),
    cred("razorpay-key", Check::None, r"\brzp_(?:live|test)_[A-Za-z0-9]{14,}\b"),
    cred("readme-token", Check::None, r"\brdme_[a-z0-9]{70}\b"),
    cred("render-key", Check::None, r"\brnd_[A-Za-z0-9]{32}\b"),
    cred("replicate-token", Check::None, r"\br8_[A-Za-z0-9]{37}\b"),
    cred("rubygems-token", Check::None, r"\brubygems_[a-f0-9]{48}\b"),
    cred("scalingo-token", Check::None, r"\btk-us-[A-Za-z0-9_-]{48}"),
    cred("sendinblue-key", Check::None, r"\bxkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}\b"),
    cred("sentry-token", Check::None, r"\bsntry[su]_[A-Za-z0-9+/=_]{40,}"),
    cred("settlemint-token", Check::None, r"\bsm_(?:pat|aat|sat)_[A-Za-z0-9]{16}\b"),
    cred("shippo-token", Check::None, r"\bshippo_(?:live|test)_[a-fA-F0-9]{40}\b"),
    cred("supabase-token", Check::None, r"\bsb[pk]_[a-f0-9]{40}\b|\bsb_secret_[A-Za-z0-9_-]{20,}"),
    cred("tailscale-key", Check::None, r"\btskey-(?:auth|api|client|webhook|scim)-[A-Za-z0-9]{6,}-[A-Za-z0-9]{16,}"),
    cred("twitter-bearer-token", Check::None, r"\bA{22}[A-Za-z0-9%]{80,120}"),
    cred("typeform-token", Check::None, r"\btfp_[A-Za-z0-9_.=-]{59}"),
    cred("xai-api-key", Check::None, r"\bxai-[A-Za-z0-9]{80}\b"),
    cred(
        "yandex-token",
        Check::None,
        r"\bt1\.[A-Za-z0-9_-]+={0,2}\.[A-Za-z0-9_-]{86}={0,2}|\bAQVN[A-Za-z0-9_-]{35,38}\b|\bYC[A-Za-z0-9_-]{38}\b",
    ),
    cred("bitbucket-app-password", Check::None, r"\bATBB[A-Za-z0-9_=.-]{32,}"),
    cred("atlassian-container-token", Check::None, r"\bATCTT3[A-Za-z0-9_=-]{100,}"),
    cred("buildkite-token", Check::None, r"\bbkua_[a-f0-9]{40}\b"),
    cred("clickup-token", Check::None, r"\bpk_\d{6,10}_[A-Z0-9]{32}\b"),
    cred("braintree-token", Check::None, r"\baccess_token\$(?:production|sandbox)\$[a-z0-9]{16}\$[a-f0-9]{32}\b"),
    cred("square-oauth-secret", Check::None, r"\bEAAA[A-Za-z0-9_-]{22,60}\b"),
    cred("ibm-softlayer-url", Check::None, r"(?i)api\.softlayer\.com/soap/v3\.?1?/([a-z0-9]{64})"),
    cred(
        "bundler-credentials",
        Check::None,
        r#"\bBUNDLE_[A-Z0-9_]+__[A-Z0-9_]+["']?\s*(?:=|:)\s*["']?([^\s"':]+:[^\s"';&]+)"#,
    ),
    cred(
        "xml-password-attribute",
        Check::AssignedValue,
        r#"(?i)\bkey\s*=\s*"[^"]*(?:password|secret|token|apikey|api_key)[^"]*"\s+value\s*=\s*"([^"]{4,})""#,
    ),
    cred(
        "xml-secret-element",
        Check::KeyedValue,
        r#"(?i)<(?P<key>[A-Za-z0-9_.:-]*(?:password|passwd|pwd|secret|token|api-?key|apikey|passphrase|credentials?)[A-Za-z0-9_.:-]*)>\s*([^<\s][^<]*?)\s*</"#,
    ),
    cred(
        "command-line-credential",
        Check::CommandLine,
        r#"(?:^|[\s;|&(])(?:-u|--user|--proxy-user|--http-user)(?:=|\s+)["']?[^\s"':]{1,64}:([^\s"'@]{3,})["']?(?:\s|$)|(?:^|[\s;|&(])--(?:password|passwd|pass|pwd|http-password|ftp-password|proxy-password|db-password|token|auth-token|access-token|api-key|apikey|api-token|secret|client-secret|secret-key|private-token|registry-password|docker-password)(?:=|\s+)["']?([^\s"']{4,})|\b(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b[^\n|;]*?\s-p["']?([^\s"'-][^\s"']{3,})|\bsshpass\s+-p\s*["']?([^\s"']{4,})|\bdocker\s+login\b[^\n|;]*?\s-p\s+["']?([^\s"']{4,})"#,
    ),
    cred(
        "env-name-value",
        Check::KeyedValue,
        r#"(?i)\bname["']?[ \t]*[:=][ \t]*["']?(?P<key>[A-Za-z0-9_.-]+)["']?[ \t]*(?:,|\r?\n)[ \t]*(?:-[ \t]*)?["']?value["']?[ \t]*[:=][ \t]*(?:"([^"\r\n]+)"|'([^'\r\n]+)'|([^\s"'`,;<>(){}\[\]]+))"#,
    ),
    cred(
        "secret-assignment",
        Check::KeyedValue,
        r#"(?i)(?P<key>[A-Za-z0-9_.$@-]*(?:password|passwd|passphrase|passwort|contrasena|pwd|pass|secret|token|api[_.-]?key|apikey|access[_.-]?key|private[_.-]?key|credentials?|creds|auth|login|accessid|[_.-]key|key)[A-Za-z0-9_.-]*)(?:["'\]]|\\")?ASSIGNMENT_OPERATOR(?:"([^"\r\n]+)"|'([^'\r\n]+)'|`([^`\r\n]+)`|\\"([^"\\\r\n]+)\\"|@"([^"\r\n]+)"|([^\s"'`,;<>(){}\[\]]+))"#,
    ),
    cred(
        "provider-assignment",
        Check::KeyedValue,
        r#"(?i)\b(?P<key>(?:PROVIDER_WORDS)[A-Za-z0-9_.-]*)(?:["'\]]|\\")?ASSIGNMENT_OPERATOR(?:"([^"\r\n]+)"|'([^'\r\n]+)'|`([^`\r\n]+)`|\\"([^"\\\r\n]+)\\"|([^\s"'`,;<>(){}\[\]]+))"#,
    ),
    cred(
        "secret-statement",
        Check::KeyedValue,
        r#"(?i)(?P<key>[A-Za-z0-9_.-]*(?:password|passwd|passphrase|secret|token|api[_.-]?key|apikey|private[_.-]?key|privkey|credentials?)[A-Za-z0-9_.-]*)[ \t]+(?:"([^"\r\n]{4,})"|'([^'\r\n]{4,})');"#,
    ),
    cred(
        "secret-comparison",
        Check::KeyedValue,
        r#"(?i)(?:"([^"\r\n]{4,})"|'([^'\r\n]{4,})')[ \t]*(?:===|!==|==|!=)[ \t]*(?P<key>[A-Za-z0-9_.$-]*(?:password|passwd|passphrase|secret|token|api[_.-]?key|apikey|pwd)[A-Za-z0-9_.-]*)"#,
    ),
    cred("high-entropy-string", Check::HighEntropyBase64, r#"["']([A-Za-z0-9+/]{20,200}={0,2})["']"#),
];

/// The operators between a key and its value, with the space around them:
/// `=`, `:`, `:=` and Makefile's `::=`, `:::=`, `?=`, `+=`, PHP's `.=`,
/// comparisons, `=>`, a CSV comma, a typed declaration (`var token string
/// =`, `val token: String =`) and a YAML block scalar whose value sits on
/// the next line (`token: |`).
const ASSIGNMENT_OPERATOR: &str = r#"(?:[ \t]*:[ \t]*[|>][-+]?[ \t]*\r?\n[ \t]*|(?:[ \t]*:[ \t]*|[ \t]+)(?:string|str|&'static[ \t]+str|&str|\[\]byte|char\[\])[ \t]*=[ \t]*|[ \t]*(?:===|==|!==|!=|:::=|::=|:=|\?=|\+=|\.=|\|\|=|=>|=|:|,)[ \t]*)"#;

/// A base64 run long enough to hide a credential: [`base64_candidates`]
/// finds the matches of this pattern without a regex.
#[cfg(test)]
const BASE64_CANDIDATE: &str = r"[A-Za-z0-9+/]{24,}={0,2}";
/// The shortest base64 run [`base64_candidates`] reports.
const BASE64_MIN_RUN: usize = 24;

/// Marker for a credential found inside a base64 blob.
const BASE64_RULE: &str = "base64-credential";
/// Marker for the `data:` values of a Kubernetes `Secret` manifest.
const KUBERNETES_RULE: &str = "kubernetes-secret-data";

struct Compiled {
    set: RegexSet,
    regexes: Vec<Regex>,
    kubernetes_kind: Regex,
}

static COMPILED: LazyLock<Compiled> = LazyLock::new(|| {
    let providers = crate::assignment::PROVIDER_WORDS.join("|");
    let patterns: Vec<String> = RULES
        .iter()
        .map(|r| {
            ascii_pattern(
                &r.pattern.replace("PROVIDER_WORDS", &providers).replace("ASSIGNMENT_OPERATOR", ASSIGNMENT_OPERATOR),
            )
        })
        .collect();
    Compiled {
        set: RegexSet::new(&patterns).expect("built-in credential patterns compile"),
        regexes: patterns.iter().map(|p| Regex::new(p).expect("credential pattern compiles")).collect(),
        kubernetes_kind: Regex::new(r#"(?im)^\s*kind:\s*["']?secret["']?\s*$"#).expect("kind pattern compiles"),
    }
});

/// Finds every credential in `text`, sorted by position, overlaps merged.
pub fn find_credentials(text: &str) -> Vec<CredentialFinding> {
    let mut findings = Vec::new();
    collect(text, true, &mut findings);
    merge(findings)
}

/// Replaces every credential in `text` with `[REDACTED:<rule>]`. Returns the
/// input unchanged (borrowed) when nothing was found.
///
/// ```
/// use cairn_guard::redact_credentials;
/// assert_eq!(
///     redact_credentials("db password = \"hunter2-Xq9\" ok"),
///     "db password = \"[REDACTED:secret-assignment]\" ok"
/// );
/// assert_eq!(redact_credentials("nothing to see"), "nothing to see");
/// ```
pub fn redact_credentials(text: &str) -> Cow<'_, str> {
    let findings = find_credentials(text);
    if findings.is_empty() {
        return Cow::Borrowed(text);
    }
    tracing::debug!(count = findings.len(), "redacting credentials");
    Cow::Owned(splice(text, &findings))
}

/// Replaces each finding's span with its marker.
pub(crate) fn splice(text: &str, findings: &[CredentialFinding]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut cursor = 0;
    for finding in findings {
        out.push_str(&text[cursor..finding.span.start]);
        out.push_str("[REDACTED:");
        out.push_str(finding.rule);
        out.push(']');
        cursor = finding.span.end;
    }
    out.push_str(&text[cursor..]);
    out
}

fn collect(text: &str, look_inside_base64: bool, findings: &mut Vec<CredentialFinding>) {
    let compiled = &*COMPILED;
    // Most texts hold no credential: a leftmost search that stops at the
    // first match state settles them faster than the overlapping search
    // that names every rule.
    let matched = compiled.set.is_match(text).then(|| compiled.set.matches(text));
    for index in matched.iter().flat_map(SetMatches::iter) {
        let rule = &RULES[index];
        let regex = &compiled.regexes[index];
        // The lazy DFA finds the matches; the slower capture engines then
        // run on each match alone, not on the whole text.
        for found in regex.find_iter(text) {
            // A few bytes before the match keep the look-behind (`\b`) context.
            let context_start = text.floor_char_boundary(found.start().saturating_sub(4));
            let window = &text[context_start..found.end()];
            let Some(captures) = regex.captures_at(window, found.start() - context_start) else { continue };
            let whole = captures.get(0).expect("group 0 always participates");
            let key = captures.name("key");
            let secret = captures
                .iter()
                .skip(1)
                .flatten()
                .find(|group| key.is_none_or(|key| key.range() != group.range()))
                .unwrap_or(whole);
            let span = context_start + secret.start()..context_start + secret.end();
            let quoted = is_quoted(text, span.start, span.end) || rule.name == "xml-secret-element";
            let accepted = match (rule.check, key) {
                (Check::KeyedValue, Some(key)) => {
                    let context = AssignmentContext {
                        quoted,
                        line_start: starts_line(text, context_start + key.start()),
                        line_end: ends_line(text, span.end + usize::from(quoted)),
                    };
                    // A comma after a key that only hints at a secret lists
                    // names (`NSKeyValueObserving, NSObject`); a CSV row
                    // needs a key that names a credential.
                    let between = window.get(key.end()..secret.start()).unwrap_or("");
                    let comma_only = between.trim_matches(|c: char| c.is_whitespace() || c == '"' || c == '\'') == ",";
                    (!comma_only || key_kind(key.as_str()) == Some(KeyKind::Credential))
                        && keyed_value_is_secret(key.as_str(), secret.as_str(), context)
                }
                (Check::HighEntropyBase64, _) => {
                    passes(Check::HighEntropyBase64, secret.as_str(), quoted) && !names_a_digest(text, span.start)
                }
                (check, _) => passes(check, secret.as_str(), quoted),
            };
            if accepted {
                findings.push(CredentialFinding { rule: rule.name, span });
            }
        }
    }
    if compiled.kubernetes_kind.is_match(text) {
        kubernetes_data_values(text, findings);
    }
    if look_inside_base64 {
        for candidate in base64_candidates(text) {
            if decodes_to_credential(&text[candidate.clone()]) {
                findings.push(CredentialFinding { rule: BASE64_RULE, span: candidate });
            }
        }
    }
}

fn is_base64_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'+' || b == b'/'
}

/// The matches, in order, of [`BASE64_CANDIDATE`] (`[A-Za-z0-9+/]{24,}={0,2}`):
/// every maximal run of base64 characters at least [`BASE64_MIN_RUN`] long,
/// with up to two `=` after it. A probe [`BASE64_MIN_RUN`] - 1 bytes ahead
/// skips most of ordinary text without looking at each byte.
pub(crate) fn base64_candidates(text: &str) -> Vec<std::ops::Range<usize>> {
    let bytes = text.as_bytes();
    let mut candidates = Vec::new();
    // Invariant: `start` is 0 or follows a byte outside the base64 class,
    // and no match starts before it (past the candidates already found).
    let mut start = 0;
    while let Some(&probe) = bytes.get(start + BASE64_MIN_RUN - 1) {
        if !is_base64_byte(probe) {
            start += BASE64_MIN_RUN;
            continue;
        }
        if let Some(gap) = bytes[start..start + BASE64_MIN_RUN - 1].iter().rposition(|&b| !is_base64_byte(b)) {
            start += gap + 1;
            continue;
        }
        let mut end = start + BASE64_MIN_RUN;
        while bytes.get(end).is_some_and(|&b| is_base64_byte(b)) {
            end += 1;
        }
        for _ in 0..2 {
            if bytes.get(end) == Some(&b'=') {
                end += 1;
            }
        }
        candidates.push(start..end);
        start = end;
    }
    candidates
}

/// True when the line holding `index` speaks of a digest or a revision
/// (`hash(...)`, `sha256 =`, `checksum`, `rev =`, `integrity`): a random
/// looking string there is a fingerprint of public data, not a secret.
fn names_a_digest(text: &str, index: usize) -> bool {
    let start = text[..index].rfind('\n').map_or(0, |n| n + 1);
    let end = text[index..].find('\n').map_or(text.len(), |n| index + n);
    let line = text[start..end].to_ascii_lowercase();
    [
        "hash",
        "digest",
        "sha",
        "md5",
        "checksum",
        "fingerprint",
        "integrity",
        "commit",
        "rev",
        "nonce",
        "salt",
        "uuid",
        "id\"",
    ]
    .iter()
    .any(|word| line.contains(word))
}

fn is_quoted(text: &str, start: usize, end: usize) -> bool {
    let before = text[..start].chars().next_back();
    let after = text[end..].chars().next();
    matches!((before, after), (Some('"'), Some('"')) | (Some('\''), Some('\'')) | (Some('`'), Some('`')))
        || (text[..start].ends_with("\\\"") && text[end..].starts_with("\\\""))
}

/// True when only indentation, a list dash, `export`/`set`/`declare` or an
/// opening quote or brace stand between the start of the line and `index`:
/// the shape of a configuration line.
fn starts_line(text: &str, index: usize) -> bool {
    let line = &text[text[..index].rfind('\n').map_or(0, |n| n + 1)..index];
    let mut rest = line.trim_start_matches([' ', '\t', '-', '{', '"', '\'', '$', '@', '[']);
    for prefix in ["export ", "set ", "declare ", "local ", "env:", "$env:", "setx "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest).trim_start();
    }
    rest.trim_matches(['"', '\'']).is_empty()
}

/// True when only spaces, a comma or semicolon, a closing bracket or a
/// comment follow `index` on its line.
fn ends_line(text: &str, index: usize) -> bool {
    let rest = text.get(index..).unwrap_or("");
    let rest = &rest[..rest.find('\n').unwrap_or(rest.len())];
    let rest = rest.trim_start_matches([' ', '\t', '\r', ',', ';', '}', ']', ')', '"', '\'']);
    rest.is_empty() || rest.starts_with('#') || rest.starts_with("//")
}

fn decodes_to_credential(candidate: &str) -> bool {
    let trimmed = candidate.trim_end_matches('=');
    let Ok(bytes) = base64::engine::general_purpose::STANDARD_NO_PAD.decode(trimmed) else {
        return false;
    };
    let Ok(decoded) = std::str::from_utf8(&bytes) else {
        return false;
    };
    let mut inner = Vec::new();
    collect(decoded, false, &mut inner);
    !inner.is_empty()
}

/// Redacts the values under `data:` / `stringData:` in a Kubernetes Secret
/// manifest: every line indented deeper than the `data:` key, including the
/// continuation lines of block scalars.
fn kubernetes_data_values(text: &str, findings: &mut Vec<CredentialFinding>) {
    let mut data_indent: Option<usize> = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let line_start = offset;
        offset += line.len();
        let content = line.trim_end_matches(['\n', '\r']);
        let indent = content.len() - content.trim_start().len();
        let trimmed = content.trim();
        if trimmed.is_empty() {
            continue;
        }
        if let Some(base) = data_indent {
            if indent > base {
                let value_start = match trimmed.find(':') {
                    Some(colon) if !trimmed.starts_with('#') => indent + colon + 1,
                    _ if trimmed.starts_with('#') => continue,
                    _ => indent,
                };
                let raw = &content[value_start..];
                let value = raw.trim().trim_matches(|c| c == '"' || c == '\'');
                if value.len() >= 4 && !matches!(value, "|" | ">" | "|-" | ">-" | "|+" | ">+") {
                    let start = line_start + value_start + raw.find(value).unwrap_or(0);
                    findings.push(CredentialFinding { rule: KUBERNETES_RULE, span: start..start + value.len() });
                }
                continue;
            }
            data_indent = None;
        }
        if matches!(trimmed, "data:" | "stringData:") {
            data_indent = Some(indent);
        }
    }
}

fn passes(check: Check, value: &str, quoted: bool) -> bool {
    match check {
        Check::KeyedValue => plausible_secret_value(value, quoted),
        Check::CommandLine => value.chars().count() >= 4 && !is_placeholder(value) && !looks_like_code(value),
        Check::None => true,
        Check::NotDocumentedExample => !value.ends_with("EXAMPLE"),
        Check::LettersAndDigits => {
            value.bytes().any(|b| b.is_ascii_alphabetic()) && value.bytes().any(|b| b.is_ascii_digit())
        }
        Check::NotPlaceholder => !is_placeholder(value),
        Check::AssignedValue => plausible_secret_value(value, quoted),
        Check::HighEntropyBase64 => is_high_entropy_base64(value),
    }
}

/// A base64 string that reads as random bytes: upper and lower case and
/// digits, and the entropy of random text (`AbstractSingletonProxyFactoryBean`
/// has no digits).
fn is_high_entropy_base64(value: &str) -> bool {
    let body = value.trim_end_matches('=');
    let bytes = body.as_bytes();
    let digits = bytes.iter().filter(|b| b.is_ascii_digit()).count();
    bytes.iter().any(u8::is_ascii_uppercase)
        && bytes.iter().any(u8::is_ascii_lowercase)
        && digits >= 2
        && crate::assignment::entropy(body) >= 4.3
        && !is_placeholder(value)
}

/// An assigned value counts as a secret when it is not a placeholder, not a
/// code expression, and either quoted (8+ characters) or mixing at least two
/// character classes.
fn plausible_secret_value(value: &str, quoted: bool) -> bool {
    if is_placeholder(value) || looks_like_code(value) {
        return false;
    }
    let has = |f: fn(&u8) -> bool| value.as_bytes().iter().any(f);
    let classes = [
        has(u8::is_ascii_lowercase),
        has(u8::is_ascii_uppercase),
        has(u8::is_ascii_digit),
        has(|b| !b.is_ascii_alphanumeric()),
    ]
    .iter()
    .filter(|present| **present)
    .count();
    (quoted && value.len() >= 8) || (classes >= 2 && value.len() >= 6 && (quoted || value.len() >= 8))
}

/// Sorts findings by start and merges overlapping spans; the earlier-listed
/// rule (the more specific one) names a merged span.
fn merge(mut findings: Vec<CredentialFinding>) -> Vec<CredentialFinding> {
    findings.sort_by(|a, b| a.span.start.cmp(&b.span.start).then(b.span.end.cmp(&a.span.end)));
    let mut merged: Vec<CredentialFinding> = Vec::with_capacity(findings.len());
    for finding in findings {
        match merged.last_mut() {
            Some(last) if finding.span.start < last.span.end => {
                last.span.end = last.span.end.max(finding.span.end);
                if rule_rank(finding.rule) < rule_rank(last.rule) {
                    last.rule = finding.rule;
                }
            }
            _ => merged.push(finding),
        }
    }
    merged
}

fn rule_rank(name: &str) -> usize {
    RULES.iter().position(|r| r.name == name).unwrap_or(RULES.len())
}

#[cfg(test)]
mod tests;
