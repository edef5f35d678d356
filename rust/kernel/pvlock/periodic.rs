// SPDX-License-Identifier: GPL-2.0

//! Work run periodically in process context, until its owner goes.
//!
//! The kernel crate's `workqueue` queues delayed work but cannot cancel it
//! (7.3): a module whose work re-arms itself could not stop it before its
//! code goes. [`Periodic`] owns a `struct delayed_work` that runs
//! [`PeriodicWork::run`] on `system_dfl_long_wq` (the switch of the lock
//! ops sleeps for grace periods) and re-arms it for the delay `run`
//! returns; dropping it disables the work and waits for a run in progress
//! (`disable_delayed_work_sync()`), after which nothing queues it again.
//!
//! C header: [`include/linux/workqueue.h`](srctree/include/linux/workqueue.h)

use crate::{bindings, prelude::*, types::Opaque};
use core::marker::PhantomPinned;

/// What a [`Periodic`] runs.
pub trait PeriodicWork: Sync + 'static {
    /// One run, in process context (it may sleep); returns the delay in
    /// milliseconds before the next run, or `None` to stop.
    fn run(&self) -> Option<u32>;
}

/// `T`'s [`PeriodicWork::run`], again and again until dropped.
///
/// # Invariants
///
/// `dwork` is initialised with [`Periodic::<T>::work_fn`] before the value
/// is reachable, and stays at its address (the type is pinned).
#[pin_data(PinnedDrop)]
pub struct Periodic<T: PeriodicWork> {
    #[pin]
    dwork: Opaque<bindings::delayed_work>,
    #[pin]
    data: T,
    #[pin]
    _pin: PhantomPinned,
}

// SAFETY: The delayed work is the workqueue's to run on any CPU, and `T` is
// `Sync`: only shared references to it are handed out, from any thread.
unsafe impl<T: PeriodicWork + Send> Send for Periodic<T> {}
// SAFETY: As above; the `delayed_work` is only touched through the
// workqueue API, which serialises itself.
unsafe impl<T: PeriodicWork> Sync for Periodic<T> {}

impl<T: PeriodicWork> Periodic<T> {
    /// A stopped periodic work around `data`; [`Periodic::start`] starts it.
    pub fn new<E: From<core::convert::Infallible>>(
        data: impl PinInit<T, E>,
    ) -> impl PinInit<Self, E> {
        try_pin_init!(Self {
            // INVARIANT: initialised with `work_fn` here.
            dwork <- Opaque::ffi_init(|slot: *mut bindings::delayed_work| {
                // SAFETY: `slot` is valid for writes and pinned; the helper
                // only initialises it.
                unsafe { bindings::pvlock_init_delayed_work(slot, Some(Self::work_fn)) }
            }),
            data <- data,
            _pin: PhantomPinned,
        }? E)
    }

    /// The data the work runs with.
    pub fn data(&self) -> &T {
        &self.data
    }

    /// Stops the work: waits for a run in progress, and nothing runs or
    /// queues it again. May sleep.
    pub fn stop(&self) {
        // SAFETY: `dwork` is initialised (type invariant); disabling may be
        // repeated.
        unsafe { bindings::disable_delayed_work_sync(self.dwork.get()) };
    }

    /// Runs the work after `delay_ms` milliseconds, unless it is queued
    /// already.
    pub fn start(self: Pin<&Self>, delay_ms: u32) {
        // SAFETY: `dwork` is initialised and pinned (type invariant); a
        // queued work is cancelled and waited for before `self` is dropped.
        unsafe { bindings::pvlock_queue_delayed_work(self.dwork.get(), delay_ms) };
    }

    /// # Safety
    ///
    /// Called by the workqueue for the `work` of a `dwork` of a live
    /// `Periodic<T>`.
    unsafe extern "C" fn work_fn(work: *mut bindings::work_struct) {
        // SAFETY: `work` is the `work` field of a `delayed_work`, which is
        // the `dwork` field of a `Periodic<T>` (the only work initialised
        // with this function); `Opaque` is transparent.
        let this = unsafe {
            let dwork = crate::container_of!(work, bindings::delayed_work, work);
            &*crate::container_of!(dwork.cast::<Opaque<bindings::delayed_work>>(), Self, dwork)
        };
        if let Some(ms) = this.data.run() {
            // SAFETY: As in `start()`; queueing from the work itself is
            // allowed, and fails once drop has disabled the work.
            unsafe { bindings::pvlock_queue_delayed_work(this.dwork.get(), ms) };
        }
    }
}

#[pinned_drop]
impl<T: PeriodicWork> PinnedDrop for Periodic<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: `dwork` is initialised; after this returns the work is
        // neither queued nor running and cannot be queued again, so no
        // callback can reach `self` once it is freed.
        unsafe { bindings::disable_delayed_work_sync(self.dwork.get()) };
    }
}
