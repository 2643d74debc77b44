//! Where a server answers SQL: the socket of a node of ours, or `host:port` with a user (any
//! MariaDB server, Galera's included), through the `mariadb` client with a bounded wait.
use crate::error::Result;
use crate::node::WsrepStatus;
use crate::process::run_checked;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

#[derive(Debug, Clone)]
pub enum Endpoint {
    Socket(PathBuf),
    /// The password goes to the client in its environment (`MYSQL_PWD`), not its arguments,
    /// which any local user can read.
    Tcp {
        host: String,
        port: u16,
        user: String,
        password: Option<String>,
    },
}

impl Endpoint {
    /// Runs `sql`; returns its tab-separated output without column names. The client is
    /// killed after `timeout`, and gives up connecting after at most that long.
    pub fn sql(&self, sql: &str, timeout: Duration) -> Result<String> {
        let mut client = Command::new("mariadb");
        client.arg("--no-defaults");
        match self {
            Endpoint::Socket(path) => {
                client.arg("-S").arg(path).arg("-uroot");
            }
            Endpoint::Tcp { host, port, user, password } => {
                client.args(["-h", host, "-P", &port.to_string(), "-u", user, "--protocol=TCP"]);
                if let Some(password) = password {
                    client.env("MYSQL_PWD", password);
                }
            }
        }
        let connect_seconds = timeout.as_secs().clamp(1, 5);
        client.args(["-N", "-B", &format!("--connect-timeout={connect_seconds}"), "-e", sql]);
        let output = run_checked(&mut client, timeout)?;
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// `SHOW GLOBAL STATUS LIKE 'wsrep%'`.
    pub fn wsrep_status(&self, timeout: Duration) -> Result<WsrepStatus> {
        let text = self.sql("SHOW GLOBAL STATUS LIKE 'wsrep%'", timeout)?;
        Ok(WsrepStatus::parse(&text))
    }
}
