//! A contender that went silent: before the run kills a Rust contender whose log has said nothing
//! for a while, what its threads were doing.

use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use super::slots::Slot;
use super::{Phase, SILENT};

impl Phase<'_> {
    /// A Rust contender whose event log has been silent for [`SILENT`] before we kill it has made
    /// no progress on any of its sessions (a lock acquire alone times out after 20 s): its threads'
    /// stacks go to `stack-<tag>.txt` (gdb, if installed) for the report.
    pub(super) async fn dump_if_silent(&self, slot: &Slot, pid: Option<u32>) {
        let log = self.config.out_dir.join(self.name).join(format!("events-{}.log", slot.tag));
        let silent = std::fs::metadata(&log)
            .and_then(|meta| meta.modified())
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .unwrap_or_default();
        let Some(pid) = pid.filter(|_| silent >= SILENT) else { return };
        let stacks = self.config.out_dir.join(self.name).join(format!("stack-{}.txt", slot.tag));
        println!(
            "warning: contender {} (pid {pid}) logged nothing for {} s; stacks: {}",
            slot.tag,
            silent.as_secs(),
            stacks.display()
        );
        // Before gdb attaches (which stops every thread): a process stopped by a signal shows `T`
        // in every thread, a deadlock `S` with a futex wait channel, a starved one `R`.
        let states = thread_states(pid);
        println!("warning: contender {} threads before gdb: {}", slot.tag, states.replace('\n', "; "));
        let _ = std::fs::write(&stacks, format!("{states}\n"));
        let dump = Command::new("gdb")
            .args(["-p", &pid.to_string(), "-batch", "-ex", "thread apply all bt"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output();
        if let Ok(Ok(output)) = tokio::time::timeout(Duration::from_secs(60), dump).await {
            let _ = std::fs::write(&stacks, [format!("{states}\n").into_bytes(), output.stdout].concat());
        }
    }
}

/// One line per thread of `pid`: its id, name, state letter (`R`, `S`, `D`, `T` stopped, `t`
/// traced, ...) and kernel wait channel, from `/proc`.
fn thread_states(pid: u32) -> String {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return format!("pid {pid}: no /proc entry");
    };
    let mut lines: Vec<String> = tasks
        .flatten()
        .map(|task| {
            let dir = task.path();
            let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
            let stat = read("stat");
            let state =
                stat.rfind(')').and_then(|end| stat[end + 1..].split_whitespace().next()).unwrap_or("?");
            format!(
                "tid {} {} state {state} wchan {}",
                task.file_name().to_string_lossy(),
                read("comm").trim(),
                read("wchan").trim()
            )
        })
        .collect();
    lines.sort();
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::thread_states;

    /// The silent-contender report tells a process stopped by a signal (every thread `T`) from one
    /// that is blocked or busy.
    #[test]
    fn thread_states_show_a_stopped_process() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().expect("sleep");
        let pid = child.id();
        // Just spawned, it may still be running (R) before it sleeps.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut running = thread_states(pid);
        while !running.contains("sleep state S") && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
            running = thread_states(pid);
        }
        assert!(running.contains("sleep state S"), "{running}");
        let stopped = std::process::Command::new("kill").args(["-STOP", &pid.to_string()]).status();
        assert!(stopped.expect("kill -STOP").success());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut states = thread_states(pid);
        while !states.contains("state T") && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
            states = thread_states(pid);
        }
        child.kill().expect("kill");
        child.wait().expect("reap");
        assert!(states.contains("sleep state T"), "{states}");
        assert!(thread_states(pid).contains("no /proc entry"));
    }
}
