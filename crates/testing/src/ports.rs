//! Free loopback ports.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};

use crate::error::{Result, TestingError};

/// Picks `count` distinct free ports on 127.0.0.1: binds `127.0.0.1:0` that many times (holding
/// every listener until all are picked, so they differ), reads the ports, and releases them.
///
/// There is an unavoidable race between releasing a port and the server binding it; servers
/// retry with fresh ports when that happens.
pub(crate) fn free_ports(count: usize) -> Result<Vec<u16>> {
    let listeners = (0..count)
        .map(|_| TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|err| TestingError::io("binding 127.0.0.1:0 to pick a free port", err))?;
    listeners
        .iter()
        .map(|listener| listener.local_addr().map(|addr| addr.port()))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|err| TestingError::io("reading a picked port", err))
}
