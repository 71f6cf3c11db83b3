//! The one place that calls into libc: sending a signal to a process.
#![allow(unsafe_code)]

use std::io;

/// Signals we send to server JVMs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    /// Polite shutdown.
    Term,
    /// Immediate death.
    Kill,
    /// Freeze (cannot be caught).
    Stop,
    /// Thaw after [`Signal::Stop`].
    Cont,
}

impl Signal {
    fn number(self) -> libc::c_int {
        match self {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
            Signal::Stop => libc::SIGSTOP,
            Signal::Cont => libc::SIGCONT,
        }
    }
}

/// Sends `signal` to process `pid`. `ESRCH` (already gone) is reported as an error too.
pub(crate) fn send_signal(pid: u32, signal: Signal) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid)
        .ok()
        .filter(|pid| *pid > 0)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    // SAFETY: kill(2) takes two plain integers and touches no memory of ours; `pid` is positive,
    // so it names exactly one process and never a process group or "every process".
    let rc = unsafe { libc::kill(pid, signal.number()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
