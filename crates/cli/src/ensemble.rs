//! `zkr ensemble`: the servers' dynamic configuration (`/zookeeper/config`) and the server this
//! client is connected to.

use std::fmt::Write as _;
use std::net::SocketAddr;

use serde::Serialize;
use zk_recipes_framework::{Deadline, EnsembleConfig, Framework};

use crate::output::View;

/// One `server.N` line.
#[derive(Debug, Serialize)]
pub struct ServerRow {
    pub id: u64,
    pub role: String,
    pub quorum: String,
    pub election: String,
    /// `None` in a static configuration (no `;clientPort`).
    pub client: Option<String>,
    /// Whether this client's connection goes to this server's client address.
    pub connected: bool,
}

/// What `zkr ensemble` prints.
#[derive(Debug, Serialize)]
pub struct EnsembleView {
    /// The configuration's version, hexadecimal as ZooKeeper writes it.
    pub version: Option<String>,
    pub servers: Vec<ServerRow>,
    /// The server address this client is connected to (Linux; `None` if not found).
    pub connected_to: Option<String>,
}

/// Reads the configuration and looks up the connection.
pub async fn ensemble(
    framework: &Framework,
    deadline: Deadline,
) -> zk_recipes_framework::Result<EnsembleView> {
    let config = framework.ensemble_config(deadline).await?;
    let connected_to = framework.connected_server().await;
    Ok(view(&config, connected_to))
}

fn view(config: &EnsembleConfig, connected_to: Option<SocketAddr>) -> EnsembleView {
    let connected = connected_to.map(|address| address.to_string());
    let servers = config
        .servers()
        .iter()
        .map(|server| ServerRow {
            id: server.id(),
            role: server.role().to_string(),
            quorum: server.quorum_address().to_owned(),
            election: server.election_address().to_owned(),
            client: server.client_address().map(str::to_owned),
            connected: connected.is_some() && server.client_address() == connected.as_deref(),
        })
        .collect();
    EnsembleView {
        version: config.version().map(|version| format!("{version:x}")),
        servers,
        connected_to: connected,
    }
}

impl View for EnsembleView {
    fn table(&self) -> String {
        let mut text = format!("version: {}\n", self.version.as_deref().unwrap_or("-"));
        text.push_str(&format!("connected to: {}\n", self.connected_to.as_deref().unwrap_or("unknown")));
        // One line per server, labelled (addresses vary in width; the id and role do not).
        for server in &self.servers {
            let _ = writeln!(
                text,
                "server.{:<3} {:1}  {:<11}  quorum {}  election {}  client {}",
                server.id,
                if server.connected { "*" } else { "" },
                server.role,
                server.quorum,
                server.election,
                server.client.as_deref().unwrap_or("-"),
            );
        }
        text
    }

    fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string_pretty(self).map(|text| format!("{text}\n"))
    }

    fn is_no(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connected_server_is_marked() {
        let config = EnsembleConfig::parse(
            "server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181\n\
             server.2=127.0.0.1:2889:3889:observer;127.0.0.1:2182\n\
             version=100000002",
        )
        .expect("parses");
        let view = view(&config, Some("127.0.0.1:2182".parse().expect("address")));
        assert_eq!(view.version.as_deref(), Some("100000002"));
        assert!(!view.servers[0].connected);
        assert!(view.servers[1].connected);
        let table = view.table();
        assert!(table.contains("connected to: 127.0.0.1:2182"), "{table}");
        assert!(
            table
                .lines()
                .any(|line| line.starts_with("server.2   *  observer")
                    && line.ends_with("client 127.0.0.1:2182")),
            "{table}"
        );
        assert!(table.lines().any(|line| line.starts_with("server.1      participant")), "{table}");
        let json: serde_json::Value = serde_json::from_str(&view.json().expect("json")).expect("valid");
        assert_eq!(json["servers"][0]["client"], "127.0.0.1:2181");
    }

    #[test]
    fn a_static_configuration_shows_no_client_address() {
        let config =
            EnsembleConfig::parse("server.1=127.0.0.1:2888:3888:participant\nversion=0").expect("parses");
        let view = view(&config, None);
        assert!(view.table().contains("connected to: unknown"));
        assert!(view.table().contains("client -"), "{}", view.table());
        assert_eq!(view.servers[0].client, None);
    }
}
