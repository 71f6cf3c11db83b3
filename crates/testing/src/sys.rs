//! Sending a signal to a server JVM, through rustix's safe `kill(2)`.

use std::io;

use rustix::process::{kill_process, Pid};

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
    fn to_rustix(self) -> rustix::process::Signal {
        match self {
            Signal::Term => rustix::process::Signal::TERM,
            Signal::Kill => rustix::process::Signal::KILL,
            Signal::Stop => rustix::process::Signal::STOP,
            Signal::Cont => rustix::process::Signal::CONT,
        }
    }
}

/// Sends `signal` to process `pid`. `ESRCH` (already gone) is reported as an error too.
pub(crate) fn send_signal(pid: u32, signal: Signal) -> io::Result<()> {
    // A positive pid names exactly one process, never a process group or "every process".
    let pid = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    kill_process(pid, signal.to_rustix())?;
    Ok(())
}
