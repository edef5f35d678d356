// SPDX-License-Identifier: GPL-2.0

//! The pvlock queued spinlock: an MCS-queued lock on the kernel's qspinlock
//! word whose waiters spin while spinning is useful and halt when it is not,
//! and whose unlocker kicks a halted waiter awake.
//!
//! This file is the algorithm only. It knows nothing of the kernel: the lock
//! word, the CPU it runs on, halting, kicking and the clock come through
//! [`LockWord`] and [`Platform`], and atomics through `super::sync`. The guest
//! module builds it with kernel atomics; `tools/pvlock-model` builds the very
//! same file with loom's atomics and a model hypervisor to check the halt and
//! kick protocol for lost wake-ups.
//!
//! The algorithm follows upstream's `kernel/locking/qspinlock.c` and
//! `qspinlock_paravirt.h` (see `Documentation/pvlock/design.rst`):
//!
//! - A waiter first steals the lock if it is free and no queue head is
//!   actively spinning (pending clear), then queues on its per-CPU node.
//! - A queued waiter spins on its node. It halts early when the waiter ahead
//!   of it is halted or its vCPU is preempted, and after `spin_threshold`
//!   loops in any case.
//! - The queue head sets pending (no stealing) and spins for the lock. It
//!   halts early when the likely holder's vCPU is preempted, else after
//!   `spin_threshold` loops. Before halting it puts (lock, node) in a hash
//!   table and sets the locked byte to [`Q_SLOW_VAL`], so that the unlocker
//!   takes the slow unlock, finds it and kicks it.
//! - A new head that finds its successor halted does not kick it (it could
//!   only spin behind the holder): it hashes the successor and marks the lock
//!   slow, so the unlock kicks the successor when the lock is free.
//!
//! Every halt goes through [`Platform::halt_if`], which re-checks the
//! condition with interrupts disabled: a waiter halts only while the event
//! that ends its wait has not happened, and the CPU that makes it happen
//! kicks afterwards. When the host reports that a kick found the target not
//! halted ([`Kick::NotHalted`]: the project's hypercall keeps nothing for a
//! later halt), the kicker retries for as long as the target still announces
//! that it is about to halt.

use super::sync::{fence, spin_load, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Locked byte: held.
pub(crate) const Q_LOCKED_VAL: u8 = 1;
/// Locked byte: held, and a halted waiter is hashed for this lock.
pub(crate) const Q_SLOW_VAL: u8 = 3;
/// The pending bit in the lock word.
pub(crate) const Q_PENDING_VAL: u32 = 1 << 8;
/// Locked and pending bytes of the lock word.
pub(crate) const Q_LOCKED_PENDING_MASK: u32 = 0xffff;
/// Tail of the lock word: (CPU + 1) << 18 | nesting index << 16.
pub(crate) const Q_TAIL_MASK: u32 = 0xffff_0000;
const Q_TAIL_IDX_OFFSET: u32 = 16;
const Q_TAIL_CPU_OFFSET: u32 = 18;

/// Nesting levels per CPU: task, softirq, hardirq, NMI.
pub(crate) const MAX_NODES: usize = 4;

/// How often (in spin loops) a waiter looks at the vCPU it waits behind.
pub(crate) const PREEMPT_CHECK_MASK: u32 = 0x3f;

/// Early halt policy: spin until the threshold.
pub(crate) const EARLY_NEVER: u32 = 0;
/// Early halt policy: a queued waiter halts as soon as the waiter ahead of
/// it has halted (upstream's `pv_wait_early()`).
pub(crate) const EARLY_PREV_HALTED: u32 = 1;
/// Early halt policy: also halt when the vCPU waited for (the waiter ahead,
/// or for a queue head the likely lock holder) is preempted.
pub(crate) const EARLY_PREEMPTED: u32 = 2;

/// Loops between two directed yields of a spinning queue head.
pub(crate) const YIELD_INTERVAL: u32 = 1024;

/// How long (in loops) an unlocker whose kick found the waiter not yet
/// halted watches the waiter's state before it kicks again.
pub(crate) const KICK_RETRY_POLLS: u32 = 256;

// Node states.
const RUNNING: u32 = 0;
const HALTED: u32 = 1;
const HASHED: u32 = 2;

/// The lock word operations the algorithm needs (`struct qspinlock`).
pub(crate) trait LockWord {
    /// The whole word, relaxed.
    fn val(&self) -> u32;
    /// Compare-and-exchange of the whole word, acquire on success.
    fn cmpxchg_val(&self, old: u32, new: u32) -> Result<u32, u32>;
    /// Compare-and-exchange of the locked byte, acquire on success.
    fn cmpxchg_locked(&self, old: u8, new: u8) -> Result<u8, u8>;
    /// Exchange of the locked byte, fully ordered.
    fn xchg_locked(&self, new: u8) -> u8;
    /// The locked byte, relaxed.
    fn locked(&self) -> u8;
    /// Store to the locked byte, relaxed.
    fn set_locked(&self, v: u8);
    /// Store to the locked byte, release.
    fn release_locked(&self, v: u8);
    /// Store to the pending byte, relaxed.
    fn set_pending(&self, v: u8);
    /// Compare-and-exchange of the locked and pending bytes, acquire.
    fn cmpxchg_locked_pending(&self, old: u16, new: u16) -> bool;
    /// Exchange of the tail, acquire and release: publishes our node, and
    /// orders the predecessor's node set-up before our link to it. Returns
    /// the old word's tail bits.
    fn xchg_tail(&self, tail: u32) -> u32;
    /// The lock's address, a hash key.
    fn addr(&self) -> usize;
}

/// What a kick did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kick {
    /// The target was halted and is woken, or the host keeps the kick for
    /// the target's next halt (`KVM_HC_KICK_CPU`).
    Delivered,
    /// The target was not halted and the host kept nothing.
    NotHalted,
}

/// What the algorithm needs from the machine it runs on.
pub(crate) trait Platform {
    /// The current CPU (stable: lock slowpaths run with preemption off).
    fn cpu(&self) -> usize;
    /// One iteration of a busy-wait loop.
    fn relax(&self);
    /// Halts if `cond()`, evaluated with interrupts disabled, holds; returns
    /// whether it halted. Never halts in NMI context.
    fn halt_if(&self, cond: impl FnOnce() -> bool) -> bool;
    /// Wakes `cpu` if it is halted.
    fn kick(&self, cpu: usize) -> Kick;
    /// Whether the host has preempted `cpu`'s vCPU.
    fn preempted(&self, cpu: usize) -> bool;
    /// Nanoseconds, for statistics.
    fn now(&self) -> u64;
    /// Spin loops before halting while the awaited vCPU runs.
    fn spin_threshold(&self) -> u32;
    /// When to halt before the spin threshold: [`EARLY_NEVER`],
    /// [`EARLY_PREV_HALTED`] or [`EARLY_PREEMPTED`].
    fn early_halt(&self) -> u32;
    /// Whether a spinning queue head gives its time slice to the likely
    /// lock holder when the host has preempted it.
    fn yield_enabled(&self) -> bool;
    /// Gives this vCPU's time slice to `cpu`'s vCPU if it is preempted.
    fn yield_to(&self, cpu: usize);
    /// Whether to keep statistics.
    fn stats_enabled(&self) -> bool;
    /// Loops an unlocker watches a waiter that was not yet halted before it
    /// kicks again. Only delays the next kick: the model checker, which
    /// explores schedules rather than time, uses 0.
    #[inline(always)]
    fn kick_retry_polls(&self) -> u32 {
        KICK_RETRY_POLLS
    }
    /// A trace point for the model checker; nothing in the kernel (`v` is
    /// not even evaluated).
    #[inline(always)]
    fn note(&self, _what: &str, _v: impl FnOnce() -> u64) {}
}

/// Counters, per CPU; see `Documentation/pvlock/guest.rst`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(usize)]
pub(crate) enum Counter {
    /// Acquisitions through the queue (slowpath).
    TakenSlow,
    /// ... of which the head found the lock free while about to halt.
    TakenSlowPickup,
    /// Acquisitions by stealing a free lock ahead of the queue.
    TakenSteal,
    /// Slowpaths beyond four nesting levels (trylock loop).
    TakenNested,
    /// Unlocks that took the slow path (a halted waiter was hashed).
    ReleasedSlow,
    /// ... that kicked the waiter.
    ReleasedSlowKicked,
    /// Halts of a queue head.
    HaltsHead,
    /// Halts of a queued waiter behind the head.
    HaltsNode,
    /// Halts decided early: the awaited vCPU was preempted or halted.
    HaltsEarly,
    /// Wake-ups that found the wait not over.
    SpuriousWakeups,
    /// Kick hypercalls made.
    Kicks,
    /// Kicks the host answered with "not halted" (then retried).
    KicksNotHalted,
    /// Nanoseconds spent halted.
    TimeBlocked,
    /// Unlocks that found a locked byte they did not expect.
    BadUnlocks,
    /// Directed yields of a queue head to the preempted likely holder.
    Yields,
}

/// Number of [`Counter`]s.
pub(crate) const NR_COUNTERS: usize = Counter::Yields as usize + 1;

/// Every counter with its debugfs name.
pub(crate) const COUNTERS: [(Counter, &core::ffi::CStr); NR_COUNTERS] = [
    (Counter::TakenSlow, c"taken_slow"),
    (Counter::TakenSlowPickup, c"taken_slow_pickup"),
    (Counter::TakenSteal, c"taken_steal"),
    (Counter::TakenNested, c"taken_nested"),
    (Counter::ReleasedSlow, c"released_slow"),
    (Counter::ReleasedSlowKicked, c"released_slow_kicked"),
    (Counter::HaltsHead, c"halts_head"),
    (Counter::HaltsNode, c"halts_node"),
    (Counter::HaltsEarly, c"halts_early"),
    (Counter::SpuriousWakeups, c"spurious_wakeups"),
    (Counter::Kicks, c"kicks"),
    (Counter::KicksNotHalted, c"kicks_not_halted"),
    (Counter::TimeBlocked, c"time_blocked_ns"),
    (Counter::BadUnlocks, c"bad_unlocks"),
    (Counter::Yields, c"yields"),
];

/// Buckets of the histograms: `[2^k, 2^(k+1))` nanoseconds.
pub(crate) const HIST_BUCKETS: usize = 32;

/// The histograms, per CPU.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(usize)]
pub(crate) enum Histogram {
    /// Time from entering the slowpath to owning the lock.
    Wait,
    /// Time spent spinning before owning the lock or halting.
    Spin,
    /// Time of each halt.
    Blocked,
}

/// Number of [`Histogram`]s.
pub(crate) const NR_HISTOGRAMS: usize = 3;

/// Every histogram with its debugfs name.
pub(crate) const HISTOGRAMS: [(Histogram, &core::ffi::CStr); NR_HISTOGRAMS] = [
    (Histogram::Wait, c"histo_wait"),
    (Histogram::Spin, c"histo_spin"),
    (Histogram::Blocked, c"histo_blocked"),
];

/// The bucket of `v` in a histogram.
pub(crate) const fn bucket(v: u64) -> usize {
    if v == 0 {
        return 0;
    }
    let k = (63 - v.leading_zeros()) as usize;
    if k >= HIST_BUCKETS {
        HIST_BUCKETS - 1
    } else {
        k
    }
}

// Constructors are `const` for the kernel's static lock and plain functions
// under loom, whose atomics cannot be built in constant context.
macro_rules! maybe_const_fn {
    ($(#[$m:meta])* $v:vis fn $name:ident() -> $ret:ty $body:block) => {
        $(#[$m])* #[cfg(not(loom))] $v const fn $name() -> $ret $body
        $(#[$m])* #[cfg(loom)] $v fn $name() -> $ret $body
    };
}

// An array of `$n` values of `$e`, in constant context where possible.
#[cfg(not(loom))]
macro_rules! arr {
    ($e:expr; $n:expr) => {
        [const { $e }; $n]
    };
}
#[cfg(loom)]
macro_rules! arr {
    ($e:expr; $n:expr) => {
        core::array::from_fn(|_| $e)
    };
}

/// A CPU's statistics.
#[repr(align(64))]
pub(crate) struct CpuStats {
    counters: [AtomicU64; NR_COUNTERS],
    hist: [[AtomicU32; HIST_BUCKETS]; NR_HISTOGRAMS],
}

impl CpuStats {
    maybe_const_fn! {
        fn new() -> Self {
            Self {
                counters: arr![AtomicU64::new(0); NR_COUNTERS],
                hist: arr![arr![AtomicU32::new(0); HIST_BUCKETS]; NR_HISTOGRAMS],
            }
        }
    }
}

/// An MCS queue node with its paravirtual state.
#[repr(align(64))]
pub(crate) struct Node {
    /// Set to 1 by the predecessor: this node is the queue head now.
    locked: AtomicU32,
    /// Id + 1 of the successor, 0 while there is none.
    next: AtomicU32,
    /// `RUNNING`, `HALTED` (a queued waiter halts or is about to), or
    /// `HASHED` (a head halts or is about to, or a halted waiter whose
    /// predecessor hashed it for the unlocker to kick).
    state: AtomicU32,
    /// In a CPU's first node only: how many nodes that CPU uses.
    count: AtomicU32,
}

impl Node {
    maybe_const_fn! {
        fn new() -> Self {
            Self {
                locked: AtomicU32::new(0),
                next: AtomicU32::new(0),
                state: AtomicU32::new(RUNNING),
                count: AtomicU32::new(0),
            }
        }
    }
}

struct HashEntry {
    /// Address of the lock, 0 when the entry is free.
    lock: AtomicUsize,
    /// Id of the hashed node.
    node: AtomicU32,
}

impl HashEntry {
    maybe_const_fn! {
        fn new() -> Self {
            Self {
                lock: AtomicUsize::new(0),
                node: AtomicU32::new(0),
            }
        }
    }
}

/// The lock's per-CPU state for `NCPU` CPUs, with a hash table of `NHASH`
/// entries (a power of two, at least `NCPU * MAX_NODES`: every node may be
/// hashed at once).
pub(crate) struct PvLock<const NCPU: usize, const NHASH: usize> {
    nodes: [[Node; MAX_NODES]; NCPU],
    hash: [HashEntry; NHASH],
    /// By lock address hash: CPU + 1 of the last owner that took the lock
    /// through the slowpath. A hint (collisions and fast-path owners make
    /// it wrong at times) for whom a queue head waits.
    owners: [AtomicU32; NHASH],
    stats: [CpuStats; NCPU],
}

#[inline]
fn node_id(cpu: usize, idx: usize) -> u32 {
    (cpu * MAX_NODES + idx) as u32
}

#[inline]
fn encode_tail(cpu: usize, idx: usize) -> u32 {
    ((cpu as u32).wrapping_add(1) << Q_TAIL_CPU_OFFSET) | ((idx as u32) << Q_TAIL_IDX_OFFSET)
}

#[inline]
fn decode_tail(tail: u32) -> (usize, usize) {
    (
        ((tail >> Q_TAIL_CPU_OFFSET).wrapping_sub(1)) as usize,
        ((tail >> Q_TAIL_IDX_OFFSET) & 3) as usize,
    )
}

impl<const NCPU: usize, const NHASH: usize> PvLock<NCPU, NHASH> {
    maybe_const_fn! {
        /// A lock with no waiter and zeroed statistics.
        pub(crate) fn new() -> Self {
            assert!(NHASH.is_power_of_two() && NHASH >= NCPU * MAX_NODES);
            Self {
                nodes: arr![arr![Node::new(); MAX_NODES]; NCPU],
                hash: arr![HashEntry::new(); NHASH],
                owners: arr![AtomicU32::new(0); NHASH],
                stats: arr![CpuStats::new(); NCPU],
            }
        }
    }

    // Indices below are reduced modulo the table sizes. CPU numbers and node
    // ids are in range by construction (the tables are sized for `NR_CPUS`),
    // but some come from the lock word or a node's `next`, and the reduction
    // (a mask: `NCPU` is a power of two in the kernel) makes it evident to
    // the compiler that no index check, and so no panic, is needed.

    /// The node with id `id`.
    #[inline]
    fn node(&self, id: u32) -> &Node {
        let id = id as usize % (NCPU * MAX_NODES);
        &self.nodes[id / MAX_NODES][id % MAX_NODES]
    }

    /// The nodes of `cpu`.
    #[inline]
    fn cpu_nodes(&self, cpu: usize) -> &[Node; MAX_NODES] {
        &self.nodes[cpu % NCPU]
    }

    /// The statistics of `cpu`.
    #[inline]
    fn cpu_stats(&self, cpu: usize) -> &CpuStats {
        &self.stats[cpu % NCPU]
    }

    #[inline]
    fn count<P: Platform>(&self, p: &P, cpu: usize, c: Counter, v: u64) {
        if p.stats_enabled() {
            self.cpu_stats(cpu).counters[c as usize].fetch_add(v, Ordering::Relaxed);
        }
    }

    #[inline]
    fn record<P: Platform>(&self, p: &P, cpu: usize, h: Histogram, v: u64) {
        if p.stats_enabled() {
            self.cpu_stats(cpu).hist[h as usize][bucket(v)].fetch_add(1, Ordering::Relaxed);
        }
    }

    #[inline]
    fn clock<P: Platform>(&self, p: &P) -> u64 {
        if p.stats_enabled() {
            p.now()
        } else {
            0
        }
    }

    /// The sum over CPUs of counter `c`.
    pub(crate) fn counter(&self, c: Counter) -> u64 {
        self.stats
            .iter()
            .map(|s| s.counters[c as usize].load(Ordering::Relaxed))
            .fold(0u64, u64::wrapping_add)
    }

    /// The sum over CPUs of bucket `k` of histogram `h`.
    pub(crate) fn histogram_bucket(&self, h: Histogram, k: usize) -> u32 {
        self.stats
            .iter()
            .map(|s| {
                s.hist[h as usize]
                    .get(k)
                    .map_or(0, |b| b.load(Ordering::Relaxed))
            })
            .fold(0u32, u32::wrapping_add)
    }

    /// Zeroes every statistic.
    pub(crate) fn zero_stats(&self) {
        for s in &self.stats {
            for c in &s.counters {
                c.store(0, Ordering::Relaxed);
            }
            for h in &s.hist {
                for b in h {
                    b.store(0, Ordering::Relaxed);
                }
            }
        }
    }

    // ------------------------------------------------------------- hash

    fn hash_start(&self, addr: usize) -> usize {
        // Fibonacci hashing of the lock address.
        let h = (addr as u64).wrapping_mul(0x61c8_8646_80b5_83eb);
        (h >> 32) as usize & (NHASH - 1)
    }

    /// Notes `cpu` as the owner of lock `addr`.
    #[inline]
    fn set_owner(&self, addr: usize, cpu: usize) {
        self.owners[self.hash_start(addr)].store((cpu as u32).wrapping_add(1), Ordering::Relaxed);
    }

    /// The likely owner of lock `addr`, if known.
    #[inline]
    fn owner(&self, addr: usize) -> Option<usize> {
        match self.owners[self.hash_start(addr)].load(Ordering::Relaxed) {
            0 => None,
            c => Some(c as usize - 1),
        }
    }

    /// Records that node `id` waits halted for lock `addr`.
    fn hash(&self, addr: usize, id: u32) -> usize {
        let start = self.hash_start(addr);
        // NHASH >= every node there is, and a node is hashed at most once:
        // the first pass finds a free entry.
        let mut i = 0usize;
        loop {
            let slot = start.wrapping_add(i) & (NHASH - 1);
            let he = &self.hash[slot];
            if he
                .lock
                .compare_exchange(0, addr, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                he.node.store(id, Ordering::Relaxed);
                return slot;
            }
            i = i.wrapping_add(1);
        }
    }

    /// Removes and returns the node hashed for lock `addr`.
    fn unhash(&self, addr: usize) -> Option<u32> {
        let start = self.hash_start(addr);
        for i in 0..NHASH {
            let he = &self.hash[start.wrapping_add(i) & (NHASH - 1)];
            if he.lock.load(Ordering::Relaxed) == addr {
                let id = he.node.load(Ordering::Relaxed);
                he.lock.store(0, Ordering::Release);
                return Some(id);
            }
        }
        None
    }

    // ------------------------------------------------------------- lock

    /// Steals the lock while it is free and no head is spinning for it.
    fn steal<L: LockWord, P: Platform>(&self, p: &P, lock: &L) -> bool {
        loop {
            let val = lock.val();
            if val & Q_LOCKED_PENDING_MASK == 0 && lock.cmpxchg_locked(0, Q_LOCKED_VAL).is_ok() {
                return true;
            }
            if val & Q_TAIL_MASK == 0 || val & Q_PENDING_VAL != 0 {
                return false;
            }
            p.relax();
        }
    }

    /// `queued_spin_lock_slowpath()`: returns once the caller owns `lock`.
    pub(crate) fn lock_slowpath<L: LockWord, P: Platform>(&self, p: &P, lock: &L) {
        let cpu = p.cpu();
        // Take a free lock ahead of the queue when no head spins for it.
        // This needs no node: nothing nests on this CPU's nodes yet.
        if self.steal(p, lock) {
            self.set_owner(lock.addr(), cpu);
            self.count(p, cpu, Counter::TakenSteal, 1);
            return;
        }
        let t0 = self.clock(p);
        let base = &self.cpu_nodes(cpu)[0];
        let idx = base.count.load(Ordering::Relaxed) as usize;
        base.count
            .store((idx as u32).wrapping_add(1), Ordering::Relaxed);
        // The count is ours until we return: an interrupt that nests a
        // slowpath on this CPU restores it before we run again.
        fence(Ordering::Acquire);

        if idx >= MAX_NODES {
            // Deeper nesting than nodes (NMI inside everything): take the
            // lock whenever it is free, queue or no queue.
            while lock.val() & Q_LOCKED_PENDING_MASK != 0
                || lock.cmpxchg_locked(0, Q_LOCKED_VAL).is_err()
            {
                p.relax();
            }
            self.count(p, cpu, Counter::TakenNested, 1);
            base.count.store(idx as u32, Ordering::Relaxed);
            return;
        }

        let node = &self.cpu_nodes(cpu)[idx];
        node.locked.store(0, Ordering::Relaxed);
        node.next.store(0, Ordering::Relaxed);
        node.state.store(RUNNING, Ordering::Relaxed);

        // Publish the initialised node before the tail that points to it.
        fence(Ordering::Release);
        let tail = encode_tail(cpu, idx);
        let old = lock.xchg_tail(tail);
        let mut next = 0;
        let mut holder = None;
        if old & Q_TAIL_MASK != 0 {
            let (pcpu, pidx) = decode_tail(old);
            let prev = &self.cpu_nodes(pcpu)[pidx];
            prev.next
                .store(node_id(cpu, idx).wrapping_add(1), Ordering::Release);
            self.wait_node(p, cpu, node, prev, pcpu);
            // The predecessor took the lock before handing the queue on:
            // it is the likely holder now.
            holder = Some(pcpu);
            next = node.next.load(Ordering::Relaxed);
        }

        let val = self.wait_head_or_lock(p, cpu, lock, node, node_id(cpu, idx), holder, t0);

        // We own the lock. If nobody queued behind us, clear the tail.
        if val & Q_TAIL_MASK == tail && lock.cmpxchg_val(val, u32::from(Q_LOCKED_VAL)).is_ok() {
            base.count.store(idx as u32, Ordering::Relaxed);
            return;
        }
        // Somebody is queued (or about to be): wait for the link, pass the
        // queue on.
        while next == 0 {
            next = spin_load(&node.next);
            if next == 0 {
                p.relax();
            }
        }
        let succ = self.node(next - 1);
        // A full exchange: the successor announces its halt and then reads
        // `locked`, we write `locked` and then read its state (kick_node).
        succ.locked.swap(1, Ordering::AcqRel);
        self.kick_node(p, lock, succ, next - 1);
        base.count.store(idx as u32, Ordering::Relaxed);
    }

    /// Spins, then halts, until the predecessor makes `node` the head.
    fn wait_node<P: Platform>(&self, p: &P, cpu: usize, node: &Node, prev: &Node, pcpu: usize) {
        loop {
            let t_spin = self.clock(p);
            let threshold = p.spin_threshold();
            let policy = p.early_halt();
            let mut early = false;
            let mut loops: u32 = 0;
            while loops < threshold {
                if spin_load(&node.locked) != 0 {
                    self.record(p, cpu, Histogram::Spin, self.clock(p).wrapping_sub(t_spin));
                    return;
                }
                if policy >= EARLY_PREV_HALTED
                    && loops & PREEMPT_CHECK_MASK == PREEMPT_CHECK_MASK
                    && (spin_load(&prev.state) != RUNNING
                        || (policy >= EARLY_PREEMPTED && p.preempted(pcpu)))
                {
                    early = true;
                    break;
                }
                p.relax();
                loops += 1;
            }
            self.record(p, cpu, Histogram::Spin, self.clock(p).wrapping_sub(t_spin));

            // Announce the halt, then look once more (the predecessor sets
            // `locked` first and reads `state` after).
            node.state.swap(HALTED, Ordering::AcqRel);
            p.note("node: halting, early", || early.into());
            if node.locked.fetch_add(0, Ordering::AcqRel) == 0 {
                self.count(p, cpu, Counter::HaltsNode, 1);
                if early {
                    self.count(p, cpu, Counter::HaltsEarly, 1);
                }
                let t = self.clock(p);
                let still_halted = || {
                    node.state
                        .compare_exchange(HALTED, HALTED, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok()
                };
                if p.halt_if(still_halted) {
                    let d = self.clock(p).wrapping_sub(t);
                    self.count(p, cpu, Counter::TimeBlocked, d);
                    self.record(p, cpu, Histogram::Blocked, d);
                }
            }
            // Back to running unless the predecessor hashed us for a kick
            // (then we stay `HASHED` until we are the head).
            let _ =
                node.state
                    .compare_exchange(HALTED, RUNNING, Ordering::AcqRel, Ordering::Relaxed);
            if node.locked.load(Ordering::Acquire) != 0 {
                return;
            }
            self.count(p, cpu, Counter::SpuriousWakeups, 1);
        }
    }

    /// The head waits for the lock; returns the lock word once it owns it.
    #[allow(clippy::too_many_arguments)]
    fn wait_head_or_lock<L: LockWord, P: Platform>(
        &self,
        p: &P,
        cpu: usize,
        lock: &L,
        node: &Node,
        me: u32,
        holder: Option<usize>,
        t0: u64,
    ) -> u32 {
        // A predecessor that found us halted hashed us already.
        let mut hashed = node.state.load(Ordering::Relaxed) == HASHED;
        loop {
            // Every change of a node's state is a read-modify-write: an
            // unlocker that reads it with one sees the latest.
            node.state.swap(RUNNING, Ordering::AcqRel);
            p.note("head: running, node", || me.into());
            let t_spin = self.clock(p);
            let threshold = p.spin_threshold();
            let policy = p.early_halt();
            let mut early = false;
            // Pending: no stealing while we spin.
            lock.set_pending(1);
            let mut loops: u32 = 0;
            let mut last_yield: u32 = 0;
            while loops < threshold {
                if lock.locked() == 0
                    && lock.cmpxchg_locked_pending(1 << 8, u16::from(Q_LOCKED_VAL))
                {
                    let now = self.clock(p);
                    self.record(p, cpu, Histogram::Spin, now.wrapping_sub(t_spin));
                    self.record(p, cpu, Histogram::Wait, now.wrapping_sub(t0));
                    self.count(p, cpu, Counter::TakenSlow, 1);
                    p.note("head: took the lock, state", || {
                        node.state.load(Ordering::Relaxed).into()
                    });
                    self.set_owner(lock.addr(), cpu);
                    return lock.val() | u32::from(Q_LOCKED_VAL);
                }
                if loops & PREEMPT_CHECK_MASK == PREEMPT_CHECK_MASK
                    && (policy >= EARLY_PREEMPTED || p.yield_enabled())
                {
                    // Who holds the lock? The last slowpath owner, else the
                    // predecessor, which took it before handing over.
                    match self.owner(lock.addr()).or(holder) {
                        Some(h) if h != cpu && p.preempted(h) => {
                            if policy >= EARLY_PREEMPTED {
                                early = true;
                                break;
                            }
                            // No pause-loop exiting to do it for us: let the
                            // holder run, then go on spinning.
                            if loops.wrapping_sub(last_yield) >= YIELD_INTERVAL || last_yield == 0 {
                                p.yield_to(h);
                                self.count(p, cpu, Counter::Yields, 1);
                                last_yield = loops | 1;
                            }
                        }
                        _ => {}
                    }
                }
                p.relax();
                loops += 1;
            }
            lock.set_pending(0);
            self.record(p, cpu, Histogram::Spin, self.clock(p).wrapping_sub(t_spin));

            if !hashed {
                // Hash before marking the lock slow: an unlocker that sees
                // the mark must find the entry.
                let slot = self.hash(lock.addr(), me);
                if lock.xchg_locked(Q_SLOW_VAL) == 0 {
                    // The lock was free: it is ours. Undo the mark.
                    lock.set_locked(Q_LOCKED_VAL);
                    self.hash[slot].lock.store(0, Ordering::Release);
                    let now = self.clock(p);
                    self.record(p, cpu, Histogram::Wait, now.wrapping_sub(t0));
                    self.count(p, cpu, Counter::TakenSlow, 1);
                    self.count(p, cpu, Counter::TakenSlowPickup, 1);
                    self.set_owner(lock.addr(), cpu);
                    return lock.val() | u32::from(Q_LOCKED_VAL);
                }
                hashed = true;
            }

            // Announce the halt with a full exchange: the unlocker clears the
            // mark and then reads our state when its kick finds us running.
            node.state.swap(HASHED, Ordering::AcqRel);
            self.count(p, cpu, Counter::HaltsHead, 1);
            if early {
                self.count(p, cpu, Counter::HaltsEarly, 1);
            }
            let t = self.clock(p);
            // The re-check is an atomic read-modify-write of the mark, ordered
            // after the announcement above.
            if p.halt_if(|| lock.cmpxchg_locked(Q_SLOW_VAL, Q_SLOW_VAL).is_ok()) {
                let d = self.clock(p).wrapping_sub(t);
                self.count(p, cpu, Counter::TimeBlocked, d);
                self.record(p, cpu, Histogram::Blocked, d);
            }
            // While the mark is there, our entry is too: a wake-up before the
            // unlock is spurious. Once the unlocker removed both, we do not
            // hash again (upstream's rule): if the lock was stolen meanwhile
            // we spin for it with pending set, which stops further stealing,
            // rather than halt again and need another kick.
            if lock.locked() == Q_SLOW_VAL {
                self.count(p, cpu, Counter::SpuriousWakeups, 1);
            }
        }
    }

    /// The new head passed the queue to `succ`: if `succ` halted, hash it
    /// and mark the lock, for the unlock to kick it once the lock is free.
    fn kick_node<L: LockWord, P: Platform>(&self, p: &P, lock: &L, succ: &Node, id: u32) {
        p.note("kick_node: successor", || id.into());
        if succ
            .state
            .compare_exchange(HALTED, HASHED, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            // It runs and will see `locked`.
            return;
        }
        // We hold the lock and nobody else marks it while we do.
        lock.set_locked(Q_SLOW_VAL);
        self.hash(lock.addr(), id);
    }

    // ------------------------------------------------------------- unlock

    /// The unlock slowpath: `locked` is the locked byte the fast path saw.
    pub(crate) fn unlock_slowpath<L: LockWord, P: Platform>(&self, p: &P, lock: &L, locked: u8) {
        let cpu = p.cpu();
        if locked != Q_SLOW_VAL {
            // Not ours to understand; release so that nobody hangs.
            self.count(p, cpu, Counter::BadUnlocks, 1);
            lock.release_locked(0);
            return;
        }
        // Pairs with the waiter hashing before it marks the lock.
        fence(Ordering::Acquire);
        let Some(id) = self.unhash(lock.addr()) else {
            self.count(p, cpu, Counter::BadUnlocks, 1);
            lock.release_locked(0);
            return;
        };
        // A full exchange: if the kick finds the waiter running, we read its
        // state next, and it re-checks the mark after announcing its halt.
        lock.xchg_locked(0);
        self.count(p, cpu, Counter::ReleasedSlow, 1);
        let node = self.node(id);
        let target = id as usize / MAX_NODES;
        // The waiter may still be on its way into the halt. If the host says
        // so, try again while the waiter still announces it; once it runs it
        // sees the lock free by itself. The way into the halt is a few
        // instructions unless the waiter's vCPU is preempted (and the host
        // yields to it then): watch its state for a while before spending
        // another hypercall.
        'kick: loop {
            self.count(p, cpu, Counter::Kicks, 1);
            if p.kick(target) == Kick::Delivered {
                break;
            }
            self.count(p, cpu, Counter::KicksNotHalted, 1);
            let mut polls = 0;
            loop {
                let st = node.state.fetch_add(0, Ordering::AcqRel);
                p.note("unlock: waiter state", || st.into());
                if st != HASHED {
                    break 'kick;
                }
                p.relax();
                if polls >= p.kick_retry_polls() || p.preempted(target) {
                    break;
                }
                polls += 1;
            }
        }
        self.count(p, cpu, Counter::ReleasedSlowKicked, 1);
    }

    /// The whole unlock: the inline fast path, then the slowpath. (The
    /// kernel's fast path is the unlock thunk; the model calls this.)
    #[allow(dead_code)]
    pub(crate) fn unlock<L: LockWord, P: Platform>(&self, p: &P, lock: &L) {
        match lock.cmpxchg_locked(Q_LOCKED_VAL, 0) {
            Ok(_) => {}
            Err(locked) => self.unlock_slowpath(p, lock, locked),
        }
    }
}

impl<const NCPU: usize, const NHASH: usize> PvLock<NCPU, NHASH> {
    /// Whether no CPU is inside the slowpath (all nesting counts are 0).
    #[allow(dead_code)]
    pub(crate) fn idle(&self) -> bool {
        self.nodes
            .iter()
            .all(|n| n[0].count.load(Ordering::Relaxed) == 0)
    }
}
