//! Running `ip` and `tc` (iproute2): finding the binaries, and one command at a time, from async
//! code or from `Drop`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::error::{Result, TestingError};

/// Where iproute2's binaries are looked for when they are not on `PATH` (a non-login root shell
/// often lacks the `sbin` directories).
const SBIN_DIRS: [&str; 4] = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

/// The path of iproute2's `name` (`ip` or `tc`): on `PATH`, else in the usual `sbin` directories.
pub(crate) fn find_binary(name: &str) -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).map(|dir| dir.join(name)).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain(SBIN_DIRS.iter().map(|dir| Path::new(dir).join(name)))
        .find(|path| path.is_file())
}

/// One iproute2 invocation's failure: the command line and what it said.
#[derive(Debug)]
pub(crate) struct CommandFailure {
    pub(crate) command: String,
    pub(crate) reason: String,
}

impl CommandFailure {
    /// As the crate's error for a command that should have worked.
    pub(crate) fn into_error(self) -> TestingError {
        TestingError::NetworkCommand { command: self.command, reason: self.reason }
    }
}

fn describe(binary: &Path, args: &[String]) -> String {
    let name = binary.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    format!("{name} {}", args.join(" "))
}

fn judge(binary: &Path, args: &[String], output: std::io::Result<Output>) -> Result<(), CommandFailure> {
    match output {
        Ok(output) if output.status.success() => Ok(()),
        Ok(output) => Err(CommandFailure {
            command: describe(binary, args),
            reason: format!("{}: {}", output.status, String::from_utf8_lossy(&output.stderr).trim()),
        }),
        Err(err) => Err(CommandFailure { command: describe(binary, args), reason: err.to_string() }),
    }
}

/// Runs `binary args…` to completion from async code.
pub(crate) async fn run(binary: &Path, args: &[String]) -> Result<(), CommandFailure> {
    let output = tokio::process::Command::new(binary)
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await;
    tracing::trace!(
        command = describe(binary, args),
        ok = matches!(&output, Ok(out) if out.status.success()),
        "iproute2"
    );
    judge(binary, args, output)
}

/// Runs `binary args…` to completion, blocking: for set-up on a blocking thread and for `Drop`.
pub(crate) fn run_blocking(binary: &Path, args: &[String]) -> Result<(), CommandFailure> {
    let output = Command::new(binary).args(args).stdin(Stdio::null()).output();
    judge(binary, args, output)
}

/// `args` as owned strings.
pub(crate) fn args(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|part| (*part).to_owned()).collect()
}
