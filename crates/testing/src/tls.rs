//! TLS for a test server: a throwaway CA, a server certificate for `127.0.0.1`/`localhost` and
//! client certificates, made with the `openssl` command line when the server starts, and the
//! `zoo.cfg` lines of ZooKeeper's TLS client port (PEM key and trust stores).
//!
//! `openssl` rather than a Rust crate: it is already on a machine with Debian's JDK (it comes
//! with `ca-certificates`; `scripts/install-deps.sh` installs it anyway), it writes the PEM files
//! ZooKeeper and zookeeper-client read as they are, and it adds no crate (nor a second crypto
//! library to compile) to every test that uses this crate.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Result, TestingError};
use crate::launch::write_file;

/// The environment variable that names the `openssl` binary; `openssl` on `PATH` otherwise.
pub const OPENSSL_ENV: &str = "OPENSSL";

/// How long one `openssl` run may take (a P-256 key and a signature take milliseconds).
const OPENSSL_TIMEOUT: Duration = Duration::from_secs(30);

/// The subject of the client certificate signed by the server's CA ([`TestingTls::client_subject`]).
pub const TLS_CLIENT_SUBJECT: &str = "CN=zk-recipes test client";

/// Whether a TLS test server asks clients for a certificate (ZooKeeper's `ssl.clientAuth`).
///
/// # Example
/// ```no_run
/// # async fn demo() -> Result<(), zk_recipes_testing::TestingError> {
/// use zk_recipes_testing::{TestingServer, TlsClientAuth};
///
/// let server = TestingServer::builder().tls(TlsClientAuth::Need).start().await?;
/// # Ok(()) }
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsClientAuth {
    /// Clients are not asked for a certificate (`ssl.clientAuth=none`): the server proves who it
    /// is, clients do not.
    None,
    /// Clients must present a certificate signed by the server's CA (`ssl.clientAuth=need`); a
    /// client without one, or with one the CA did not sign, fails the handshake. ZooKeeper's
    /// `x509` authentication provider then authenticates the client as the certificate's subject
    /// (`x509:CN=zk-recipes test client`).
    Need,
}

impl TlsClientAuth {
    fn config_value(self) -> &'static str {
        match self {
            TlsClientAuth::None => "none",
            TlsClientAuth::Need => "need",
        }
    }
}

/// The TLS material of a test server started [`tls`](crate::TestingServerBuilder::tls),
/// all PEM, all made for this server alone (keys are P-256, certificates valid for two days):
///
/// * [`ca_pem`](Self::ca_pem): the CA that signed the server's certificate (for
///   `127.0.0.1` and `localhost`); a client that trusts it can connect.
/// * [`client_cert_pem`](Self::client_cert_pem) / [`client_key_pem`](Self::client_key_pem): a
///   client identity signed by that CA (subject [`TLS_CLIENT_SUBJECT`]).
/// * [`untrusted_ca_pem`](Self::untrusted_ca_pem) and an untrusted client identity: a second
///   CA the server knows nothing of, and a client certificate it signed, to show refusals.
///
/// The files (including the server's key store) live in the server's temp dir and go with it.
///
/// # Example
/// ```no_run
/// # async fn demo() -> Result<(), zk_recipes_testing::TestingError> {
/// use zk_recipes_testing::{TestingServer, TlsClientAuth};
///
/// let server = TestingServer::builder().tls(TlsClientAuth::None).start().await?;
/// let tls = server.tls().expect("started with TLS");
/// let secure = server.secure_connect_string().expect("started with TLS"); // "127.0.0.1:PORT"
/// assert!(tls.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct TestingTls {
    client_auth: TlsClientAuth,
    ca_pem: String,
    client_cert_pem: String,
    client_key_pem: String,
    untrusted_ca_pem: String,
    untrusted_client_cert_pem: String,
    untrusted_client_key_pem: String,
    key_store_path: PathBuf,
    trust_store_path: PathBuf,
}

impl TestingTls {
    /// Whether the server asks clients for a certificate.
    pub fn client_auth(&self) -> TlsClientAuth {
        self.client_auth
    }

    /// The CA that signed the server's certificate, PEM: trust it to connect.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// A client certificate signed by the server's CA, PEM (subject [`TLS_CLIENT_SUBJECT`]).
    pub fn client_cert_pem(&self) -> &str {
        &self.client_cert_pem
    }

    /// The private key of [`client_cert_pem`](Self::client_cert_pem), PEM (PKCS#8, unencrypted).
    pub fn client_key_pem(&self) -> &str {
        &self.client_key_pem
    }

    /// The subject of [`client_cert_pem`](Self::client_cert_pem), as ZooKeeper's `x509`
    /// provider names the authenticated client: [`TLS_CLIENT_SUBJECT`].
    pub fn client_subject(&self) -> &str {
        TLS_CLIENT_SUBJECT
    }

    /// A CA that signed nothing the server has and that the server does not trust, PEM. A client
    /// that trusts only it must refuse the server's certificate.
    pub fn untrusted_ca_pem(&self) -> &str {
        &self.untrusted_ca_pem
    }

    /// A client certificate signed by [`untrusted_ca_pem`](Self::untrusted_ca_pem), PEM: a
    /// server with [`TlsClientAuth::Need`] refuses it.
    pub fn untrusted_client_cert_pem(&self) -> &str {
        &self.untrusted_client_cert_pem
    }

    /// The private key of [`untrusted_client_cert_pem`](Self::untrusted_client_cert_pem), PEM.
    pub fn untrusted_client_key_pem(&self) -> &str {
        &self.untrusted_client_key_pem
    }

    /// Makes every key and certificate in `dir` and the server's PEM key store (its key, then
    /// its certificate) and trust store (the CA).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `openssl` run is killed.
    pub(crate) async fn generate(dir: &Path, client_auth: TlsClientAuth) -> Result<TestingTls> {
        let openssl = Openssl::locate(dir)?;
        let ca = openssl.ca("ca", "zk-recipes testing CA").await?;
        let server = openssl.leaf("server", "localhost", "server_ext", &ca, 2).await?;
        let client = openssl.leaf("client", "zk-recipes test client", "client_ext", &ca, 3).await?;
        let untrusted_ca = openssl.ca("untrusted-ca", "zk-recipes untrusted CA").await?;
        let untrusted_client = openssl
            .leaf("untrusted-client", "zk-recipes untrusted client", "client_ext", &untrusted_ca, 4)
            .await?;

        let key_store_path = dir.join("server-keystore.pem");
        write_file(&key_store_path, &format!("{}{}", read(&server.key)?, read(&server.cert)?))?;
        Ok(TestingTls {
            client_auth,
            ca_pem: read(&ca.cert)?,
            client_cert_pem: read(&client.cert)?,
            client_key_pem: read(&client.key)?,
            untrusted_ca_pem: read(&untrusted_ca.cert)?,
            untrusted_client_cert_pem: read(&untrusted_client.cert)?,
            untrusted_client_key_pem: read(&untrusted_client.key)?,
            key_store_path,
            trust_store_path: ca.cert,
        })
    }

    /// The `zoo.cfg` lines of the TLS client port on 127.0.0.1: `secureClientPort`, Netty (the
    /// only connection factory that speaks TLS), PEM key and trust stores, `ssl.clientAuth` and,
    /// when clients must present a certificate, the `x509` authentication provider.
    pub(crate) fn server_config(&self, secure_port: u16) -> String {
        let mut config = String::new();
        let _ = writeln!(config, "secureClientPort={secure_port}");
        let _ = writeln!(config, "secureClientPortAddress=127.0.0.1");
        let _ = writeln!(config, "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory");
        let _ = writeln!(config, "ssl.keyStore.location={}", self.key_store_path.display());
        let _ = writeln!(config, "ssl.keyStore.type=PEM");
        let _ = writeln!(config, "ssl.trustStore.location={}", self.trust_store_path.display());
        let _ = writeln!(config, "ssl.trustStore.type=PEM");
        let _ = writeln!(config, "ssl.clientAuth={}", self.client_auth.config_value());
        if self.client_auth == TlsClientAuth::Need {
            let _ = writeln!(
                config,
                "authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider"
            );
        }
        config
    }
}

/// The extensions of the certificates `openssl` makes (its own config file, so that the
/// machine's `openssl.cnf` does not matter).
const OPENSSL_CONFIG: &str = "\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca_ext]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[server_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[client_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
";

/// A key and its certificate, as files.
struct KeyPair {
    key: PathBuf,
    cert: PathBuf,
}

/// Runs `openssl` in one directory with [`OPENSSL_CONFIG`].
struct Openssl {
    binary: PathBuf,
    dir: PathBuf,
    config: PathBuf,
}

impl Openssl {
    fn locate(dir: &Path) -> Result<Openssl> {
        let binary = std::env::var_os(OPENSSL_ENV).map_or_else(|| PathBuf::from("openssl"), PathBuf::from);
        let config = dir.join("openssl.cnf");
        write_file(&config, OPENSSL_CONFIG)?;
        Ok(Openssl { binary, dir: dir.to_path_buf(), config })
    }

    /// A self-signed CA named `common_name` (`NAME-key.pem`, `NAME.pem`).
    async fn ca(&self, name: &str, common_name: &str) -> Result<KeyPair> {
        let pair = self.pair(name);
        let subject = format!("/CN={common_name}");
        self.req_with_new_key(
            &format!("making the CA {name}"),
            &["req", "-x509", "-extensions", "ca_ext", "-days", "2", "-subj", &subject],
            &pair,
        )
        .await?;
        Ok(pair)
    }

    /// A key and a certificate for `common_name` with the extensions `section`, signed by `ca`.
    async fn leaf(
        &self,
        name: &str,
        common_name: &str,
        section: &str,
        ca: &KeyPair,
        serial: u32,
    ) -> Result<KeyPair> {
        let pair = self.pair(name);
        let request = self.dir.join(format!("{name}.csr"));
        let subject = format!("/CN={common_name}");
        let what = format!("making the {name} certificate");
        let request_pair = KeyPair { key: pair.key.clone(), cert: request.clone() };
        self.req_with_new_key(&what, &["req", "-new", "-subj", &subject], &request_pair).await?;
        let serial = serial.to_string();
        let mut args: Vec<&std::ffi::OsStr> = Vec::new();
        for arg in ["x509", "-req", "-days", "2", "-set_serial", &serial, "-extensions", section] {
            args.push(arg.as_ref());
        }
        args.extend([
            "-in".as_ref(),
            request.as_os_str(),
            "-CA".as_ref(),
            ca.cert.as_os_str(),
            "-CAkey".as_ref(),
            ca.key.as_os_str(),
            "-extfile".as_ref(),
            self.config.as_os_str(),
            "-out".as_ref(),
            pair.cert.as_os_str(),
        ]);
        self.run_openssl(&what, args).await?;
        Ok(pair)
    }

    fn pair(&self, name: &str) -> KeyPair {
        KeyPair { key: self.dir.join(format!("{name}-key.pem")), cert: self.dir.join(format!("{name}.pem")) }
    }

    /// `openssl req ARGS` with a new P-256 key written unencrypted to `pair.key` and the output
    /// (certificate or request) to `pair.cert`.
    async fn req_with_new_key(&self, what: &str, args: &[&str], pair: &KeyPair) -> Result<()> {
        let mut all: Vec<&std::ffi::OsStr> = args.iter().map(|arg| arg.as_ref()).collect();
        all.extend([
            "-config".as_ref(),
            self.config.as_os_str(),
            "-newkey".as_ref(),
            "ec".as_ref(),
            "-pkeyopt".as_ref(),
            "ec_paramgen_curve:prime256v1".as_ref(),
            "-nodes".as_ref(),
            "-keyout".as_ref(),
            pair.key.as_os_str(),
            "-out".as_ref(),
            pair.cert.as_os_str(),
        ]);
        self.run_openssl(what, all).await
    }

    /// Runs `openssl ARGS` (killed if it takes over [`OPENSSL_TIMEOUT`] or is cancelled).
    async fn run_openssl(&self, what: &str, args: Vec<&std::ffi::OsStr>) -> Result<()> {
        let error = |reason: String| TestingError::Openssl {
            binary: self.binary.clone(),
            what: what.to_owned(),
            reason,
        };
        let output = tokio::process::Command::new(&self.binary)
            .args(args)
            .current_dir(&self.dir)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output();
        let output = match tokio::time::timeout(OPENSSL_TIMEOUT, output).await {
            Err(_) => return Err(error(format!("no answer within {} s", OPENSSL_TIMEOUT.as_secs()))),
            Ok(Err(err)) => return Err(error(err.to_string())),
            Ok(Ok(output)) => output,
        };
        if !output.status.success() {
            return Err(error(format!(
                "{}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        Ok(())
    }
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|err| TestingError::io(format!("reading {}", path.display()), err))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn material(client_auth: TlsClientAuth) -> TestingTls {
        TestingTls {
            client_auth,
            ca_pem: String::new(),
            client_cert_pem: String::new(),
            client_key_pem: String::new(),
            untrusted_ca_pem: String::new(),
            untrusted_client_cert_pem: String::new(),
            untrusted_client_key_pem: String::new(),
            key_store_path: PathBuf::from("/tmp/server-keystore.pem"),
            trust_store_path: PathBuf::from("/tmp/ca.pem"),
        }
    }

    #[test]
    fn server_config_names_the_secure_port_netty_and_pem_stores() {
        let config = material(TlsClientAuth::None).server_config(2281);
        for line in [
            "secureClientPort=2281",
            "secureClientPortAddress=127.0.0.1",
            "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
            "ssl.keyStore.location=/tmp/server-keystore.pem",
            "ssl.keyStore.type=PEM",
            "ssl.trustStore.location=/tmp/ca.pem",
            "ssl.trustStore.type=PEM",
            "ssl.clientAuth=none",
        ] {
            assert!(config.lines().any(|have| have == line), "missing {line} in\n{config}");
        }
        assert!(!config.contains("authProvider.x509"), "{config}");
    }

    #[test]
    fn client_auth_needs_a_certificate_and_the_x509_provider() {
        let config = material(TlsClientAuth::Need).server_config(2281);
        assert!(config.lines().any(|line| line == "ssl.clientAuth=need"), "{config}");
        assert!(
            config.lines().any(|line| line
                == "authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider"),
            "{config}"
        );
    }

    #[tokio::test]
    async fn openssl_makes_a_ca_and_certificates_for_loopback() {
        let dir = tempfile::tempdir().expect("temp dir");
        let tls = TestingTls::generate(dir.path(), TlsClientAuth::Need).await.expect("openssl");
        for pem in
            [tls.ca_pem(), tls.client_cert_pem(), tls.untrusted_ca_pem(), tls.untrusted_client_cert_pem()]
        {
            assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
        }
        for pem in [tls.client_key_pem(), tls.untrusted_client_key_pem()] {
            assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"), "PKCS#8, as ZooKeeper reads it: {pem}");
        }
        assert_ne!(tls.ca_pem(), tls.untrusted_ca_pem());
        let key_store = read(&tls.key_store_path).expect("key store");
        assert!(
            key_store.starts_with("-----BEGIN PRIVATE KEY-----")
                && key_store.contains("-----BEGIN CERTIFICATE-----"),
            "{key_store}"
        );
    }
}
