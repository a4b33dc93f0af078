use std::io::Write as _;
use std::path::Path;

use crate::{AtomicFile, LockFile, copy_dir_atomic, parent_dir, write_atomic};

/// Every name in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    names
}

#[test]
fn write_atomic_creates_then_replaces_and_leaves_only_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    write_atomic(&path, b"one").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"one");
    write_atomic(&path, b"two, longer").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"two, longer");
    write_atomic(&path, b"").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"");
    assert_eq!(names(dir.path()), ["state.json"]);
}

#[cfg(unix)]
#[test]
fn written_files_and_lock_files_are_owner_only() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json");
    std::fs::write(&path, "old").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    write_atomic(&path, b"new").unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    let lock = LockFile::acquire(&dir.path().join("config.lock")).unwrap();
    assert_eq!(std::fs::metadata(lock.path()).unwrap().permissions().mode() & 0o777, 0o600);
}

#[test]
fn an_abandoned_write_leaves_the_old_file_and_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lessons.jsonl");
    std::fs::write(&path, "old\n").unwrap();
    {
        let mut file = AtomicFile::create(&path).unwrap();
        file.write_all(b"half of the new").unwrap();
        assert_eq!(names(dir.path()).len(), 2, "the temporary file sits beside the target while writing");
        // Dropped without a commit, as when a checksum or a validation fails.
    }
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");
    assert_eq!(names(dir.path()), ["lessons.jsonl"]);
}

#[test]
fn a_failed_rename_leaves_the_target_and_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    // A non-empty directory cannot be replaced by a file.
    let path = dir.path().join("occupied");
    std::fs::create_dir(&path).unwrap();
    std::fs::write(path.join("inside"), "kept").unwrap();
    let error = write_atomic(&path, b"new").unwrap_err();
    assert_eq!(error.operation(), "renaming a temporary file onto");
    assert_eq!(error.path(), path);
    assert!(error.to_string().starts_with("renaming a temporary file onto "), "{error}");
    assert_eq!(std::fs::read_to_string(path.join("inside")).unwrap(), "kept");
    assert_eq!(names(dir.path()), ["occupied"]);
}

#[test]
fn a_missing_directory_is_reported_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent/state.json");
    let error = write_atomic(&path, b"new").unwrap_err();
    assert_eq!(error.operation(), "creating a temporary file in");
    assert_eq!(error.path(), dir.path().join("absent"));
    let (_, _, source) = error.into_parts();
    assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
    assert!(names(dir.path()).is_empty());
}

#[test]
fn commit_new_never_replaces() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("2026-01-02.md");
    let mut first = AtomicFile::create(&path).unwrap();
    first.write_all(b"first").unwrap();
    assert!(first.commit_new().unwrap());
    let mut second = AtomicFile::create(&path).unwrap();
    second.write_all(b"second").unwrap();
    assert!(!second.commit_new().unwrap());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "first");
    assert_eq!(names(dir.path()), ["2026-01-02.md"]);
}

#[test]
fn what_was_written_can_be_read_back_before_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.bin");
    let mut file = AtomicFile::create(&path).unwrap();
    assert_eq!(file.path(), path);
    file.as_file_mut().write_all(b"weights").unwrap();
    assert_eq!(file.as_file().metadata().unwrap().len(), 7);
    assert!(!path.exists(), "nothing is at the target before the commit");
    file.commit().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"weights");
}

#[test]
fn temporary_names_say_what_they_replace_and_stay_short() {
    let prefix = crate::atomic::temporary_prefix(Path::new("/home/memory/preferences.md"));
    assert_eq!(prefix, ".preferences.md.");
    let long = "é".repeat(200);
    let prefix = crate::atomic::temporary_prefix(Path::new(&long));
    assert!(prefix.len() <= 102, "{}", prefix.len());
    assert!(prefix.starts_with(".é") && prefix.ends_with('.'));
}

#[test]
fn parent_dir_of_a_bare_name_is_the_current_directory() {
    assert_eq!(parent_dir(Path::new("config.json")), Path::new("."));
    assert_eq!(parent_dir(Path::new("home/config.json")), Path::new("home"));
    assert_eq!(parent_dir(Path::new("/config.json")), Path::new("/"));
}

#[test]
fn a_lock_is_exclusive_until_dropped_and_the_file_stays() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/state.lock");
    let held = LockFile::acquire(&path).unwrap();
    assert!(LockFile::try_acquire(&path).unwrap().is_none(), "a second handle must not get the lock");
    drop(held);
    let again = LockFile::try_acquire(&path).unwrap().expect("the lock is free once dropped");
    assert_eq!(again.path(), path);
    drop(again);
    assert!(path.is_file(), "the lock file stays for the next holder");
}

#[test]
fn a_lock_file_that_cannot_be_opened_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    // The lock path is a directory.
    let error = LockFile::acquire(dir.path()).unwrap_err();
    assert_eq!(error.operation(), "opening");
    assert_eq!(error.path(), dir.path());
}

#[test]
fn a_directory_copy_holds_every_file_and_folder_and_no_link() {
    let dir = tempfile::tempdir().unwrap();
    let from = dir.path().join("from");
    std::fs::create_dir_all(from.join("nested/deeper")).unwrap();
    std::fs::write(from.join("top.md"), "top").unwrap();
    std::fs::write(from.join("nested/deeper/leaf.txt"), "leaf").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(dir.path(), from.join("link")).unwrap();
    let to = dir.path().join("parent/to");
    copy_dir_atomic(&from, &to).unwrap();
    assert_eq!(std::fs::read_to_string(to.join("top.md")).unwrap(), "top");
    assert_eq!(std::fs::read_to_string(to.join("nested/deeper/leaf.txt")).unwrap(), "leaf");
    assert_eq!(names(&to), ["nested", "top.md"], "the link is not copied");
    assert_eq!(names(&dir.path().join("parent")), ["to"], "no staging directory is left");
}

#[test]
fn a_failed_directory_copy_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let missing = copy_dir_atomic(&dir.path().join("absent"), &dir.path().join("to")).unwrap_err();
    assert_eq!((missing.operation(), missing.path()), ("listing", dir.path().join("absent").as_path()));
    assert_eq!(names(dir.path()), Vec::<String>::new());

    let from = dir.path().join("from");
    std::fs::create_dir(&from).unwrap();
    std::fs::write(from.join("new.md"), "new").unwrap();
    let taken = dir.path().join("taken");
    std::fs::create_dir(&taken).unwrap();
    std::fs::write(taken.join("old.md"), "old").unwrap();
    let refused = copy_dir_atomic(&from, &taken).unwrap_err();
    assert_eq!(refused.operation(), "renaming into place");
    assert_eq!(names(&taken), ["old.md"], "the existing directory is left as it was");
    assert_eq!(names(dir.path()), ["from", "taken"], "no staging directory is left");
}
