//! A throwaway ZooKeeper for trying the other examples against `ZK_CONNECT`: starts one embedded
//! server (the machine's Debian `zookeeper` package), prints `ZK_CONNECT=<host:port>`, and serves
//! until its standard input closes (Ctrl-D, or the end of a pipe); then it stops and deletes its
//! data.
//!
//! ```sh
//! cargo run -p zk-recipes-examples --example zookeeper_server
//! ZK_CONNECT=127.0.0.1:<port> scripts/demo.sh      # in another terminal
//! ```

use std::io::Read;

use zk_recipes_testing::TestingServer;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut server = TestingServer::start().await?;
    println!("ZK_CONNECT={}", server.connect_string());
    tokio::task::spawn_blocking(|| std::io::stdin().read_to_end(&mut Vec::new())).await??;
    server.stop().await?;
    Ok(())
}
