//! Resolution, validation and edits of the settings.

use std::path::Path;

use super::storage::check_storage_url;
use super::*;

fn load_with(text: &str, flags: &Flags, environment: &Environment) -> Result<Settings, ConfigError> {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join(CONFIG_FILE_NAME), text).unwrap();
    let flags = Flags { home: Some(home.path().to_owned()), ..flags.clone() };
    Settings::load(&flags, environment)
}

fn load(text: &str) -> Result<Settings, ConfigError> {
    load_with(text, &Flags::default(), &Environment::default())
}

fn error(text: &str) -> String {
    load(text).unwrap_err().to_string()
}

fn source(settings: &Settings, key: &str) -> Source {
    settings.entries.iter().find(|entry| entry.key == key).unwrap_or_else(|| panic!("no entry {key}")).source
}

#[test]
fn defaults_without_a_file() {
    let home = tempfile::tempdir().unwrap();
    let flags = Flags { home: Some(home.path().to_owned()), ..Flags::default() };
    let settings = Settings::load(&flags, &Environment::default()).unwrap();
    assert_eq!(settings.server.port, DEFAULT_PORT);
    assert!(settings.server.host.is_loopback());
    assert_eq!(settings.memory, MemorySettings::default());
    assert!(settings.warnings.is_empty());
    assert_eq!(source(&settings, "home"), Source::Flag);
    assert_eq!(source(&settings, "server.port"), Source::Default);
}

#[test]
fn every_invalid_value_names_the_file_and_key() {
    for (text, key) in [
        (r#"{"server": {"port": 70000}}"#, "`server.port`"),
        (r#"{"server": {"port": "80"}}"#, "`server.port`"),
        (r#"{"server": {"host": "localhost"}}"#, "`server.host`"),
        (r#"{"server": {"heartbeat_secs": 0}}"#, "`server.heartbeat_secs`"),
        (r#"{"server": {"max_body_bytes": 10}}"#, "`server.max_body_bytes`"),
        (r#"{"server": {"allow_non_loopback": "yes"}}"#, "`server.allow_non_loopback`"),
        (r#"{"memory": {"history_idle_hours": -1}}"#, "`memory.history_idle_hours`"),
        (r#"{"memory": {"history_max_days": 0}}"#, "`memory.history_max_days`"),
        (r#"{"memory": {"extra_prefixes": "team."}}"#, "`memory.extra_prefixes`"),
        (r#"{"memory": {"extra_prefixes": ["Team"]}}"#, "`memory.extra_prefixes`"),
        (r#"{"embedding": {"pool_workers": 0}}"#, "`embedding.pool_workers`"),
        (r#"{"llm": {"base_url": "ftp://x"}}"#, "`llm.base_url`"),
        (r#"{"llm": {"max_retries": 99}}"#, "`llm.max_retries`"),
        (r#"{"skills": {"max_triggered": -3}}"#, "`skills.max_triggered`"),
        (r#"{"skills": {"auto_create_from_sessions": "yes"}}"#, "`skills.auto_create_from_sessions`"),
        (r#"{"skills": {"approval_required": 0}}"#, "`skills.approval_required`"),
        (r#"{"skills": {"auto_refine_on_deviation": "on"}}"#, "`skills.auto_refine_on_deviation`"),
        (r#"{"skills": {"auto_min_tool_calls": 0}}"#, "`skills.auto_min_tool_calls`"),
        (r#"{"skills": {"auto_min_tool_calls": 2.5}}"#, "`skills.auto_min_tool_calls`"),
        (r#"{"skills": {"auto_similarity_threshold": 1.5}}"#, "`skills.auto_similarity_threshold`"),
        (r#"{"skills": {"auto_similarity_threshold": "high"}}"#, "`skills.auto_similarity_threshold`"),
        (r#"{"skills": {"max_auto_skills": 0}}"#, "`skills.max_auto_skills`"),
        (r#"{"skills": {"stale_after_days": 0}}"#, "`skills.stale_after_days`"),
        (r#"{"skills": {"archive_after_days": 99999}}"#, "`skills.archive_after_days`"),
        (r#"{"skills": {"stale_after_days": 60, "archive_after_days": 60}}"#, "`skills.archive_after_days`"),
        (r#"{"skills": {"pending_ttl_days": -1}}"#, "`skills.pending_ttl_days`"),
        (r#"{"skills": {"generate_scripts": "no"}}"#, "`skills.generate_scripts`"),
        (r#"{"agent": {"spec_pins": [1]}}"#, "`agent.spec_pins`"),
        (r#"{"storage": {"url": "sqlite:///tmp/memory.db"}}"#, "`storage.url`"),
        (r#"{"storage": {"url": "postgres:///cairn"}}"#, "`storage.url`"),
        (r#"{"storage": {"url": 5432}}"#, "`storage.url`"),
        (r#"{"storage": "postgres://db/cairn"}"#, "`storage`"),
        (r#"{"storage": {"postgres_pool_size": 0}}"#, "`storage.postgres_pool_size`"),
        (r#"{"storage": {"postgres_pool_size": -4}}"#, "`storage.postgres_pool_size`"),
        (r#"{"storage": {"postgres_pool_size": "8"}}"#, "`storage.postgres_pool_size`"),
        (r#"{"storage": {"postgres_pool_size": 2.5}}"#, "`storage.postgres_pool_size`"),
        (r#"{"storage": {"postgres_pool_size": 1025}}"#, "`storage.postgres_pool_size`"),
        (r#"{"memory": {"episodic_cap": 0}}"#, "`memory.episodic_cap`"),
        (r#"{"memory": {"write_approval": "yes"}}"#, "`memory.write_approval`"),
        (r#"{"memory": {"write_approval": 1}}"#, "`memory.write_approval`"),
        (r#"{"memory": {"episodic_cap": -1}}"#, "`memory.episodic_cap`"),
        (r#"{"memory": {"episodic_cap": "10000"}}"#, "`memory.episodic_cap`"),
        (r#"{"memory": {"episodic_cap": 1.5}}"#, "`memory.episodic_cap`"),
        (r#"{"memory": {"episodic_cap": 10000001}}"#, "`memory.episodic_cap`"),
        (r#"{"memory": {"episodic_cap": 1e30}}"#, "`memory.episodic_cap`"),
        (r#"{"hooks": {"transforms": 5}}"#, "`hooks`"),
        (r#"{"host": {"context_deadline_ms": 49}}"#, "`host.context_deadline_ms`"),
        (r#"{"host": {"context_deadline_ms": 60001}}"#, "`host.context_deadline_ms`"),
        (r#"{"host": {"record_deadline_ms": "fast"}}"#, "`host.record_deadline_ms`"),
        (r#"{"host": {"record_deadline_ms": 0}}"#, "`host.record_deadline_ms`"),
        (r#"{"host": {"start_gateway": "yes"}}"#, "`host.start_gateway`"),
        (r#"{"host": true}"#, "`host`"),
        (r#"{"context": {"max_inject_chars": 999}}"#, "`context.max_inject_chars`"),
        (r#"{"server": 5}"#, "`server`"),
        (r#"[1]"#, "`(top level)`"),
    ] {
        let message = error(text);
        assert!(message.contains(key), "{text}: {message}");
        assert!(message.contains(CONFIG_FILE_NAME), "{text}: {message}");
    }
    assert!(error("{nope").contains("not valid JSON"));
}

#[test]
fn unknown_and_unsupported_keys_warn_once_each_and_load() {
    let settings = load(
        r#"{"server": {"prot": 1}, "colour": {}, "memory": {"migrated": true},
            "skills": {"judge_model": "small"}}"#,
    )
    .unwrap();
    assert_eq!(settings.warnings.len(), 4, "{:?}", settings.warnings);
    for key in ["`server.prot`", "`colour`", "`memory.migrated`", "`skills.judge_model`"] {
        assert_eq!(settings.warnings.iter().filter(|warning| warning.contains(key)).count(), 1, "{key}");
    }
}

#[test]
fn flags_win_over_environment_over_file_over_default() {
    let text = r#"{"server": {"port": 9000, "heartbeat_secs": 30},
                   "llm": {"model": "file-model", "base_url": "http://127.0.0.1:1"}}"#;
    let environment = Environment::from_pairs(&[
        ("CAIRN_SERVE_PORT", "9100"),
        ("CAIRN_LLM_MODEL", "env-model"),
        ("CAIRN_HEARTBEAT_SECS", ""),
    ]);
    let flags = Flags { port: Some(0), ..Flags::default() };
    let settings = load_with(text, &flags, &environment).unwrap();
    assert_eq!((settings.server.port, source(&settings, "server.port")), (0, Source::Flag));
    assert_eq!(settings.server.heartbeat_secs, 30, "an empty variable is unset");
    assert_eq!(source(&settings, "server.heartbeat_secs"), Source::File);
    assert_eq!(settings.llm.model.as_deref(), Some("env-model"));
    assert_eq!(source(&settings, "llm.model"), Source::Env);
    assert_eq!(settings.llm.base_url.as_deref(), Some("http://127.0.0.1:1"));
    assert_eq!(source(&settings, "server.max_body_bytes"), Source::Default);
    let settings = load_with(text, &Flags::default(), &environment).unwrap();
    assert_eq!((settings.server.port, source(&settings, "server.port")), (9100, Source::Env));
}

#[test]
fn host_settings_default_and_come_from_the_file_or_the_environment() {
    let defaults = load("{}").unwrap();
    assert_eq!(
        (defaults.host.context_deadline_ms, defaults.host.record_deadline_ms, defaults.host.start_gateway),
        (DEFAULT_CONTEXT_DEADLINE_MS, DEFAULT_RECORD_DEADLINE_MS, true)
    );
    let text = r#"{"host": {"context_deadline_ms": 1500, "record_deadline_ms": 300, "start_gateway": true}}"#;
    let file = load(text).unwrap();
    assert_eq!((file.host.context_deadline_ms, file.host.record_deadline_ms), (1500, 300));
    assert_eq!(source(&file, "host.record_deadline_ms"), Source::File);
    let off = Environment::from_pairs(&[("CAIRN_HOST_START_GATEWAY", "0")]);
    let env = load_with(text, &Flags::default(), &off).unwrap();
    assert!(!env.host.start_gateway, "the environment wins over the file");
    assert_eq!(source(&env, "host.start_gateway"), Source::Env);
}

#[test]
fn record_sessions_defaults_on_and_the_private_session_variable_only_turns_it_off() {
    // (file, CAIRN_PRIVATE_SESSION, recorded, source, warned)
    let cases = [
        ("{}", None, true, Source::Default, false),
        (r#"{"memory": {"record_sessions": false}}"#, None, false, Source::File, false),
        (r#"{"memory": {"record_sessions": true}}"#, None, true, Source::File, false),
        ("{}", Some("1"), false, Source::Env, false),
        ("{}", Some("TRUE"), false, Source::Env, false),
        ("{}", Some("yes"), false, Source::Env, false),
        ("{}", Some("0"), true, Source::Default, false),
        ("{}", Some("no"), true, Source::Default, false),
        (r#"{"memory": {"record_sessions": false}}"#, Some("0"), false, Source::File, false),
        ("{}", Some("maybe"), false, Source::Env, true),
    ];
    for (text, value, recorded, from, warned) in cases {
        let pairs: Vec<(&str, &str)> = value.map(|value| ("CAIRN_PRIVATE_SESSION", value)).into_iter().collect();
        let settings = load_with(text, &Flags::default(), &Environment::from_pairs(&pairs)).unwrap();
        let case = format!("{text} {value:?}");
        assert_eq!(settings.record_sessions, recorded, "{case}");
        assert_eq!(source(&settings, "memory.record_sessions"), from, "{case}");
        let warning = settings.warnings.iter().any(|warning| warning.contains("CAIRN_PRIVATE_SESSION"));
        assert_eq!(warning, warned, "{case}: {:?}", settings.warnings);
    }
    let message = load(r#"{"memory": {"record_sessions": "no"}}"#).unwrap_err().to_string();
    assert!(message.contains("`memory.record_sessions`"), "{message}");
}

#[test]
fn bad_environment_values_name_the_variable() {
    for (name, value) in [
        ("CAIRN_SERVE_PORT", "eighty"),
        ("CAIRN_SERVE_HOST", "localhost"),
        ("CAIRN_HEARTBEAT_SECS", "0"),
        ("CAIRN_SKIP_MODEL_DOWNLOAD", "maybe"),
        ("CAIRN_STORAGE_URL", "mysql://db/cairn"),
        ("CAIRN_HOST_START_GATEWAY", "maybe"),
    ] {
        let message =
            load_with("{}", &Flags::default(), &Environment::from_pairs(&[(name, value)])).unwrap_err().to_string();
        assert!(message.contains(name), "{message}");
    }
}

#[test]
fn the_storage_url_comes_from_the_environment_or_the_file_and_is_shown_without_its_password() {
    let text = r#"{"storage": {"url": "postgres://cairn:hunter2@db.internal:5432/cairn"}}"#;
    let settings = load(text).unwrap();
    assert_eq!(settings.storage_url.as_deref(), Some("postgres://cairn:hunter2@db.internal:5432/cairn"));
    let shown = settings.entries.iter().find(|entry| entry.key == "storage.url").unwrap();
    assert_eq!(shown.value, Value::String("postgres://cairn:***@db.internal:5432/cairn".to_owned()));
    assert_eq!(shown.source, Source::File);
    let environment = Environment::from_pairs(&[("CAIRN_STORAGE_URL", "postgresql://other/cairn")]);
    let settings = load_with(text, &Flags::default(), &environment).unwrap();
    assert_eq!(settings.storage_url.as_deref(), Some("postgresql://other/cairn"));
    assert_eq!(source(&settings, "storage.url"), Source::Env);
    let settings = load("{}").unwrap();
    assert_eq!((settings.storage_url.as_deref(), source(&settings, "storage.url")), (None, Source::Default));
    let message = load(r#"{"storage": {"url": "postgres://cairn:hunter2@/cairn"}}"#).unwrap_err().to_string();
    assert!(!message.contains("hunter2"), "{message}");
    assert!(message.contains("must name a host"), "{message}");
    let message = load(r#"{"storage": {"url": "mysql://cairn:hunter2@db/cairn"}}"#).unwrap_err().to_string();
    assert!(message.contains("must be a postgres:// URL") && !message.contains("hunter2"), "{message}");
    let environment = Environment::from_pairs(&[("CAIRN_STORAGE_URL", "sqlite:///var/cairn/memory.db")]);
    let message = load_with("{}", &Flags::default(), &environment).unwrap_err().to_string();
    assert!(message.contains("CAIRN_STORAGE_URL"), "{message}");
}

#[test]
fn the_episodic_cap_and_the_pool_size_default_and_come_from_the_file() {
    let settings = load("{}").unwrap();
    assert_eq!((settings.episodic_cap, source(&settings, "memory.episodic_cap")), (10_000, Source::Default));
    assert_eq!((settings.postgres_pool_size, source(&settings, "storage.postgres_pool_size")), (8, Source::Default));
    let settings = load(r#"{"memory": {"episodic_cap": 10000000}, "storage": {"postgres_pool_size": 1024}}"#).unwrap();
    assert_eq!(source(&settings, "memory.episodic_cap"), Source::File);
    assert_eq!(source(&settings, "storage.postgres_pool_size"), Source::File);
    let config = settings.memory_config();
    assert_eq!((config.episodic_cap, config.postgres_pool_size), (10_000_000, 1024));
    for (text, range) in [
        (r#"{"memory": {"episodic_cap": 0}}"#, "from 1 to 10000000"),
        (r#"{"storage": {"postgres_pool_size": 2000}}"#, "from 1 to 1024"),
    ] {
        let message = error(text);
        assert!(message.contains(range), "{text}: {message}");
    }
}

#[test]
fn every_password_form_of_a_storage_url_is_redacted() {
    let cases = [
        ("postgres://cairn:UserinfoPw1@127.0.0.1:1/db", "postgres://cairn:***@127.0.0.1:1/db"),
        ("postgres://cairn@127.0.0.1:1/db?password=QueryPw123", "postgres://cairn@127.0.0.1:1/db?password=***"),
        (
            "postgres:///db?host=/run&password=QueryPassw0rdZ&sslmode=disable",
            "postgres:///db?host=/run&password=***&sslmode=disable",
        ),
        (
            "postgres://h/db?PassWord=a&%70assword=b&sslpassword=c#x",
            "postgres://h/db?PassWord=***&%70assword=***&sslpassword=***#x",
        ),
        ("postgres://u:pa/ss@h/db", "postgres://u:***@h/db"),
        ("host=h password=secret1 dbname=d", "host=h password=*** dbname=d"),
        ("host=h password = 'se cr\\'et' user=u", "host=h password = *** user=u"),
        ("postgresql://h/db?sslmode=require", "postgresql://h/db?sslmode=require"),
    ];
    for (url, shown) in cases {
        assert_eq!(redact_url_password(url), shown, "{url}");
    }
    for url in ["host=h password=secret1", "postgres:///db?password=QueryPassw0rdZ"] {
        let reason = check_storage_url(url).unwrap_err();
        assert!(!reason.contains("secret1") && !reason.contains("QueryPassw0rdZ"), "{reason}");
    }
}

#[test]
fn the_model_path_is_one_setting_with_a_legacy_alias() {
    let settings = load(r#"{"memory": {"embed_model_path": "/models/old"}}"#).unwrap();
    assert_eq!(settings.embedding.model_path.as_deref(), Some(Path::new("/models/old")));
    assert!(!settings.embedding.model_path_explicit);
    let settings =
        load(r#"{"memory": {"embed_model_path": "/models/old"}, "embedding": {"model_path": "/models/new"}}"#).unwrap();
    assert_eq!(settings.embedding.model_path.as_deref(), Some(Path::new("/models/new")));
    let environment = Environment::from_pairs(&[("CAIRN_EMBED_MODEL_PATH", "/models/env")]);
    let settings = load_with(r#"{"embedding": {"model_path": "/x"}}"#, &Flags::default(), &environment).unwrap();
    assert_eq!(settings.embedding.model_path.as_deref(), Some(Path::new("/models/env")));
    assert!(settings.embedding.model_path_explicit);
}

#[test]
fn hooks_keep_their_file_order() {
    let settings = load(r#"{"hooks": {"transforms": {"zeta": "Z: ", "alpha": "A: "}}}"#).unwrap();
    let patterns: Vec<_> = settings.hooks.transforms.0.iter().map(|(pattern, _)| pattern.as_str()).collect();
    assert_eq!(patterns, ["zeta", "alpha"]);
}

#[test]
fn write_key_keeps_other_keys_and_their_order() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join(CONFIG_FILE_NAME);
    let original = "{\n  \"server\": {\"port\": 1234, \"host\": \"127.0.0.1\"},\n  \"hooks\": {\"transforms\": {\"zeta\": \"Z\", \"alpha\": \"A\"}}\n}\n";
    std::fs::write(&path, original).unwrap();
    let settings = write_key(home.path(), "memory.history_idle_hours", Some("1.5")).unwrap();
    assert_eq!(settings.memory.history_idle_hours, 1.5);
    let written = std::fs::read_to_string(&path).unwrap();
    let order = |needle: &str| written.find(needle).unwrap_or_else(|| panic!("{needle} in {written}"));
    assert!(order("\"server\"") < order("\"hooks\"") && order("\"hooks\"") < order("\"memory\""));
    assert!(order("\"port\"") < order("\"host\""));
    assert!(order("\"zeta\"") < order("\"alpha\""));
    // The edit lock's file stays (every process must lock the same inode).
    let leftovers: Vec<_> = std::fs::read_dir(home.path())
        .unwrap()
        .flatten()
        .filter(|entry| entry.file_name() != ".config.json.lock")
        .collect();
    assert_eq!(leftovers.len(), 1, "no temporary file is left behind");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }
}

#[test]
fn write_key_refuses_bad_values_and_unknown_keys_and_leaves_the_file() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join(CONFIG_FILE_NAME);
    let original = "{\"server\": {\"port\": 1234}}\n";
    std::fs::write(&path, original).unwrap();
    for (key, value) in [
        ("server.port", "eighty"),
        ("server.port", "70000"),
        ("memory.history_max_days", "0"),
        ("server.prot", "1"),
        ("colour.x", "1"),
        ("nodot", "1"),
        ("llm.base_url", "ftp://x"),
    ] {
        assert!(write_key(home.path(), key, Some(value)).is_err(), "{key} = {value}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), original, "{key} = {value}");
    }
    write_key(home.path(), "llm.model", Some("gpt-x")).unwrap();
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(written["llm"]["model"], "gpt-x");
    write_key(home.path(), "llm.model", None).unwrap();
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(written["llm"].get("model").is_none());
}

#[test]
fn settings_update_validates() {
    let path = Path::new("config.json");
    let settings = MemorySettings::default();
    let updated = settings.apply_update(path, &serde_json::json!({"history_idle_hours": 1.5})).unwrap();
    assert_eq!(updated.history_idle_hours, 1.5);
    assert_eq!(updated.history_max_days, DEFAULT_HISTORY_MAX_DAYS);
    for bad in [
        serde_json::json!({"history_idle_hours": "soon"}),
        serde_json::json!({"history_max_days": 0}),
        serde_json::json!({"colour": 1}),
        serde_json::json!([1]),
    ] {
        assert!(settings.apply_update(path, &bad).is_err(), "{bad}");
    }
}
