// SPDX-License-Identifier: GPL-2.0

//! `pvlock-mmbench THREADS SECONDS [CHUNK_KIB]`: the benchmark's workload
//! whose spinlock contention comes from real kernel paths, not from a
//! torture module. THREADS threads of one process each map an anonymous
//! chunk, touch every page of it and unmap it, in a loop, for SECONDS
//! seconds, as ebizzy does with its chunks (the workload of upstream's
//! 2019 measurements of PV spinlocks): page faults (the page table lock,
//! the page allocator's zone lock, the LRU lock), `munmap` (the mm's
//! `mmap_lock` as a writer, whose wait list is a spinlock; a TLB
//! shootdown to every CPU that runs the mm) and the frees.
//!
//! Prints one line: `ops=N secs=S threads=T chunk_kib=K`, N chunks mapped,
//! touched and unmapped in S seconds (from the start of the threads to
//! the moment they were told to stop).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PAGE: usize = 4096;

fn arg(args: &[String], i: usize, name: &str, default: Option<u64>) -> Result<u64, String> {
    match args.get(i) {
        Some(a) => a
            .parse::<u64>()
            .ok()
            .filter(|v| *v > 0)
            .ok_or_else(|| format!("{name} must be a positive number, not '{a}'")),
        None => default.ok_or_else(|| format!("missing {name}")),
    }
}

/// One chunk: mapped, every page written, unmapped.
fn one_chunk(bytes: usize) -> Result<(), String> {
    // SAFETY: an anonymous private mapping at an address the kernel
    // chooses touches no memory of this program.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(format!("mmap: {}", std::io::Error::last_os_error()));
    }
    let base = p.cast::<u8>();
    for off in (0..bytes).step_by(PAGE) {
        // SAFETY: `off < bytes`, inside the mapping made above, which
        // nothing else uses.
        unsafe { base.add(off).write_volatile(1) };
    }
    // SAFETY: unmaps exactly the mapping made above, no longer used.
    if unsafe { libc::munmap(p, bytes) } != 0 {
        return Err(format!("munmap: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

fn run(args: &[String]) -> Result<String, String> {
    let threads = arg(args, 1, "THREADS", None)?;
    let secs = arg(args, 2, "SECONDS", None)?;
    let chunk_kib = arg(args, 3, "CHUNK_KIB", Some(256))?;
    if threads > 4096 || secs > 3600 || chunk_kib > 1 << 20 {
        return Err("at most 4096 threads, 3600 s and 1 GiB chunks".into());
    }
    let bytes = (chunk_kib as usize * 1024).div_ceil(PAGE) * PAGE;
    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (stop, ops) = (stop.clone(), ops.clone());
            std::thread::spawn(move || -> Result<(), String> {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    one_chunk(bytes)?;
                    n += 1;
                }
                ops.fetch_add(n, Ordering::Relaxed);
                Ok(())
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    let elapsed = start.elapsed().as_secs_f64();
    for w in workers {
        w.join().map_err(|_| "a thread panicked".to_string())??;
    }
    Ok(format!(
        "ops={} secs={elapsed:.3} threads={threads} chunk_kib={chunk_kib}",
        ops.load(Ordering::Relaxed)
    ))
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    match run(&args) {
        Ok(line) => {
            println!("{line}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pvlock-mmbench: {e}\nusage: pvlock-mmbench THREADS SECONDS [CHUNK_KIB]");
            std::process::ExitCode::from(2)
        }
    }
}
