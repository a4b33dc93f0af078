use std::fs;

use super::*;

fn fixture() -> (tempfile::TempDir, SensitivePaths) {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    fs::create_dir_all(home.join(".ssh")).unwrap();
    fs::write(home.join(".ssh/id_ed25519"), "PRIVATE").unwrap();
    fs::create_dir_all(home.join("project")).unwrap();
    fs::write(home.join("project/notes.md"), "hello").unwrap();
    fs::write(home.join("project/.env"), "TOKEN=1").unwrap();
    fs::write(home.join("project/.env.example"), "TOKEN=").unwrap();
    let rules = SensitivePaths::with_home(&home).with_gateway_home(home.join(".cairn"));
    (dir, rules)
}

#[test]
fn home_credential_stores_are_sensitive() {
    let (_dir, rules) = fixture();
    for relative in HOME_SECRETS.iter().map(|(relative, _)| *relative) {
        assert!(rules.is_sensitive(Path::new("~").join(relative).as_path()), "{relative}");
    }
    assert!(rules.is_sensitive(Path::new("~/.aws/credentials")));
    assert!(rules.is_sensitive(Path::new("~/.config/gh/hosts.yml")));
}

#[test]
fn ordinary_files_are_not_sensitive() {
    let (dir, rules) = fixture();
    let home = dir.path().join("home");
    for path in [
        home.join("project/notes.md"),
        home.join("project/.env.example"),
        home.join(".config/other/settings.json"),
        home.join(".sshfoo"),
        home.join(".cairn/memory/preferences.md"),
        PathBuf::from("/etc/hostname"),
        PathBuf::from("/usr/share/doc/readme"),
    ] {
        assert!(!rules.is_sensitive(&path), "{}", path.display());
    }
}

#[test]
fn system_and_gateway_secrets_are_sensitive() {
    let (dir, rules) = fixture();
    let home = dir.path().join("home");
    for path in [
        PathBuf::from("/proc/self/environ"),
        PathBuf::from("/sys/kernel"),
        PathBuf::from("/dev/mem"),
        PathBuf::from("/etc/shadow"),
        PathBuf::from("/etc/ssh/ssh_host_ed25519_key"),
        home.join(".cairn/secrets/llm.key"),
        home.join(".cairn/.env"),
        home.join("project/.env"),
        home.join("project/.env.production"),
        home.join("backup/id_rsa"),
    ] {
        assert!(rules.is_sensitive(&path), "{}", path.display());
    }
}

#[test]
fn dot_dot_and_symlinks_are_resolved() {
    let (dir, rules) = fixture();
    let home = dir.path().join("home");
    assert!(rules.is_sensitive(&home.join("project/../.ssh/id_ed25519")));
    let link = home.join("project/innocent.txt");
    std::os::unix::fs::symlink(home.join(".ssh/id_ed25519"), &link).unwrap();
    assert!(rules.is_sensitive(&link));
    let dir_link = home.join("project/keys");
    std::os::unix::fs::symlink(home.join(".ssh"), &dir_link).unwrap();
    assert!(rules.is_sensitive(&dir_link.join("not-yet-created")));
}

#[test]
fn guarded_read_refuses_sensitive_and_reads_the_rest() {
    let (dir, rules) = fixture();
    let home = dir.path().join("home");
    let error = rules.read_to_string(&home.join(".ssh/id_ed25519")).unwrap_err();
    assert!(matches!(error, GuardError::SensitivePath { reason: "SSH keys", .. }), "{error}");
    let link = home.join("project/alias.md");
    std::os::unix::fs::symlink(home.join("project/.env"), &link).unwrap();
    assert!(matches!(rules.read_to_string(&link), Err(GuardError::SensitivePath { .. })));
    assert_eq!(rules.read_to_string(&home.join("project/notes.md")).unwrap(), "hello");
    assert!(matches!(rules.read_to_string(&home.join("project/missing.md")), Err(GuardError::Io { .. })));
    fs::write(home.join("project/blob.bin"), [0xff, 0xfe, 0x00]).unwrap();
    assert!(matches!(rules.read_to_string(&home.join("project/blob.bin")), Err(GuardError::NotUtf8 { .. })));
}

#[test]
fn tilde_without_home_is_refused() {
    let rules = SensitivePaths::default();
    assert!(matches!(rules.classify(Path::new("~/notes.md")), Err(GuardError::Unresolvable { .. })));
    assert!(rules.is_sensitive(Path::new("~/notes.md")));
}

#[test]
fn extra_paths_are_sensitive() {
    let rules = SensitivePaths::default().with_extra("/srv/vault");
    assert!(rules.is_sensitive(Path::new("/srv/vault/a")));
    assert!(!rules.is_sensitive(Path::new("/srv/vaults/a")));
}

#[test]
fn sensitive_mentions_in_tool_input() {
    let flagged = [
        ("cat ~/.ssh/id_rsa", "ssh-keys"),
        ("aws s3 ls --profile x; cat $HOME/.aws/config", "aws-credentials"),
        ("curl http://169.254.169.254/latest/meta-data/iam", "instance-metadata"),
        ("curl http://[fd00:ec2::254]/latest/", "instance-metadata"),
        ("source .env && run", "env-file"),
        ("cat /etc/shadow", "shadow"),
        ("kubectl --kubeconfig ~/.kube/config get pods", "kube-config"),
    ];
    for (text, expected) in flagged {
        assert_eq!(mentions_sensitive_location(text), Some(expected), "{text}");
    }
    for text in ["cargo build --release", "ls src/environment.rs", "echo $HOME", "cat README.md"] {
        assert_eq!(mentions_sensitive_location(text), None, "{text}");
    }
}

#[cfg(unix)]
#[test]
fn guarded_read_refuses_a_fifo_without_opening_it_for_a_writer() {
    let (dir, rules) = fixture();
    let fifo = dir.path().join("home/project/prompt.md");
    let status = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(status.success());
    // No writer ever opens the FIFO: a blocking open would hang here.
    match rules.read_to_string(&fifo) {
        Err(GuardError::NotRegularFile { kind, .. }) => assert_eq!(kind, "FIFO"),
        other => panic!("expected NotRegularFile, got {other:?}"),
    }
    let directory = dir.path().join("home/project");
    assert!(matches!(rules.read(&directory), Err(GuardError::NotRegularFile { kind: "directory", .. })));
}

#[test]
fn guarded_read_refuses_a_file_over_the_cap_before_reading_it() {
    let (dir, rules) = fixture();
    let big = dir.path().join("home/project/big.md");
    let file = fs::File::create(&big).unwrap();
    // Sparse: the size is what counts, not the blocks on disk.
    file.set_len(MAX_READ_BYTES + 1).unwrap();
    match rules.read_to_string(&big) {
        Err(GuardError::TooLarge { bytes, limit, .. }) => {
            assert_eq!((bytes, limit), (MAX_READ_BYTES + 1, MAX_READ_BYTES));
        }
        other => panic!("expected TooLarge, got {:?}", other.map(|text| text.len())),
    }
    let small = dir.path().join("home/project/notes.md");
    assert_eq!(rules.read_to_string_bounded(&small, 5).unwrap(), "hello");
    assert!(matches!(rules.read_to_string_bounded(&small, 4), Err(GuardError::TooLarge { bytes: 5, limit: 4, .. })));
}

#[test]
fn a_tail_read_returns_whole_lines_and_what_it_skipped_and_refuses_secrets() {
    let (dir, rules) = fixture();
    let log = dir.path().join("home/project/transcript.jsonl");
    fs::write(&log, "first line\nsecond line\nthird\n").unwrap();
    let (whole, skipped) = rules.read_tail_bounded(&log, 1024).unwrap();
    assert_eq!((whole.as_str(), skipped), ("first line\nsecond line\nthird\n", 0));
    let (tail, skipped) = rules.read_tail_bounded(&log, 15).unwrap();
    assert_eq!((tail.as_str(), skipped), ("third\n", 23), "the partial line before the tail is dropped");
    let refused = rules.read_tail_bounded(Path::new("~/.ssh/id_ed25519"), 1024).unwrap_err();
    assert!(matches!(refused, GuardError::SensitivePath { .. }), "{refused}");
    let refused = rules.read_tail_bounded(&dir.path().join("home/project"), 1024).unwrap_err();
    assert!(matches!(refused, GuardError::NotRegularFile { .. }), "{refused}");
}

/// Credential stores are refused wherever they lie, with no home given:
/// another user's, a copy inside a project, a root-owned one. A name that
/// only starts like one is not.
#[test]
fn credential_stores_are_sensitive_at_any_depth_without_a_home() {
    let rules = SensitivePaths::default();
    for path in [
        "/home/someone/.ssh/config",
        "/srv/checkout/.aws/credentials",
        "/root/.config/gh/hosts.yml",
        "/data/backup/.docker/config.json",
        "/tmp/x/.cargo/credentials.toml",
    ] {
        assert!(rules.is_sensitive(Path::new(path)), "{path}");
    }
    for path in ["/srv/checkout/.sshfoo/notes", "/srv/checkout/.config/ghost/x", "/srv/checkout/docker/config.json"] {
        assert!(!rules.is_sensitive(Path::new(path)), "{path}");
    }
}

/// Without a home directory `~` cannot be expanded: such a path is refused,
/// never read relative to somewhere else.
#[test]
fn a_tilde_path_without_a_home_is_refused() {
    let rules = SensitivePaths::for_user(None);
    assert!(rules.is_sensitive(Path::new("~/notes.md")));
    assert!(matches!(rules.read_to_string(Path::new("~/notes.md")), Err(GuardError::Unresolvable { .. })));
}
