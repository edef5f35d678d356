// SPDX-License-Identifier: GPL-2.0

//! The pvlock queued spinlock: an MCS-queued lock on the kernel's qspinlock
//! word whose waiters spin while spinning is useful and then wait in the
//! hypervisor, and whose unlocker kicks a waiting waiter awake.
//!
//! This file is the algorithm only. It knows nothing of the kernel: the lock
//! word, the CPU it runs on, waiting, kicking and the clock come through
//! [`LockWord`] and [`Platform`], atomics and tables through `super::sync`,
//! the lock word's layout through `super::qspinlock` and the ABI through
//! `super::abi`. The guest module builds it with kernel atomics;
//! `tools/pvlock-model` builds the very same file with loom's atomics and a
//! model hypervisor to check the wait and kick protocol for lost wake-ups
//! and the lock for mutual exclusion.
//!
//! The algorithm follows upstream's `kernel/locking/qspinlock.c` and
//! `qspinlock_paravirt.h` (see `Documentation/pvlock/design.rst`):
//!
//! - A waiter first steals the lock if it is free and no queue head is
//!   actively spinning (pending clear). If the lock is held and nobody else
//!   waits, it spins as the pending waiter, bounded ([`PvLock::pending`]).
//!   Then it queues on its per-CPU node.
//! - A queued waiter spins on its node. It waits early when the waiter ahead
//!   of it waits or its vCPU is preempted, and after `spin_threshold` loops in
//!   any case.
//! - The queue head sets pending (no stealing) and spins for the lock. When
//!   the likely holder's vCPU is preempted it yields to it once, then waits
//!   early; else it waits after `spin_threshold` loops. Before waiting it
//!   puts (lock, node) in a hash table and sets the locked byte to
//!   [`Q_SLOW_VAL`], so that the unlocker takes the slow unlock, finds it
//!   and kicks it.
//! - A new head that finds its successor waiting does not kick it (it could
//!   only spin behind the holder): it hashes the successor and marks the
//!   lock slow, so the unlock kicks the successor when the lock is free.
//!
//! # Waits and kicks
//!
//! Every wait has a token, larger than every earlier token of its CPU. A
//! waiter stores the token in its node, announces the wait in its node's
//! state, and then waits through [`Platform::wait_if`], which re-checks the
//! lock with interrupts disabled and waits only while the event that ends
//! the wait has not happened. The CPU that makes it happen reads the token
//! after that and kicks the waiter with it: one hypercall, never a loop on
//! the waiter's state. If the kick comes before the wait, the host holds it
//! for the wait with that token ([`Kick::Held`]): between the re-check and
//! the wait no interrupt runs, so the held kick is still there when the wait
//! starts. A kick for a wait that is over ends no later wait (tokens grow).
//!
//! A host with `host_kvm` bounds every lock wait (1 s by default) and says
//! so when the bound ended one ([`Waited::Bound`]): whatever loses a kick,
//! here or in the host, a waiter waits at most that long and looks at its
//! lock again. A waiter whose bounded wait ended after the unlock that owed
//! it a kick counts a missed wake-up, which the tests require to be 0.
//!
//! A host of ABI 4 also says whether the wait's kick ended it
//! ([`Waited::Kicked`]) or something else did ([`Waited::Other`]), and a
//! kick that found its wait ([`Kick::Woken`]) is always followed by
//! [`Waited::Kicked`] for that wait. So a wait that ended without its kick
//! although its kick had found it waiting lost that kick in the host,
//! whatever ended the wait, an interrupt included: the waiter and the
//! kicker each record their half in the node ([`Node::lost`]), and whoever
//! completes the pair counts a lost wake-up (`wakeups_lost`).
//!
//! # Modes
//!
//! How a CPU waits and kicks is the lock's mode, which only ever moves
//! towards [`Mode::Spin`]: [`Mode::Wait`] (`KVM_HC_PVLOCK_WAIT` and
//! `KVM_HC_PVLOCK_KICK`), [`Mode::Hlt`] (`HLT` and `KVM_HC_KICK_CPU`, whose
//! kick is latched until the target's next halt), [`Mode::Spin`] (no wait
//! at all). A kick is never dropped: if the host refuses the project kick
//! for one target, `KVM_HC_KICK_CPU` (which ends a lock wait too) or an NMI
//! wakes that target; if the host withdrew the hypercall, the lock moves to
//! the next mode for good and the kick is made again in it. In
//! [`Mode::Spin`] the kick is an NMI, which ends any wait. A waiter reads
//! the mode before its re-check and the unlocker after its release, so the
//! unlocker's mode is never older than the waiter's: an older waiter is
//! woken by a newer kick (`KVM_HC_KICK_CPU` and the NMI end every kind of
//! wait).

use super::abi::{self, Kick};
use super::qspinlock::{
    decode_tail, encode_tail, MAX_NODES, Q_LOCKED_MASK, Q_LOCKED_PENDING_MASK, Q_LOCKED_VAL,
    Q_PENDING_VAL, Q_SLOW_VAL, Q_TAIL_MASK,
};
use super::sync::{
    fence, publish, spin_load, table, AtomicU32, AtomicU64, AtomicUsize, Ordering, Table,
};

/// How often (in spin loops) a waiter looks at the vCPU it waits behind.
pub(crate) const PREEMPT_CHECK_MASK: u32 = 0x3f;

/// When a waiter waits before the spin threshold (each policy does what
/// the one before it does, and more: they are ordered).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) enum EarlyHalt {
    /// Spin until the threshold.
    Never = 0,
    /// A queued waiter waits as soon as the waiter ahead of it waits
    /// (upstream's `pv_wait_early()`).
    PrevHalted = 1,
    /// Also wait when the vCPU waited for (the waiter ahead, or for a
    /// queue head the likely lock holder) is preempted.
    Preempted = 2,
}

impl EarlyHalt {
    /// The policy numbered `v` (the module parameter), if there is one.
    pub(crate) const fn from_u32(v: u32) -> Option<Self> {
        match v {
            0 => Some(Self::Never),
            1 => Some(Self::PrevHalted),
            2 => Some(Self::Preempted),
            _ => None,
        }
    }
}

/// How the lock waits and kicks; it only moves forward, towards
/// [`Mode::Spin`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) enum Mode {
    /// Waits are `KVM_HC_PVLOCK_WAIT`, kicks `KVM_HC_PVLOCK_KICK`.
    Wait = 0,
    /// Waits are `HLT`, kicks `KVM_HC_KICK_CPU`.
    Hlt = 1,
    /// No waits; a kick (for a waiter from before) is an NMI.
    Spin = 2,
}

impl Mode {
    /// The mode numbered `v` (as [`PvLock`] stores it), if there is one.
    pub(crate) const fn from_u32(v: u32) -> Option<Self> {
        match v {
            0 => Some(Self::Wait),
            1 => Some(Self::Hlt),
            2 => Some(Self::Spin),
            _ => None,
        }
    }

    /// The name of the mode, for logs and debugfs.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::Wait => "kvm_hc_pvlock_wait",
            Self::Hlt => "hlt_kvm_hc_kick_cpu",
            Self::Spin => "spin",
        }
    }
}

/// A queue node's state, stored as its number in [`Node::state`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum NodeState {
    /// Spinning, or not queued.
    Running = 0,
    /// A queued waiter that waits or is about to.
    Halted = 1,
    /// A head that waits or is about to, or a waiting waiter whose
    /// predecessor hashed it for the unlocker to kick.
    Hashed = 2,
}

// The node states as stored (the atomics' values).
const RUNNING: u32 = NodeState::Running as u32;
const HALTED: u32 = NodeState::Halted as u32;
const HASHED: u32 = NodeState::Hashed as u32;

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

/// How a waiter waits.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Wait {
    /// `KVM_HC_PVLOCK_WAIT` with the token.
    Hypercall,
    /// `HLT`.
    Hlt,
}

/// What [`Platform::wait_if`] did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Waited {
    /// The condition was false: no wait.
    Skipped,
    /// The CPU waited, and its kick ended the wait (or came before it).
    Kicked,
    /// The CPU waited, and an event other than its kick ended the wait (an
    /// interrupt, an NMI).
    Other,
    /// The CPU waited, and the wait ended; the platform does not say what
    /// ended it (`HLT`, or a host before ABI 4).
    Ended,
    /// The CPU waited until the host's bound on the wait ended it: no kick
    /// came in that time.
    Bound,
    /// The host withdrew the wait hypercall (`-KVM_ENOSYS`): no wait.
    Gone,
}

/// Why a kick failed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum KickError {
    /// The host withdrew the hypercall (`-KVM_ENOSYS`): for every target.
    Gone,
    /// The host refused it for this target (`-KVM_EINVAL`, or another
    /// error).
    Refused,
}

/// Seeded bugs, for the model check to show that it catches them. The
/// kernel's [`Platform`] never turns one on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Mutant {
    /// Wait without re-checking the lock first.
    NoRecheck,
    /// The new head hashes its waiting successor but does not mark the lock
    /// slow.
    NoSlowMark,
    /// The head marks the lock slow before it hashes itself.
    MarkBeforeHash,
    /// The waiter stores its token after the re-check.
    TokenAfterRecheck,
    /// A failed kick is counted and dropped.
    NoFallback,
    /// The pending waiter takes a free lock with plain stores, as the
    /// native lock's may (there the queue head waits for pending to
    /// clear; here it does not).
    PendingPlainTake,
}

/// What the algorithm needs from the machine it runs on.
pub(crate) trait Platform {
    /// The current CPU (stable: lock slowpaths run with preemption off).
    fn cpu(&self) -> usize;
    /// One iteration of a busy-wait loop.
    fn relax(&self);
    /// Waits as `how` says (with `token` for a hypercall wait) if `cond()`,
    /// evaluated with interrupts disabled, holds. Never waits in NMI
    /// context.
    fn wait_if(&self, how: Wait, token: u64, cond: impl FnOnce() -> bool) -> Waited;
    /// `KVM_HC_PVLOCK_KICK`: ends `cpu`'s wait with `token`, now or when it
    /// comes.
    fn kick(&self, cpu: usize, token: u64) -> Result<Kick, KickError>;
    /// Whether `KVM_HC_KICK_CPU` is offered.
    fn have_kick_cpu(&self) -> bool;
    /// `KVM_HC_KICK_CPU`: ends `cpu`'s halt or lock wait, or its next one.
    fn kick_cpu(&self, cpu: usize) -> Result<(), KickError>;
    /// Ends whatever wait `cpu` is in, with an NMI.
    fn wake_nmi(&self, cpu: usize);
    /// Whether the host has preempted `cpu`'s vCPU.
    fn preempted(&self, cpu: usize) -> bool;
    /// Nanoseconds, for statistics and the first token.
    fn now(&self) -> u64;
    /// Spin loops before waiting while the awaited vCPU runs.
    fn spin_threshold(&self) -> u32;
    /// When to wait before the spin threshold.
    fn early_halt(&self) -> EarlyHalt;
    /// Whether a spinning queue head gives its time slice to the likely
    /// lock holder when the host has preempted it.
    fn yield_enabled(&self) -> bool;
    /// Whether a waiter that finds the lock held and nobody else waiting
    /// spins on the pending bit before it queues.
    fn pending_enabled(&self) -> bool;
    /// Gives this vCPU's time slice to `cpu`'s vCPU if it is preempted.
    fn yield_to(&self, cpu: usize);
    /// Whether to keep statistics.
    fn stats_enabled(&self) -> bool;
    /// Adds `v` to one of this CPU's counters (only this CPU adds to it).
    #[inline(always)]
    fn stat_add(&self, a: &AtomicU64, v: u64) {
        a.fetch_add(v, Ordering::Relaxed);
    }
    /// Adds 1 to one of this CPU's histogram buckets.
    #[inline(always)]
    fn stat_inc(&self, a: &AtomicU32) {
        a.fetch_add(1, Ordering::Relaxed);
    }
    /// A trace point for the model checker; nothing in the kernel (`v` is
    /// not even evaluated).
    #[inline(always)]
    fn note(&self, _what: &str, _v: impl FnOnce() -> u64) {}
    /// Whether the seeded bug `m` is on (model check only).
    #[inline(always)]
    fn mutant(&self, _m: Mutant) -> bool {
        false
    }
}

/// Counters, per CPU: the list is [`abi::GuestCounter`], defined once with
/// its debugfs names.
pub(crate) use super::abi::GuestCounter as Counter;

/// Number of [`Counter`]s.
pub(crate) const NR_COUNTERS: usize = abi::GUEST_COUNTERS.len();

/// Every counter, in order.
pub(crate) const COUNTERS: [Counter; NR_COUNTERS] = abi::GUEST_COUNTER_LIST;

/// The histograms, per CPU: [`abi::GuestHistogram`], with their names.
pub(crate) use super::abi::GuestHistogram as Histogram;

/// Number of [`Histogram`]s.
pub(crate) const NR_HISTOGRAMS: usize = abi::GUEST_HISTOGRAMS.len();

/// Every histogram, in order.
pub(crate) const HISTOGRAMS: [Histogram; NR_HISTOGRAMS] = abi::GUEST_HISTOGRAM_LIST;

/// An MCS queue node with its paravirtual state.
#[repr(align(64))]
pub(crate) struct Node {
    /// Set to 1 by the predecessor: this node is the queue head now.
    locked: AtomicU32,
    /// Id + 1 of the successor, 0 while there is none.
    next: AtomicU32,
    /// `RUNNING`, `HALTED` (a queued waiter waits or is about to), or
    /// `HASHED` (a head waits or is about to, or a waiting waiter whose
    /// predecessor hashed it for the unlocker to kick).
    state: AtomicU32,
    /// The token of the node's wait, stored before the wait is announced.
    token: AtomicU64,
    /// The lost-kick check of the node's latest wait that ended without its
    /// kick or whose kick found it waiting: its token shifted left by 2,
    /// with [`LOST_WAIT`] and [`LOST_KICK`] for the halves seen so far.
    lost: AtomicU64,
}

/// [`Node::lost`]: the wait ended without its kick.
const LOST_WAIT: u64 = 1;
/// [`Node::lost`]: the host said the kick found the wait ([`Kick::Woken`]).
const LOST_KICK: u64 = 2;

impl Node {
    /// Records `half` ([`LOST_WAIT`] or [`LOST_KICK`]) of the wait `token`;
    /// returns whether it completes the pair: a kick lost. A half for a wait
    /// older than the one recorded is dropped: its pair was the newer
    /// wait's (a kicker held up past the waiter's next wait that ended
    /// without its kick leaves its lost kick uncounted).
    fn lost_half(&self, token: u64, half: u64) -> bool {
        let token = token & (u64::MAX >> 2);
        let mut cur = self.lost.load(Ordering::Relaxed);
        loop {
            let new = match (cur >> 2).cmp(&token) {
                core::cmp::Ordering::Less => (token << 2) | half,
                core::cmp::Ordering::Equal => cur | half,
                core::cmp::Ordering::Greater => return false,
            };
            if new == cur {
                return false;
            }
            match self
                .lost
                .compare_exchange(cur, new, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return new & (LOST_WAIT | LOST_KICK) == LOST_WAIT | LOST_KICK,
                Err(c) => cur = c,
            }
        }
    }

    /// A node of a CPU whose tokens start at `first_token` (not 0).
    fn new(first_token: u64) -> Self {
        Self {
            locked: AtomicU32::new(0),
            next: AtomicU32::new(0),
            state: AtomicU32::new(RUNNING),
            // An unlocker can read a head's token between the head's slow
            // mark and its token store (it then kicks a wait that is over,
            // or not begun, and the head's re-check finds the lock
            // released). Before the node's first wait that is this one:
            // below every token of its CPU's waits, and not 0, which the
            // host refuses.
            token: AtomicU64::new(first_token),
            lost: AtomicU64::new(0),
        }
    }
}

/// A CPU's nodes, tokens and statistics.
#[repr(align(64))]
pub(crate) struct CpuState {
    nodes: [Node; MAX_NODES],
    /// How many nodes the CPU uses (slowpaths nested on it).
    count: AtomicU32,
    /// The CPU's last wait token.
    token: AtomicU64,
    counters: [AtomicU64; NR_COUNTERS],
    hist: [[AtomicU32; abi::HIST_BUCKETS]; NR_HISTOGRAMS],
}

impl CpuState {
    fn new(first_token: u64) -> Self {
        Self {
            nodes: core::array::from_fn(|_| Node::new(first_token)),
            count: AtomicU32::new(0),
            token: AtomicU64::new(first_token),
            counters: core::array::from_fn(|_| AtomicU64::new(0)),
            hist: core::array::from_fn(|_| core::array::from_fn(|_| AtomicU32::new(0))),
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
    fn new() -> Self {
        Self {
            lock: AtomicUsize::new(0),
            node: AtomicU32::new(0),
        }
    }
}

/// The lock's per-CPU state and hash table, for the CPUs the guest can have.
///
/// # Invariants
///
/// `cpus.len() == cpu_mask + 1` and `hash.len() == owners.len() ==
/// hash_mask + 1`, powers of two; `hash` has an entry for every node.
pub(crate) struct PvLock {
    cpus: Table<CpuState>,
    cpu_mask: usize,
    hash: Table<HashEntry>,
    /// By lock address hash: CPU + 1 of the last owner that took the lock
    /// through the slowpath. A hint (collisions and fast-path owners make
    /// it wrong at times) for whom a queue head waits.
    owners: Table<AtomicU32>,
    hash_mask: usize,
    /// A [`Mode`]'s number; only grows.
    mode: AtomicU32,
    /// Stands in for an index out of range, which the invariants exclude:
    /// the lookups below need no panic path.
    spare: CpuState,
    spare_entry: HashEntry,
    spare_owner: AtomicU32,
}

/// The CPU a slow path runs on, read once at its start (`lock_slowpath`,
/// `unlock_slowpath`) with preemption off and passed down. Statistics
/// are counted with non-locked adds (`Platform::stat_add`), correct only on
/// the CPU whose counters they are: [`PvLock::count`] and
/// [`PvLock::record`] take a `Here`, not a CPU number, so that no caller
/// can hand them another CPU's.
#[derive(Clone, Copy)]
struct Here(usize);

impl Here {
    /// The CPU the caller runs on.
    #[inline]
    fn of<P: Platform>(p: &P) -> Self {
        Self(p.cpu())
    }

    /// Its number.
    #[inline]
    fn cpu(self) -> usize {
        self.0
    }
}

#[inline]
fn node_id(cpu: usize, idx: usize) -> u32 {
    (cpu * MAX_NODES + idx) as u32
}

impl PvLock {
    /// The lock state for `ncpu` CPUs, waiting and kicking as `mode` says;
    /// the first tokens are `first_token` (the clock: each wait takes more
    /// than a nanosecond, so a lock made later starts above every token of
    /// an earlier one).
    pub(crate) fn new(ncpu: usize, mode: Mode, first_token: u64) -> Option<Self> {
        // No token is 0: the host refuses a kick with it.
        let first_token = first_token.max(1);
        let ncpu = ncpu.max(1).checked_next_power_of_two()?;
        let nhash = ncpu.checked_mul(MAX_NODES)?;
        // INVARIANT: powers of two, `nhash` entries for `ncpu * MAX_NODES`
        // nodes.
        Some(Self {
            cpus: table(ncpu, || CpuState::new(first_token))?,
            cpu_mask: ncpu - 1,
            hash: table(nhash, HashEntry::new)?,
            owners: table(nhash, || AtomicU32::new(0))?,
            hash_mask: nhash - 1,
            mode: AtomicU32::new(mode as u32),
            spare: CpuState::new(first_token),
            spare_entry: HashEntry::new(),
            spare_owner: AtomicU32::new(0),
        })
    }

    /// The state of `cpu`.
    #[inline]
    fn cpu_state(&self, cpu: usize) -> &CpuState {
        self.cpus.get(cpu & self.cpu_mask).unwrap_or(&self.spare)
    }

    /// The node with id `id`.
    #[inline]
    fn node(&self, id: u32) -> &Node {
        let id = id as usize;
        &self.cpu_state(id / MAX_NODES).nodes[id % MAX_NODES]
    }

    #[inline]
    fn hash_entry(&self, slot: usize) -> &HashEntry {
        self.hash
            .get(slot & self.hash_mask)
            .unwrap_or(&self.spare_entry)
    }

    #[inline]
    fn owner_hint(&self, addr: usize) -> &AtomicU32 {
        let slot = self.hash_start(addr);
        self.owners.get(slot).unwrap_or(&self.spare_owner)
    }

    /// The lock's mode now.
    pub(crate) fn mode(&self) -> Mode {
        // Only `new()` and `degrade()` store it, always a `Mode`'s number;
        // were it anything else, not waiting at all is the safe reading.
        Mode::from_u32(self.mode.load(Ordering::Acquire)).unwrap_or(Mode::Spin)
    }

    /// Moves from `from` to the next mode that works without it: waits
    /// with `HLT` if `KVM_HC_KICK_CPU` is offered, else no waits. Returns
    /// the mode now, which is past `from`.
    fn degrade<P: Platform>(&self, p: &P, here: Here, from: Mode) -> Mode {
        let to = if from == Mode::Wait && p.have_kick_cpu() {
            Mode::Hlt
        } else {
            Mode::Spin
        };
        match self.mode.compare_exchange(
            from as u32,
            to as u32,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                self.count(p, here, Counter::ModeChanges, 1);
                p.note("mode ->", || to as u64);
                to
            }
            // Another CPU moved it on: what it stored is a mode's number.
            Err(now) => Mode::from_u32(now).unwrap_or(Mode::Spin),
        }
    }

    #[inline]
    fn count<P: Platform>(&self, p: &P, here: Here, c: Counter, v: u64) {
        if p.stats_enabled() {
            if let Some(a) = self.cpu_state(here.cpu()).counters.get(c as usize) {
                p.stat_add(a, v);
            }
        }
    }

    #[inline]
    fn record<P: Platform>(&self, p: &P, here: Here, h: Histogram, v: u64) {
        if p.stats_enabled() {
            let bucket = abi::bucket(v);
            if let Some(b) = self
                .cpu_state(here.cpu())
                .hist
                .get(h as usize)
                .and_then(|h| h.get(bucket))
            {
                p.stat_inc(b);
            }
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
        self.cpus
            .iter()
            .filter_map(|s| s.counters.get(c as usize))
            .map(|a| a.load(Ordering::Relaxed))
            .fold(0u64, u64::wrapping_add)
    }

    /// The sum over CPUs of bucket `k` of histogram `h`.
    pub(crate) fn histogram_bucket(&self, h: Histogram, k: usize) -> u32 {
        self.cpus
            .iter()
            .filter_map(|s| s.hist.get(h as usize).and_then(|h| h.get(k)))
            .map(|b| b.load(Ordering::Relaxed))
            .fold(0u32, u32::wrapping_add)
    }

    /// Zeroes every statistic.
    pub(crate) fn zero_stats(&self) {
        for s in self.cpus.iter() {
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

    /// Whether no CPU is inside the slowpath (all nesting counts are 0).
    #[allow(dead_code)]
    pub(crate) fn idle(&self) -> bool {
        self.cpus
            .iter()
            .all(|s| s.count.load(Ordering::Relaxed) == 0)
    }

    // ------------------------------------------------------------- hash

    fn hash_start(&self, addr: usize) -> usize {
        // Fibonacci hashing of the lock address.
        let h = (addr as u64).wrapping_mul(0x61c8_8646_80b5_83eb);
        (h >> 32) as usize & self.hash_mask
    }

    /// Notes `cpu` as the owner of lock `addr`.
    #[inline]
    fn set_owner(&self, addr: usize, cpu: usize) {
        self.owner_hint(addr)
            .store((cpu as u32).wrapping_add(1), Ordering::Relaxed);
    }

    /// The likely owner of lock `addr`, if known.
    #[inline]
    fn owner(&self, addr: usize) -> Option<usize> {
        match self.owner_hint(addr).load(Ordering::Relaxed) {
            0 => None,
            c => Some(c as usize - 1),
        }
    }

    /// The likely holder of `lock` (its last slowpath owner, else
    /// `fallback`) if it is another CPU and the host has preempted it.
    #[inline]
    fn preempted_holder<L: LockWord, P: Platform>(
        &self,
        p: &P,
        lock: &L,
        fallback: Option<usize>,
        cpu: usize,
    ) -> Option<usize> {
        self.owner(lock.addr())
            .or(fallback)
            .filter(|&h| h != cpu && p.preempted(h))
    }

    /// Records that node `id` waits for lock `addr`; returns the slot.
    fn hash(&self, addr: usize, id: u32) -> Option<usize> {
        let start = self.hash_start(addr);
        // The table has an entry for every node, and a node is hashed at
        // most once: a free entry is found in one pass, and `None` is not
        // reachable.
        for i in 0..=self.hash_mask {
            let slot = start.wrapping_add(i) & self.hash_mask;
            let he = self.hash_entry(slot);
            if he
                .lock
                .compare_exchange(0, addr, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                he.node.store(id, Ordering::Relaxed);
                return Some(slot);
            }
        }
        None
    }

    /// Removes and returns the node hashed for lock `addr`.
    fn unhash(&self, addr: usize) -> Option<u32> {
        let start = self.hash_start(addr);
        for i in 0..=self.hash_mask {
            let he = self.hash_entry(start.wrapping_add(i));
            if he.lock.load(Ordering::Relaxed) == addr {
                let id = he.node.load(Ordering::Relaxed);
                he.lock.store(0, Ordering::Release);
                return Some(id);
            }
        }
        None
    }

    // ------------------------------------------------------------- waits

    /// A new token for a wait of `cpu`.
    #[inline]
    fn next_token(&self, cpu: usize) -> u64 {
        // An atomic increment: a slowpath nested on this CPU by an
        // interrupt gets a token of its own.
        self.cpu_state(cpu)
            .token
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_add(1)
    }

    /// Waits in `mode` for the wait `token` of `node` while `cond()` holds;
    /// counts the time, and a lost kick. A withdrawn wait hypercall moves
    /// the lock to the next mode. Returns whether the host's bound ended the
    /// wait.
    fn wait_in_mode<P: Platform>(
        &self,
        p: &P,
        here: Here,
        node: &Node,
        mode: Mode,
        token: u64,
        cond: impl FnOnce() -> bool,
    ) -> bool {
        let how = if mode == Mode::Wait {
            Wait::Hypercall
        } else {
            Wait::Hlt
        };
        let t = self.clock(p);
        let cond = || p.mutant(Mutant::NoRecheck) || cond();
        let waited = p.wait_if(how, token, cond);
        match waited {
            Waited::Kicked | Waited::Other | Waited::Ended | Waited::Bound => {
                let d = self.clock(p).wrapping_sub(t);
                self.count(p, here, Counter::TimeBlocked, d);
                self.record(p, here, Histogram::Blocked, d);
                if waited == Waited::Bound {
                    self.count(p, here, Counter::WaitsBound, 1);
                }
                if waited == Waited::Other {
                    self.count(p, here, Counter::WaitsOther, 1);
                }
                if matches!(waited, Waited::Other | Waited::Bound)
                    && node.lost_half(token, LOST_WAIT)
                {
                    self.count(p, here, Counter::WakeupsLost, 1);
                }
            }
            Waited::Gone => {
                self.degrade(p, here, mode);
            }
            Waited::Skipped => {}
        }
        waited == Waited::Bound
    }

    /// Kicks the wait `token` of node `id`: one hypercall, two if the host
    /// refuses the first for its CPU, three if it withdraws both kind of
    /// kick; never a wait for the target.
    fn kick_waiter<P: Platform>(&self, p: &P, here: Here, id: u32, token: u64) {
        let target = id as usize / MAX_NODES;
        // Read after the release: never older than the mode the waiter
        // read before its re-check.
        let mut mode = self.mode();
        // Each turn either returns or moves `mode` on: at most three.
        loop {
            match mode {
                Mode::Wait => {
                    self.count(p, here, Counter::Kicks, 1);
                    match p.kick(target, token) {
                        Ok(Kick::Woken) => {
                            if self.node(id).lost_half(token, LOST_KICK) {
                                self.count(p, here, Counter::WakeupsLost, 1);
                            }
                            return;
                        }
                        Ok(Kick::Held) => {
                            self.count(p, here, Counter::KicksHeld, 1);
                            return;
                        }
                        Err(e) => {
                            self.count(p, here, Counter::KickFailures, 1);
                            p.note("kick failed, target", || target as u64);
                            if p.mutant(Mutant::NoFallback) {
                                return;
                            }
                            if e == KickError::Gone {
                                mode = self.degrade(p, here, Mode::Wait);
                                continue;
                            }
                            // Refused for this target only (host_kvm
                            // refuses a kick only when no single vCPU has
                            // the target's APIC ID, or it is the caller's):
                            // end its wait another way, by CPU number. A
                            // `KVM_HC_KICK_CPU` to the same APIC ID would
                            // reach nobody and report success.
                            p.wake_nmi(target);
                            self.count(p, here, Counter::KicksFallback, 1);
                            self.count(p, here, Counter::KicksNmi, 1);
                            return;
                        }
                    }
                }
                Mode::Hlt => {
                    self.count(p, here, Counter::Kicks, 1);
                    if p.kick_cpu(target).is_ok() {
                        return;
                    }
                    self.count(p, here, Counter::KickFailures, 1);
                    if p.mutant(Mutant::NoFallback) {
                        return;
                    }
                    mode = self.degrade(p, here, Mode::Hlt);
                }
                Mode::Spin => {
                    p.wake_nmi(target);
                    self.count(p, here, Counter::KicksNmi, 1);
                    return;
                }
            }
        }
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

    /// The pending waiter: upstream's native pending path, bounded. When
    /// the lock is held and nobody else waits for it (no pending waiter,
    /// no queue), claims the pending bit and spins for the lock without a
    /// node: at most `spin_threshold` loops, and not once the likely
    /// holder's vCPU is preempted (`early_halt=2`). Returns whether it took
    /// the lock; if not, the caller queues (a head sets pending anyway).
    ///
    /// It never waits, so nothing ever has to kick it, and nobody waits
    /// for it: a queue head takes a free lock whether pending is set or not
    /// (the two race with atomic exchanges of the locked byte; every
    /// acquisition is one), and the pending bit only keeps stealers and
    /// other pending waiters off. Two vCPUs contending for a lock then take
    /// it with one locked instruction each, not the queue's three.
    fn pending<L: LockWord, P: Platform>(&self, p: &P, here: Here, lock: &L) -> bool {
        let locked = u32::from(Q_LOCKED_VAL);
        if lock.cmpxchg_val(locked, locked | Q_PENDING_VAL).is_err() {
            return false;
        }
        let cpu = here.cpu();
        p.note("pending: claimed", || 0);
        let t_spin = self.clock(p);
        let threshold = p.spin_threshold();
        let policy = p.early_halt();
        let mut loops: u32 = 0;
        while loops < threshold {
            let val = lock.val();
            if val & Q_LOCKED_MASK == 0 {
                let took = if p.mutant(Mutant::PendingPlainTake) {
                    lock.set_locked(Q_LOCKED_VAL);
                    lock.set_pending(0);
                    true
                } else {
                    lock.cmpxchg_locked_pending(val as u16, u16::from(Q_LOCKED_VAL))
                };
                if took {
                    self.record(p, here, Histogram::Spin, self.clock(p).wrapping_sub(t_spin));
                    self.count(p, here, Counter::TakenPending, 1);
                    self.set_owner(lock.addr(), cpu);
                    return true;
                }
            } else if policy >= EarlyHalt::Preempted
                && loops & PREEMPT_CHECK_MASK == PREEMPT_CHECK_MASK
                && self.preempted_holder(p, lock, None, cpu).is_some()
            {
                // A preempted holder: queue, where waiting is possible.
                break;
            }
            p.relax();
            loops += 1;
        }
        self.record(p, here, Histogram::Spin, self.clock(p).wrapping_sub(t_spin));
        p.note("pending: queues after loops", || loops.into());
        false
    }

    /// `queued_spin_lock_slowpath()`: returns once the caller owns `lock`.
    pub(crate) fn lock_slowpath<L: LockWord, P: Platform>(&self, p: &P, lock: &L) {
        let here = Here::of(p);
        let cpu = here.cpu();
        // Take a free lock ahead of the queue when no head spins for it.
        // This needs no node: nothing nests on this CPU's nodes yet.
        if self.steal(p, lock) {
            self.set_owner(lock.addr(), cpu);
            self.count(p, here, Counter::TakenSteal, 1);
            return;
        }
        // Held, and nobody else waits: spin as the pending waiter.
        if p.pending_enabled() && self.pending(p, here, lock) {
            return;
        }
        let t0 = self.clock(p);
        let cs = self.cpu_state(cpu);
        let idx = cs.count.load(Ordering::Relaxed) as usize;
        cs.count
            .store((idx as u32).wrapping_add(1), Ordering::Relaxed);
        // The count is ours until we return: an interrupt that nests a
        // slowpath on this CPU restores it before we run again.
        fence(Ordering::Acquire);

        let Some(node) = cs.nodes.get(idx) else {
            // Deeper nesting than nodes (NMI inside everything): take the
            // lock whenever it is free, queue or pending waiter or not (the
            // pending waiter may be the context this one interrupted).
            while lock.locked() != 0 || lock.cmpxchg_locked(0, Q_LOCKED_VAL).is_err() {
                p.relax();
            }
            self.count(p, here, Counter::TakenNested, 1);
            cs.count.store(idx as u32, Ordering::Relaxed);
            return;
        };
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
            let prev = self.node(node_id(pcpu, pidx));
            publish(&prev.next, node_id(cpu, idx).wrapping_add(1));
            self.wait_node(p, here, lock, node, prev, pcpu);
            // The predecessor took the lock before handing the queue on:
            // it is the likely holder now.
            holder = Some(pcpu);
            next = node.next.load(Ordering::Relaxed);
        }

        let val = self.wait_head_or_lock(p, here, lock, node, node_id(cpu, idx), holder, t0);

        // We own the lock. If nobody queued behind us, clear the tail.
        if val & Q_TAIL_MASK == tail && lock.cmpxchg_val(val, u32::from(Q_LOCKED_VAL)).is_ok() {
            cs.count.store(idx as u32, Ordering::Relaxed);
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
        // A full exchange: the successor announces its wait and then reads
        // `locked`, we write `locked` and then read its state (kick_node).
        succ.locked.swap(1, Ordering::AcqRel);
        self.kick_node(p, here, lock, succ, next - 1);
        cs.count.store(idx as u32, Ordering::Relaxed);
    }

    /// Spins, then waits, until the predecessor makes `node` the head.
    fn wait_node<L: LockWord, P: Platform>(
        &self,
        p: &P,
        here: Here,
        lock: &L,
        node: &Node,
        prev: &Node,
        pcpu: usize,
    ) {
        let cpu = here.cpu();
        loop {
            let t_spin = self.clock(p);
            let threshold = p.spin_threshold();
            let policy = p.early_halt();
            let mut early = false;
            let mut loops: u32 = 0;
            while loops < threshold {
                if spin_load(&node.locked) != 0 {
                    self.record(p, here, Histogram::Spin, self.clock(p).wrapping_sub(t_spin));
                    return;
                }
                if policy >= EarlyHalt::PrevHalted
                    && loops & PREEMPT_CHECK_MASK == PREEMPT_CHECK_MASK
                    && (spin_load(&prev.state) != RUNNING
                        || (policy >= EarlyHalt::Preempted && p.preempted(pcpu)))
                {
                    early = true;
                    break;
                }
                p.relax();
                loops += 1;
            }
            self.record(p, here, Histogram::Spin, self.clock(p).wrapping_sub(t_spin));

            // The mode before the re-check; no waits in Mode::Spin.
            let mode = self.mode();
            if mode == Mode::Spin {
                continue;
            }
            // Token, then the announcement, then one more look (the
            // predecessor sets `locked` first and reads `state` after).
            let token = self.next_token(cpu);
            if !p.mutant(Mutant::TokenAfterRecheck) {
                node.token.store(token, Ordering::Relaxed);
            }
            node.state.swap(HALTED, Ordering::AcqRel);
            p.note("node: waiting, early", || early.into());
            if node.locked.fetch_add(0, Ordering::AcqRel) == 0 {
                self.count(p, here, Counter::HaltsNode, 1);
                if early {
                    self.count(p, here, Counter::HaltsEarly, 1);
                }
                let still_halted = || {
                    let c = node
                        .state
                        .compare_exchange(HALTED, HALTED, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok();
                    if p.mutant(Mutant::TokenAfterRecheck) {
                        node.token.store(token, Ordering::Relaxed);
                    }
                    c
                };
                let bound = self.wait_in_mode(p, here, node, mode, token, still_halted);
                if bound
                    && node.locked.load(Ordering::Acquire) != 0
                    && node.state.load(Ordering::Relaxed) == HASHED
                    && lock.locked() != Q_SLOW_VAL
                {
                    // The predecessor made us head and hashed us for the
                    // unlock, which removed the mark and had to kick us.
                    self.count(p, here, Counter::WakeupsMissed, 1);
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
            self.count(p, here, Counter::SpuriousWakeups, 1);
        }
    }

    /// The head waits for the lock; returns the lock word once it owns it.
    #[allow(clippy::too_many_arguments)]
    fn wait_head_or_lock<L: LockWord, P: Platform>(
        &self,
        p: &P,
        here: Here,
        lock: &L,
        node: &Node,
        me: u32,
        holder: Option<usize>,
        t0: u64,
    ) -> u32 {
        let cpu = here.cpu();
        // A predecessor that found us waiting hashed us already.
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
            let mut yielded = false;
            // Pending: no stealing while we spin.
            lock.set_pending(1);
            let mut loops: u32 = 0;
            while loops < threshold {
                // Take a free lock whatever the pending bit says: a pending
                // waiter may have it, and may take the lock first.
                let val = lock.val();
                if val & Q_LOCKED_MASK == 0
                    && lock.cmpxchg_locked_pending(val as u16, u16::from(Q_LOCKED_VAL))
                {
                    let now = self.clock(p);
                    self.record(p, here, Histogram::Spin, now.wrapping_sub(t_spin));
                    self.record(p, here, Histogram::Wait, now.wrapping_sub(t0));
                    self.count(p, here, Counter::TakenSlow, 1);
                    p.note("head: took the lock, state", || {
                        node.state.load(Ordering::Relaxed).into()
                    });
                    self.set_owner(lock.addr(), cpu);
                    return lock.val() | u32::from(Q_LOCKED_VAL);
                }
                if loops & PREEMPT_CHECK_MASK == PREEMPT_CHECK_MASK
                    && (policy >= EarlyHalt::Preempted || p.yield_enabled())
                {
                    // Who holds the lock? The last slowpath owner, else the
                    // predecessor, which took it before handing over.
                    if let Some(h) = self.preempted_holder(p, lock, holder, cpu) {
                        // No pause-loop exiting to do it for us: give the
                        // holder our time slice once; if it is still
                        // preempted after that, wait.
                        if p.yield_enabled() && !yielded {
                            p.yield_to(h);
                            self.count(p, here, Counter::Yields, 1);
                            yielded = true;
                        } else if policy >= EarlyHalt::Preempted {
                            early = true;
                            break;
                        }
                    }
                }
                if val & Q_PENDING_VAL == 0 {
                    // A pending waiter took the lock (and the bit) from
                    // under us: keep stealers off again.
                    lock.set_pending(1);
                }
                p.relax();
                loops += 1;
            }
            lock.set_pending(0);
            self.record(p, here, Histogram::Spin, self.clock(p).wrapping_sub(t_spin));

            // The mode before the re-check; no waits in Mode::Spin.
            let mode = self.mode();
            if mode == Mode::Spin {
                continue;
            }
            if !hashed {
                // Hash before marking the lock slow: an unlocker that sees
                // the mark must find the entry.
                let marked = p
                    .mutant(Mutant::MarkBeforeHash)
                    .then(|| lock.xchg_locked(Q_SLOW_VAL));
                let Some(slot) = self.hash(lock.addr(), me) else {
                    continue;
                };
                if marked.unwrap_or_else(|| lock.xchg_locked(Q_SLOW_VAL)) == 0 {
                    // The lock was free: it is ours. Undo the mark.
                    lock.set_locked(Q_LOCKED_VAL);
                    self.hash_entry(slot).lock.store(0, Ordering::Release);
                    let now = self.clock(p);
                    self.record(p, here, Histogram::Wait, now.wrapping_sub(t0));
                    self.count(p, here, Counter::TakenSlow, 1);
                    self.count(p, here, Counter::TakenSlowPickup, 1);
                    self.set_owner(lock.addr(), cpu);
                    return lock.val() | u32::from(Q_LOCKED_VAL);
                }
                hashed = true;
            }

            // The token, then the announcement with a full exchange, then
            // the re-check: the unlocker releases, then reads the token.
            let token = self.next_token(cpu);
            if !p.mutant(Mutant::TokenAfterRecheck) {
                node.token.store(token, Ordering::Relaxed);
            }
            node.state.swap(HASHED, Ordering::AcqRel);
            self.count(p, here, Counter::HaltsHead, 1);
            if early {
                self.count(p, here, Counter::HaltsEarly, 1);
            }
            // The re-check is an atomic read-modify-write of the mark,
            // ordered after the announcement above.
            let still_slow = || {
                let c = lock.cmpxchg_locked(Q_SLOW_VAL, Q_SLOW_VAL).is_ok();
                if p.mutant(Mutant::TokenAfterRecheck) {
                    node.token.store(token, Ordering::Relaxed);
                }
                c
            };
            let bound = self.wait_in_mode(p, here, node, mode, token, still_slow);
            if bound && lock.locked() != Q_SLOW_VAL {
                // The unlock removed the mark (and our entry), then had to
                // kick us: its kick did not end the wait within the host's
                // bound. (Or it is still on its way, from an unlocker
                // preempted between its release and its kick for as long.)
                self.count(p, here, Counter::WakeupsMissed, 1);
            }
            // While the mark is there, our entry is too: a wake-up before the
            // unlock is spurious. Once the unlocker removed both, we do not
            // hash again (upstream's rule): if the lock was stolen meanwhile
            // we spin for it with pending set, which stops further stealing,
            // rather than wait again and need another kick.
            if lock.locked() == Q_SLOW_VAL {
                self.count(p, here, Counter::SpuriousWakeups, 1);
            }
        }
    }

    /// The new head passed the queue to `succ`: if `succ` waits, hash it
    /// and mark the lock, for the unlock to kick it once the lock is free.
    fn kick_node<L: LockWord, P: Platform>(
        &self,
        p: &P,
        here: Here,
        lock: &L,
        succ: &Node,
        id: u32,
    ) {
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
        if !p.mutant(Mutant::NoSlowMark) {
            lock.set_locked(Q_SLOW_VAL);
        }
        if self.hash(lock.addr(), id).is_none() {
            // Not reachable (see `hash`); the unlock would find no entry,
            // so end the successor's wait now: it spins behind us.
            lock.set_locked(Q_LOCKED_VAL);
            let token = succ.token.load(Ordering::Acquire);
            self.kick_waiter(p, here, id, token);
        }
    }

    // ------------------------------------------------------------- unlock

    /// The unlock slowpath: `locked` is the locked byte the fast path saw.
    pub(crate) fn unlock_slowpath<L: LockWord, P: Platform>(&self, p: &P, lock: &L, locked: u8) {
        let here = Here::of(p);
        if locked != Q_SLOW_VAL {
            // Not ours to understand; release so that nobody hangs.
            self.count(p, here, Counter::BadUnlocks, 1);
            lock.release_locked(0);
            return;
        }
        // Pairs with the waiter hashing before it marks the lock.
        fence(Ordering::Acquire);
        let Some(id) = self.unhash(lock.addr()) else {
            self.count(p, here, Counter::BadUnlocks, 1);
            lock.release_locked(0);
            return;
        };
        // Release only now: once released, the lock's memory may be freed
        // and reused. A full exchange: the waiter re-checks the mark after
        // storing its token and announcing its wait; we read the token
        // after this.
        lock.xchg_locked(0);
        self.count(p, here, Counter::ReleasedSlow, 1);
        let token = self.node(id).token.load(Ordering::Acquire);
        p.note("unlock: kick node, token", || {
            (u64::from(id) << 32) | (token & 0xffff_ffff)
        });
        self.kick_waiter(p, here, id, token);
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
