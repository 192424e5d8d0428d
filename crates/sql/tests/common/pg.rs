//! A throwaway PostgreSQL cluster for tests: Debian's `postgresql` package's `initdb` and
//! `pg_ctl`, a data directory in a temporary directory, listening on 127.0.0.1 at a free
//! port with trust authentication, stopped and removed on drop. As root (CI), the server
//! runs as the `postgres` user the package creates (PostgreSQL refuses to run as root).

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct TempPostgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    as_user: Option<&'static str>,
    pub port: u16,
}

/// The newest `/usr/lib/postgresql/<version>/bin`.
fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, p)| p.join("initdb").is_file())
        .collect();
    versions.sort();
    versions.pop().map(|(_, p)| p)
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
}

impl TempPostgres {
    /// Starts a cluster. Panics, saying how to install PostgreSQL, when it is missing.
    pub fn start() -> TempPostgres {
        let bin = bin_dir().expect("PostgreSQL is not installed: `apt-get install postgresql` (scripts/setup does it)");
        let dir = tempfile::tempdir().unwrap();
        let as_user = is_root().then_some("postgres");
        if let Some(user) = as_user {
            run(Command::new("chown").args(["-R", user]).arg(dir.path()));
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let me = TempPostgres { dir, bin, as_user, port };
        let data = me.dir.path().join("data");
        let sock = me.dir.path().to_path_buf();
        run(me.cmd("initdb").arg("-D").arg(&data).args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C"]));
        let opts = format!("-p {port} -c listen_addresses=127.0.0.1 -k {} -c fsync=off", sock.display());
        run(me.cmd("pg_ctl").arg("-D").arg(&data).args(["-o", &opts, "-l"]).arg(me.dir.path().join("log")).args(["-w", "-t", "60", "start"]));
        me
    }

    fn cmd(&self, tool: &str) -> Command {
        match self.as_user {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(self.bin.join(tool));
                c
            }
            None => Command::new(self.bin.join(tool)),
        }
    }

    /// A URL for database `db` as the superuser.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Creates database `name` and runs `sql` in it.
    pub fn create(&self, name: &str, sql: &str) {
        let mut admin = postgres::Client::connect(&self.url("postgres"), postgres::NoTls).unwrap();
        admin.batch_execute(&format!("CREATE DATABASE \"{name}\"")).unwrap();
        let mut c = postgres::Client::connect(&self.url(name), postgres::NoTls).unwrap();
        c.batch_execute(sql).unwrap();
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for TempPostgres {
    fn drop(&mut self) {
        let data = self.dir.path().join("data");
        let _ = self.cmd("pg_ctl").arg("-D").arg(&data).args(["-m", "immediate", "-w", "stop"]).output();
    }
}

fn run(c: &mut Command) {
    let out = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
    assert!(out.status.success(), "{c:?} failed:\n{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}
