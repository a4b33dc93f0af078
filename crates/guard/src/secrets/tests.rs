use super::*;

/// (rule, text containing a credential, the secret part that must vanish).
const POSITIVES: &[(&str, &str, &str)] = &[
    ("private-key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "MIIEow"),
    ("private-key", "key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk", "b3BlbnNzaC1rZXk"),
    ("aws-access-key", "aws_access_key_id = ASIAY34FZKBOKMUTVV7A", "ASIAY34FZKBOKMUTVV7A"),
    ("aws-secret-key", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENGbPxRfiCYzEXAMPLEKEYa", "wJalrXUtnFEMIK7MDENG"),
    ("anthropic-api-key", "key sk-ant-api03-abcdEFGH1234ijklMNOP5678qrstUVWX", "sk-ant-api03-abcdEFGH"),
    ("openai-api-key", "OPENAI: sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1w", "sk-proj-Ab3dEf6hIj9k"),
    ("github-token", "token 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", "ghp_wWPw5k4aXcaT4fNP0"),
    ("github-token", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuv", "github_pat_11ABCDEFG"),
    ("gitlab-token", "glpat-Abcdefghij0123456789", "glpat-Abcdefghij0123456789"),
    ("slack-token", "xoxb-263594206564-FGqddMF8t08v8N7Oq4i57vs1", "xoxb-263594206564"),
    (
        "slack-webhook",
        "post to https://hooks.slack.com/services/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",
        "bJtrpFi1fO1JMCcwLx8uZyAg",
    ),
    ("google-api-key", "AIzaSyNHxIf32IQ1a1yjl3ZJIqKZqzLAK1XhDk-", "AIzaSyNHxIf32IQ1a1yjl3ZJIqKZqzLAK1XhDk-"),
    ("stripe-key", "sk_live_ReTllpYQYfIZu2Jnf2lAPFjD", "sk_live_ReTllpYQYfIZu2Jnf2lAPFjD"),
    (
        "jwt",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "dozjgNryP4J3jVmNHl0w5N",
    ),
    ("bearer-token", "Authorization: Bearer abc123def456ghi789jkl", "abc123def456ghi789jkl"),
    ("basic-auth", "Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
    ("url-password", "postgres://app:s3cr3t-Pw@db.internal:5432/app", "s3cr3t-Pw"),
    ("url-password", "https://cafebabe:deadbeef@gems.example.com/", "deadbeef"),
    ("npm-token", "//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789", "npm_abcdefghijklmnop"),
    ("huggingface-token", "HF hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "hf_abcdefghijklmnopq"),
    ("twilio-key", "SK0123456789abcdef0123456789abcdef", "SK0123456789abcdef"),
    ("bundler-credentials", "export BUNDLE_GEMS__EXAMPLE__COM=user1:pass2word", "user1:pass2word"),
    ("xml-password-attribute", "<add key=\"ClearTextPassword\" value=\"Hunter2Pass\" />", "Hunter2Pass"),
    ("secret-assignment", "DB_PASSWORD=\"correct horse\"", "correct horse"),
    ("secret-assignment", "password = \"rootpasswd\"", "rootpasswd"),
    ("secret-assignment", "SNYK_TOKEN ?= \"12345678-ABCD-ABCD-ABCD-1234567890AB\"", "12345678-ABCD"),
    ("secret-assignment", "\"oktaApiToken\": \"00ebObu4zSNkyc6dimLvUwq4KpTEop-PCEnnfSTpD3\",", "00ebObu4zSNkyc6dim"),
    ("secret-assignment", "SUPABASE_SERVICE_ROLE_KEY: Xk29aLq0Zp", "Xk29aLq0Zp"),
    ("secret-assignment", "client_secret=AbCdEf123456", "AbCdEf123456"),
    ("secret-statement", "private_key 'Qm7vT2xkP9wLr4Zs';", "Qm7vT2xkP9wLr4Zs"),
    ("secret-comparison", "if (\"Tz8qLm3vXw9pRk\" == user_password) {", "Tz8qLm3vXw9pRk"),
    ("high-entropy-string", "value = \"oZH6A9VBpyCFIJ8ry7r7WTq64YIGwYYixko0txcI\"", "oZH6A9VBpyCFIJ8ry7r7"),
    ("secret-assignment", "var linodeToken string = \"k3Jd9sLq2mXv8pRt5wZy\"", "k3Jd9sLq2mXv8pRt5wZy"),
    ("secret-assignment", "deploy_token: |\n  k3Jd9sLq2mXv8pRt5wZy", "k3Jd9sLq2mXv8pRt5wZy"),
    ("secret-assignment", "GRADLE_TOKEN += \"k3Jd9sLq2mXv8pRt5wZy\"", "k3Jd9sLq2mXv8pRt5wZy"),
    ("secret-assignment", "NSString *dbkey = @\"k3Jd9sLq2mXv8pRt\";", "k3Jd9sLq2mXv8pRt"),
    ("secret-assignment", "BUNDLE_GEMS__EXAMPLE__COMToken=64ad485b:ce6c5e51", "64ad485b:ce6c5e51"),
    ("xml-secret-element", "<asanaToken>\n    1295237944238180\n</asanaToken>", "1295237944238180"),
    ("telegram-bot-token", "bot 403350832:PZAGoro1S6c6QwX_sRzdbplHTr2osBHrd9x", "PZAGoro1S6c6QwX"),
];

#[test]
fn every_rule_redacts_its_secret() {
    for (rule, text, secret) in POSITIVES {
        let findings = find_credentials(text);
        let redacted = redact_credentials(text);
        if secret.is_empty() {
            // Values with spaces are not assignments we can delimit; the
            // case documents that the rule does not over-reach.
            assert!(findings.iter().all(|f| f.rule != *rule), "{rule} should not fire on {text:?}");
            continue;
        }
        assert!(findings.iter().any(|f| f.rule == *rule), "{rule} did not fire on {text:?}: {findings:?}");
        assert!(!redacted.contains(secret), "{rule}: {secret:?} survived in {redacted:?}");
        assert!(redacted.contains("[REDACTED:"), "{redacted}");
    }
}

/// The guard's evaluation corpus: its positive `secrets` rows exercise the
/// provider formats whose fixtures are long random strings.
const CORPUS: &str = include_str!("../../test_data/corpus.jsonl");

#[test]
fn every_rule_has_a_positive_case() {
    let mut covered: Vec<&str> = POSITIVES.iter().map(|(rule, _, _)| *rule).collect();
    for line in CORPUS.lines().filter(|line| line.contains(r#""kind": "secrets", "label": "positive""#)) {
        let text: String = serde_json::from_str::<serde_json::Value>(line).expect("corpus row is JSON")["text"]
            .as_str()
            .expect("row has a text")
            .to_owned();
        covered.extend(find_credentials(&text).iter().map(|f| f.rule));
        let mut inner = Vec::new();
        collect(&text, false, &mut inner);
        covered.extend(inner.iter().map(|f| f.rule));
    }
    let untested: Vec<&str> = RULES.iter().map(|r| r.name).filter(|name| !covered.contains(name)).collect();
    assert!(untested.is_empty(), "rules without a positive case: {untested:?}");
}

/// A token of `length` characters drawn from `alphabet` by a seeded stream.
fn token(alphabet: &str, length: usize, seed: u64) -> String {
    let alphabet = alphabet.as_bytes();
    let mut next = crate::xorshift(seed);
    (0..length).map(|_| char::from(alphabet[(next() % alphabet.len() as u64) as usize])).collect()
}

const ALNUM: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

#[test]
fn prefixed_formats_fire() {
    let cases = [
        ("pypi-token", format!("pypi-AgEIcHlwaS5vcmc{}", token(ALNUM, 60, 1))),
        ("sendgrid-key", format!("SG.{}.{}", token(ALNUM, 22, 2), token(ALNUM, 43, 3))),
        ("digitalocean-token", format!("dop_v1_{}", "a1".repeat(32))),
        ("vault-token", "hvs.CAESIJ1a2b3c4d5e6f7g8h9i0jKLMN".to_owned()),
        ("age-secret-key", format!("AGE-SECRET-KEY-1{}", token("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58, 4))),
        ("databricks-token", format!("dapi{}", "0a".repeat(16))),
        ("telegram-bot-token", format!("123456789:AA{}", token(ALNUM, 33, 5))),
        ("discord-bot-token", "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs".to_owned()),
        ("artifactory-token", "X-JFrog-Art-Api: AKCp8abcdefghij".to_owned()),
        ("grafana-token", format!("glsa_{}", "Ab1".repeat(12))),
        ("github-token", format!("ghp_{}", token(ALNUM, 36, 6))),
    ];
    for (rule, text) in cases {
        let findings = find_credentials(&text);
        assert!(findings.iter().any(|f| f.rule == rule), "{rule} on {text}: {findings:?}");
    }
}

#[test]
fn placeholders_and_prose_are_left_alone() {
    let benign = [
        "AKIAIOSFODNN7EXAMPLE is the documented example key id",
        "password = \"${DB_PASSWORD}\"",
        "api_key: <your-api-key>",
        "token = os.environ['TOKEN']",
        "password: getpass()",
        "secret: true",
        "TOKEN=xxxxxxxxxxxxxxxx",
        "The password is something only you know.",
        "My secret: I love baking bread on Sundays.",
        "She has a token of appreciation for the team.",
        "Use the access key from the console.",
        "Call me at 555-0100 tomorrow; the key is under the mat.",
        "let api_key = config.api_key.clone();",
        "ask-for-help task-management sk-learn",
        "https://example.com/path?page=2",
        "https://user:${PASSWORD}@example.com/",
        "mailto:someone@example.com and ssh://git@github.com/org/repo",
        "ANTHROPIC_API_KEY=\"my-anthropic-api-key\"",
        "export STRIPE_SECRET=super-secret-token",
    ];
    for text in benign {
        assert_eq!(redact_credentials(text), text, "false positive");
    }
}

/// A value that names itself is a placeholder; give it digits or capitals
/// and it is a value again.
#[test]
fn values_that_name_themselves_are_placeholders_until_they_look_random() {
    for (value, placeholder) in [
        ("my-anthropic-api-key", true),
        ("super-secret-token", true),
        ("database.password", true),
        ("correct-horse-battery", false),
        ("my-anthropic-api-key-7Qz9Lk2Vx", false),
        ("Database-Password-2024", false),
    ] {
        assert_eq!(is_placeholder(value), placeholder, "{value}");
    }
}

#[test]
fn base64_wrapped_credentials_are_found() {
    let inner = "aws_secret = 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";
    let encoded = base64::engine::general_purpose::STANDARD.encode(inner);
    let text = format!("config blob: {encoded}");
    let findings = find_credentials(&text);
    assert_eq!(findings.iter().map(|f| f.rule).collect::<Vec<_>>(), vec![BASE64_RULE]);
    let plain = base64::engine::general_purpose::STANDARD.encode("just an ordinary sentence, nothing else");
    assert!(find_credentials(&plain).is_empty());
}

#[test]
fn kubernetes_secret_data_is_redacted() {
    let manifest = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db-user-pass\ntype: Opaque\ndata:\n  password: UyFCXCpkJHpEc2I9\n  username: YWRtaW4=\n  .dockercfg: |\n    eyJhdXRocyI6e30K\n";
    let redacted = redact_credentials(manifest);
    for secret in ["UyFCXCpkJHpEc2I9", "YWRtaW4=", "eyJhdXRocyI6e30K"] {
        assert!(!redacted.contains(secret), "{secret} in {redacted}");
    }
    for kept in ["name: db-user-pass", "type: Opaque", "kind: Secret"] {
        assert!(redacted.contains(kept), "{kept} lost from {redacted}");
    }
    let config_map = manifest.replace("kind: Secret", "kind: ConfigMap");
    assert!(!redact_credentials(&config_map).contains("[REDACTED:kubernetes-secret-data]"));
}

#[test]
fn redaction_is_idempotent_and_keeps_surrounding_text() {
    let text = "export GITHUB_TOKEN=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 # deploy";
    let once = redact_credentials(text).into_owned();
    assert_eq!(once, "export GITHUB_TOKEN=[REDACTED:github-token] # deploy");
    assert_eq!(redact_credentials(&once), once);
}

#[test]
fn overlapping_rules_merge_into_one_marker() {
    let text = "access_token=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig123";
    let findings = find_credentials(text);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0].rule, "jwt");
}

#[test]
fn base64_scan_equals_the_pattern() {
    let regex = Regex::new(BASE64_CANDIDATE).expect("base64 pattern compiles");
    let atoms = ["A", "z", "9", "+", "/", "=", "==", "===", " ", ".", "é", "彼", "QUJD", "aGVsbG8gd29ybGQh"];
    let mut next = crate::xorshift(0x2545_F491_4F6C_DD1D);
    for _ in 0..20_000 {
        let text: String = (0..next() % 40).map(|_| atoms[(next() % atoms.len() as u64) as usize]).collect();
        let expected: Vec<_> = regex.find_iter(&text).map(|m| m.range()).collect();
        assert_eq!(base64_candidates(&text), expected, "input {text:?}");
    }
}
