//! A PostgreSQL database of its own for the benches that also run on
//! `MemoryDb::open_postgres`, from `CAIRN_BENCH_POSTGRES_URL`.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The environment variable naming the PostgreSQL server of the PostgreSQL benches.
const POSTGRES_URL_VAR: &str = "CAIRN_BENCH_POSTGRES_URL";

/// A database of its own on the bench's PostgreSQL server, created empty
/// and dropped (connections and all) when this goes out of scope.
pub struct BenchDatabase {
    server_url: String,
    name: String,
    /// The URL of this database.
    pub url: String,
}

impl BenchDatabase {
    /// `cairn_bench_<pid>_<n>` on the server at `server_url`.
    pub fn create(server_url: &str) -> Self {
        static CREATED: AtomicUsize = AtomicUsize::new(0);
        let name = format!("cairn_bench_{}_{}", std::process::id(), CREATED.fetch_add(1, Ordering::Relaxed));
        let mut client = postgres::Client::connect(server_url, postgres::NoTls)
            .unwrap_or_else(|error| panic!("connecting to {POSTGRES_URL_VAR}: {error}"));
        client.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        Self { server_url: server_url.to_owned(), url: with_database(server_url, &name), name }
    }
}

impl Drop for BenchDatabase {
    fn drop(&mut self) {
        let dropped = postgres::Client::connect(&self.server_url, postgres::NoTls).and_then(|mut client| {
            client.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name))
        });
        if let Err(error) = dropped {
            eprintln!("could not drop the bench database {}: {error}", self.name);
        }
    }
}

/// `url` naming the database `database` instead of its own: the path of a
/// `postgres://` URL, or a `dbname` appended to a `key=value` string (the
/// last one wins).
fn with_database(url: &str, database: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return format!("{url} dbname={database}");
    };
    let authority_start = scheme_end + 3;
    let query_start = url.find('?').unwrap_or(url.len());
    let path_start = url[authority_start..query_start].find('/').map_or(query_start, |at| authority_start + at);
    format!("{}/{database}{}", &url[..path_start], &url[query_start..])
}

/// The PostgreSQL server of the PostgreSQL benches, or `None` (and a line
/// saying they are skipped) without `CAIRN_BENCH_POSTGRES_URL`.
pub fn postgres_server() -> Option<String> {
    match std::env::var(POSTGRES_URL_VAR) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            eprintln!("{POSTGRES_URL_VAR} is not set: the PostgreSQL benches are not registered");
            None
        }
    }
}
