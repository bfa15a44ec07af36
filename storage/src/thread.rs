//! The calling thread's CPU priority, for the threads that do background disk work (the ledger
//! storage's flush and reader threads).
//!
//! Here because it is a raw `libc` call: `nix`, the safe system-call layer the other crates use,
//! has no `setpriority` (nix-rust/nix#1272), and `storage` is the one crate that calls `libc`
//! directly (ARCHITECTURE §10).

/// Sets the calling thread's nice value (`setpriority(PRIO_PROCESS, gettid(), nice)`; on Linux
/// nice is per thread). Raising it needs no privilege, lowering it does.
pub fn set_nice(nice: i32) -> std::io::Result<()> {
    // SAFETY: two plain syscalls on the calling thread; no pointers.
    let rc = unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, nice)
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// Raising the nice value of this (test) thread is allowed and does not touch the others.
    #[test]
    fn raises_the_calling_threads_nice() {
        std::thread::spawn(|| {
            super::set_nice(19).expect("setpriority");
            // Field 19 of /proc/thread-self/stat, the 17th after the command's ')'.
            let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
            let rest = &stat[stat.rfind(')').unwrap() + 2..];
            assert_eq!(rest.split_whitespace().nth(16), Some("19"));
        })
        .join()
        .unwrap();
    }
}
