//! One download attempt: stream, hash, verify, stage, rename.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};
#[cfg(feature = "download")]
use std::time::Duration;

use cairn_files::AtomicFile;
use sha2::{Digest, Sha256};
use tempfile::NamedTempFile;
use tracing::{debug, info_span};

use super::{Artifact, ArtifactKind, DownloadStep, ModelManager};
#[cfg(feature = "download")]
use crate::constants::PROGRESS_EVERY_BYTES;
use crate::error::{EmbedError, Result};

#[cfg(feature = "download")]
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
#[cfg(feature = "download")]
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);
const BUFFER_BYTES: usize = 64 * 1024;

/// Downloads every artifact into a fresh staging folder and renames it to
/// the install folder once everything verifies.
pub(super) fn install(manager: &ModelManager) -> Result<PathBuf> {
    let config = &manager.shared.config;
    let models_dir = &config.models_dir;
    std::fs::create_dir_all(models_dir).map_err(|source| EmbedError::io("creating", models_dir, source))?;
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{}.staging-", config.source.name))
        .tempdir_in(models_dir)
        .map_err(|source| EmbedError::io("creating a staging folder in", models_dir, source))?;
    for artifact in &config.source.artifacts {
        fetch_artifact(manager, artifact, staging.path())?;
    }
    promote(manager, staging)
}

/// True for errors another attempt cannot fix.
pub(super) fn is_permanent(error: &EmbedError) -> bool {
    match error {
        EmbedError::HttpStatus { status, .. } => (400..500).contains(status) && *status != 408 && *status != 429,
        EmbedError::InsecureUrl { .. }
        | EmbedError::Archive { .. }
        | EmbedError::ModelFiles { .. }
        | EmbedError::DownloadSkipped { .. } => true,
        _ => false,
    }
}

/// Accepts `https://` URLs, and `http://` only for loopback hosts.
pub(super) fn check_url(url: &str) -> Result<()> {
    let insecure = || EmbedError::InsecureUrl { url: url.to_owned() };
    if let Some(rest) = url.strip_prefix("https://") {
        return if rest.is_empty() { Err(insecure()) } else { Ok(()) };
    }
    let rest = url.strip_prefix("http://").ok_or_else(insecure)?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = if let Some(bracketed) = authority.strip_prefix('[') {
        bracketed.split(']').next().unwrap_or_default()
    } else {
        authority.rsplit_once(':').map_or(authority, |(host, _port)| host)
    };
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|address| address.is_loopback());
    if loopback { Ok(()) } else { Err(insecure()) }
}

/// A relative path of plain components, safe to join under the model folder.
fn safe_relative(dest: &str) -> Result<&Path> {
    let path = Path::new(dest);
    let plain = !dest.is_empty() && path.components().all(|component| matches!(component, Component::Normal(_)));
    if plain {
        Ok(path)
    } else {
        Err(EmbedError::model_files(path, "artifact destination must be a plain relative path"))
    }
}

fn fetch_artifact(manager: &ModelManager, artifact: &Artifact, staging: &Path) -> Result<()> {
    let span = info_span!("fetch_artifact", url = %artifact.url);
    let _entered = span.enter();
    check_url(&artifact.url)?;
    match &artifact.kind {
        ArtifactKind::File { dest } => {
            let target = staging.join(safe_relative(dest)?);
            create_parent(&target)?;
            let mut download = AtomicFile::create(&target).map_err(files_error)?;
            download_verified(manager, artifact, download.as_file_mut())?;
            download.commit().map_err(|error| EmbedError::io("moving the download to", &target, error.into_io()))?;
        }
        ArtifactKind::ZipArchive { members } => {
            let mut download = NamedTempFile::new_in(staging)
                .map_err(|source| EmbedError::io("creating a temporary file in", staging, source))?;
            download_verified(manager, artifact, download.as_file_mut())?;
            let file = download.reopen().map_err(|source| EmbedError::io("reopening", download.path(), source))?;
            let mut archive = zip::ZipArchive::new(file)
                .map_err(|error| EmbedError::Archive { what: artifact.url.clone(), message: error.to_string() })?;
            for member in members {
                let target = staging.join(safe_relative(&member.dest)?);
                create_parent(&target)?;
                let mut entry = archive.by_name(&member.path).map_err(|error| EmbedError::Archive {
                    what: artifact.url.clone(),
                    message: format!("member `{}`: {error}", member.path),
                })?;
                let mut extracted = AtomicFile::create(&target).map_err(files_error)?;
                let (_, digest) =
                    copy_hashing(&mut entry, extracted.as_file_mut(), |_| {}).map_err(|error| EmbedError::Archive {
                        what: artifact.url.clone(),
                        message: format!("extracting `{}`: {error}", member.path),
                    })?;
                if !digest.eq_ignore_ascii_case(&member.sha256) {
                    return Err(EmbedError::ChecksumMismatch {
                        what: format!("{} in {}", member.path, artifact.url),
                        expected: member.sha256.clone(),
                        actual: digest,
                    });
                }
                extracted
                    .commit()
                    .map_err(|error| EmbedError::io("moving the extracted file to", &target, error.into_io()))?;
            }
        }
    }
    Ok(())
}

/// Streams `artifact` into `file` and checks its length and checksum.
fn download_verified(manager: &ModelManager, artifact: &Artifact, file: &mut File) -> Result<()> {
    let (bytes, digest) = stream_to(manager, &artifact.url, file)?;
    manager.set_status(|status| status.step = DownloadStep::Verifying);
    if bytes < artifact.min_bytes {
        return Err(EmbedError::Truncated { url: artifact.url.clone(), bytes, expected: artifact.min_bytes });
    }
    if !digest.eq_ignore_ascii_case(&artifact.sha256) {
        return Err(EmbedError::ChecksumMismatch {
            what: artifact.url.clone(),
            expected: artifact.sha256.clone(),
            actual: digest,
        });
    }
    debug!(bytes, "download verified");
    Ok(())
}

fn files_error(error: cairn_files::FilesError) -> EmbedError {
    let (operation, path, source) = error.into_parts();
    EmbedError::io(operation, path, source)
}

fn create_parent(path: &Path) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|source| EmbedError::io("creating", parent, source))?;
    }
    Ok(())
}

#[cfg(feature = "download")]
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .timeout_recv_response(Some(RESPONSE_TIMEOUT))
        .tls_config(ureq::tls::TlsConfig::builder().root_certs(ureq::tls::RootCerts::PlatformVerifier).build())
        .build()
        .into()
}

/// GETs `url` into `file`; returns the byte count and the hex sha256.
#[cfg(feature = "download")]
fn stream_to(manager: &ModelManager, url: &str, file: &mut File) -> Result<(u64, String)> {
    let network = |message: String| EmbedError::Network { url: url.to_owned(), message };
    let response = agent().get(url).call().map_err(|error| network(error.to_string()))?;
    let status = response.status().as_u16();
    if !(200..300).contains(&status) {
        return Err(EmbedError::HttpStatus { url: url.to_owned(), status });
    }
    let total = response.body().content_length();
    manager.set_status(|status| {
        status.bytes_total = total;
        status.bytes_done = 0;
    });
    let mut reader = response.into_body().into_reader();
    let mut reported = 0u64;
    let (bytes, digest) = copy_hashing(&mut reader, file, |bytes| {
        if bytes - reported >= PROGRESS_EVERY_BYTES {
            reported = bytes;
            manager.set_status(|status| status.bytes_done = bytes);
        }
    })
    .map_err(|error| network(error.to_string()))?;
    manager.set_status(|status| status.bytes_done = bytes);
    file.sync_all().map_err(|error| network(format!("syncing the download: {error}")))?;
    if let Some(total) = total
        && bytes != total
    {
        return Err(EmbedError::Truncated { url: url.to_owned(), bytes, expected: total });
    }
    Ok((bytes, digest))
}

/// Built without the `download` feature: there is no HTTP client, so a
/// model must already be installed (or given by path).
#[cfg(not(feature = "download"))]
fn stream_to(_manager: &ModelManager, url: &str, _file: &mut File) -> Result<(u64, String)> {
    Err(EmbedError::Network {
        url: url.to_owned(),
        message: "this build of cairn-embedder has no downloader (the `download` feature is off)".to_owned(),
    })
}

/// Copies `reader` to `writer` while hashing; `progress` sees the running byte count.
fn copy_hashing(
    reader: &mut impl Read,
    writer: &mut impl Write,
    mut progress: impl FnMut(u64),
) -> std::io::Result<(u64, String)> {
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; BUFFER_BYTES];
    let mut bytes = 0u64;
    loop {
        let read = match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        hasher.update(&buffer[..read]);
        writer.write_all(&buffer[..read])?;
        bytes += read as u64;
        progress(bytes);
    }
    writer.flush()?;
    Ok((bytes, hex::encode(hasher.finalize())))
}

/// sha256 of a file on disk, hex.
pub(super) fn sha256_file(path: &Path) -> Result<String> {
    let mut file = File::open(path).map_err(|source| EmbedError::io("opening", path, source))?;
    let (_, digest) = copy_hashing(&mut file, &mut std::io::sink(), |_| {})
        .map_err(|source| EmbedError::io("reading", path, source))?;
    Ok(digest)
}

/// Renames the verified staging folder to the install folder. An existing,
/// incomplete install folder is moved aside first; a complete one installed
/// meanwhile by another process is kept.
fn promote(manager: &ModelManager, staging: tempfile::TempDir) -> Result<PathBuf> {
    let target = manager.install_dir();
    if target.exists() {
        if manager.is_installed(&target) {
            debug!("another process installed the model meanwhile");
            return Ok(target);
        }
        let models_dir = &manager.shared.config.models_dir;
        let aside = tempfile::Builder::new()
            .prefix(&format!(".{}.old-", manager.shared.config.source.name))
            .tempdir_in(models_dir)
            .map_err(|source| EmbedError::io("creating a folder in", models_dir, source))?;
        let old = aside.path().join("previous");
        std::fs::rename(&target, &old).map_err(|source| EmbedError::io("moving aside", &target, source))?;
        let renamed = std::fs::rename(staging.path(), &target);
        if let Err(source) = renamed {
            // Put the old folder back; the verified staging folder is dropped.
            let _ = std::fs::rename(&old, &target);
            return Err(EmbedError::io("installing", &target, source));
        }
        drop(aside);
    } else if let Err(source) = std::fs::rename(staging.path(), &target) {
        if manager.is_installed(&target) {
            return Ok(target);
        }
        return Err(EmbedError::io("installing", &target, source));
    }
    let _ = staging.keep();
    debug!(path = %target.display(), "model installed");
    Ok(target)
}
