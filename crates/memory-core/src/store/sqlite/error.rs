//! SQLite's errors as the crate's: a failed statement is a
//! [`MemoryError::Storage`] whose [`StorageError`] sorts SQLite's result
//! code into a [`StorageErrorKind`].

use crate::error::{MemoryError, StorageError, StorageErrorKind};

impl MemoryError {
    /// The storage error of a failed SQLite call during `operation`.
    pub(crate) fn sqlite(operation: &'static str) -> impl FnOnce(rusqlite::Error) -> MemoryError {
        move |error| MemoryError::Storage { operation, source: StorageError::from_sqlite(error) }
    }
}

impl StorageError {
    /// Sorts a SQLite error into its kind.
    pub(crate) fn from_sqlite(error: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode;
        let kind = match &error {
            rusqlite::Error::SqliteFailure(failure, _) => match failure.code {
                ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => StorageErrorKind::Busy,
                ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => StorageErrorKind::Corrupt,
                ErrorCode::SystemIoFailure => StorageErrorKind::Io,
                ErrorCode::DiskFull => StorageErrorKind::Full,
                ErrorCode::ConstraintViolation => StorageErrorKind::Constraint,
                ErrorCode::OperationInterrupted => StorageErrorKind::Interrupted,
                _ => StorageErrorKind::Other,
            },
            _ => StorageErrorKind::Other,
        };
        Self::new(kind, error)
    }
}

#[cfg(test)]
mod tests {
    use crate::error::{MemoryError, StorageError, StorageErrorKind};
    use rusqlite::ErrorCode;

    fn failure(code: ErrorCode) -> rusqlite::Error {
        let extended = match code {
            ErrorCode::DatabaseBusy => 5,
            ErrorCode::DatabaseLocked => 6,
            ErrorCode::OperationInterrupted => 9,
            ErrorCode::SystemIoFailure => 10,
            ErrorCode::DatabaseCorrupt => 11,
            ErrorCode::DiskFull => 13,
            ErrorCode::ConstraintViolation => 19,
            ErrorCode::NotADatabase => 26,
            _ => 1,
        };
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error { code, extended_code: extended }, None)
    }

    #[test]
    fn sqlite_errors_sort_into_their_kinds() {
        let cases = [
            (failure(ErrorCode::DatabaseBusy), StorageErrorKind::Busy),
            (failure(ErrorCode::DatabaseLocked), StorageErrorKind::Busy),
            (failure(ErrorCode::DatabaseCorrupt), StorageErrorKind::Corrupt),
            (failure(ErrorCode::NotADatabase), StorageErrorKind::Corrupt),
            (failure(ErrorCode::SystemIoFailure), StorageErrorKind::Io),
            (failure(ErrorCode::DiskFull), StorageErrorKind::Full),
            (failure(ErrorCode::ConstraintViolation), StorageErrorKind::Constraint),
            (failure(ErrorCode::OperationInterrupted), StorageErrorKind::Interrupted),
            (failure(ErrorCode::Unknown), StorageErrorKind::Other),
            (rusqlite::Error::QueryReturnedNoRows, StorageErrorKind::Other),
        ];
        for (error, kind) in cases {
            let described = error.to_string();
            assert_eq!(StorageError::from_sqlite(error).kind(), kind, "{described}");
        }
    }

    #[test]
    fn the_backend_error_is_the_source_of_the_storage_error() {
        let error = MemoryError::sqlite("writing a fact")(failure(ErrorCode::DatabaseBusy));
        assert_eq!(error.storage_kind(), Some(StorageErrorKind::Busy));
        let chain: Vec<String> = std::iter::successors(Some(&error as &dyn std::error::Error), |e| e.source())
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            chain[..2],
            ["memory database error while writing a fact", "the database is locked by another writer"]
        );
        assert_eq!(chain[2], failure(ErrorCode::DatabaseBusy).to_string());
        assert_eq!(MemoryError::InvalidConfig("x".into()).storage_kind(), None);
    }
}
