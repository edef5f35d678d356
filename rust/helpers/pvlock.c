// SPDX-License-Identifier: GPL-2.0
/*
 * pvlock: C wrappers for the macros and inline functions behind
 * kernel::pvlock (rust/kernel/pvlock/).  Switching the lock ops goes
 * through pv_lock_ops_*() (arch/x86/kernel/paravirt-spinlocks.c), which
 * are not exported: modules reach them only through kernel::pvlock::lockops.
 */

#include <linux/hardirq.h>
#include <linux/irqflags.h>
#include <linux/kvm_para.h>
#include <linux/sched/clock.h>
#include <linux/sched/cputime.h>
#include <linux/cpumask.h>
#include <linux/cpuhotplug.h>
#include <linux/percpu.h>
#include <linux/smp.h>
#include <linux/spinlock.h>
#include <linux/static_call.h>
#include <linux/workqueue.h>

#if defined(CONFIG_X86) && defined(CONFIG_PARAVIRT_SPINLOCKS)
#include <asm/paravirt.h>
#include <asm/qspinlock.h>
#include <asm/tsc.h>

__rust_helper void *rust_helper_pvlock_slowpath_query(void)
{
	return static_call_query(queued_spin_lock_slowpath);
}

__rust_helper void *rust_helper_pvlock_unlock_query(void)
{
	return static_call_query(queued_spin_unlock);
}

/* 0: native, 1: upstream PV, 2: something else (e.g. a pvlock module) */
__rust_helper int rust_helper_pvlock_ops_kind(void)
{
	void *slow = static_call_query(queued_spin_lock_slowpath);

	if (slow == native_queued_spin_lock_slowpath)
		return 0;
	if (slow == __pv_queued_spin_lock_slowpath)
		return 1;
	return 2;
}

__rust_helper bool rust_helper_pvlock_nopvspin(void)
{
	return nopvspin;
}

__rust_helper bool rust_helper_pvlock_vcpu_is_preempted(int cpu)
{
	return vcpu_is_preempted(cpu);
}

__rust_helper u64 rust_helper_pvlock_steal_clock(int cpu)
{
	return paravirt_steal_clock(cpu);
}
#endif /* CONFIG_X86 && CONFIG_PARAVIRT_SPINLOCKS */

#ifdef CONFIG_X86
__rust_helper u32 rust_helper_pvlock_cpu_apic_id(int cpu)
{
	return per_cpu(x86_cpu_to_apicid, cpu);
}

__rust_helper void rust_helper_pvlock_halt(void)
{
	halt();
}
#endif

#ifdef CONFIG_KVM_GUEST
__rust_helper bool rust_helper_pvlock_kvm_para_available(void)
{
	return kvm_para_available();
}

__rust_helper unsigned int rust_helper_pvlock_kvm_features(void)
{
	return kvm_arch_para_features();
}

__rust_helper unsigned int rust_helper_pvlock_kvm_hints(void)
{
	return kvm_arch_para_hints();
}

__rust_helper long rust_helper_pvlock_kvm_hypercall3(unsigned int nr,
						     unsigned long p1,
						     unsigned long p2,
						     unsigned long p3)
{
	return kvm_hypercall3(nr, p1, p2, p3);
}

/*
 * The critical-section hint (KVM_HC_PVLOCK_HINT): each CPU registers the
 * addresses of its preemption count and of its lock-waiting count with the
 * host, from the CPU hotplug callbacks, so that CPUs that come online later
 * register too, and unregisters when it goes offline or the hint stops.
 * The waiting count is raised and lowered by the lock's slowpath, on its
 * own CPU only.
 */
static DEFINE_PER_CPU_ALIGNED(u32, pvlock_waiting);
static int pvlock_hint_state;
static unsigned long pvlock_hint_flags;
/* For tests: a count that always says "critical section", and whether the
 * CPUs register it instead of their own (a hostile guest). */
static u32 pvlock_hint_always = 1;
static bool pvlock_hint_lie;
static atomic_t pvlock_hint_refused;

static int pvlock_hint_online(unsigned int cpu)
{
	u64 count = slow_virt_to_phys(pvlock_hint_lie ? (void *)&pvlock_hint_always :
				      (void *)per_cpu_ptr(&__preempt_count, cpu));
	u64 wait = slow_virt_to_phys(per_cpu_ptr(&pvlock_waiting, cpu));

	if (kvm_hypercall3(KVM_HC_PVLOCK_HINT, pvlock_hint_flags, count, wait))
		atomic_inc(&pvlock_hint_refused);
	return 0;
}

static int pvlock_hint_offline(unsigned int cpu)
{
	kvm_hypercall3(KVM_HC_PVLOCK_HINT, 0, 0, 0);
	return 0;
}

/*
 * Registers the hint, with KVM_PVLOCK_HINT_* @flags, on every online CPU
 * and every CPU that comes online; with @lie (tests), a count that always
 * says "critical section" instead of the CPU's preemption count.
 */
__rust_helper int rust_helper_pvlock_hint_start(unsigned long flags, bool lie)
{
	int r;

	pvlock_hint_flags = flags;
	pvlock_hint_lie = lie;
	atomic_set(&pvlock_hint_refused, 0);
	r = cpuhp_setup_state(CPUHP_AP_ONLINE_DYN, "pvlock/hint:online",
			      pvlock_hint_online, pvlock_hint_offline);
	if (r < 0)
		return r;
	pvlock_hint_state = r;
	return 0;
}

/* Unregisters the hint on every online CPU. */
__rust_helper void rust_helper_pvlock_hint_stop(void)
{
	cpuhp_remove_state(pvlock_hint_state);
}

/* How many registrations the host refused since the start. */
__rust_helper int rust_helper_pvlock_hint_refused(void)
{
	return atomic_read(&pvlock_hint_refused);
}

/* This CPU's slowpath begins or ends waiting for a lock. */
__rust_helper void rust_helper_pvlock_hint_waiting(bool begins)
{
	if (begins)
		this_cpu_inc(pvlock_waiting);
	else
		this_cpu_dec(pvlock_waiting);
}

/*
 * KVM_HC_PVLOCK_WAIT.  With @sti, interrupts (disabled by the caller) are
 * enabled by the instruction right before the hypercall, as safe_halt()
 * does before HLT: an interrupt that is pending then ends the wait instead
 * of being taken before it.  Like safe_halt(), it tells lockdep and the
 * irqflags tracer first that interrupts are on from here.
 */
__rust_helper long rust_helper_pvlock_kvm_wait(unsigned long flags,
					       unsigned long token, bool sti)
{
	long ret;

	if (!sti)
		return kvm_hypercall2(KVM_HC_PVLOCK_WAIT, flags, token);
	trace_hardirqs_on();
	asm volatile("sti\n\t" KVM_HYPERCALL
		     : "=a"(ret)
		     : "a"(KVM_HC_PVLOCK_WAIT), "b"(flags), "c"(token)
		     : "memory");
	return ret;
}
#endif

/* kernel::pvlock::periodic */
__rust_helper void rust_helper_pvlock_init_delayed_work(struct delayed_work *dwork,
							 work_func_t fn)
{
	INIT_DELAYED_WORK(dwork, fn);
}

__rust_helper bool rust_helper_pvlock_queue_delayed_work(struct delayed_work *dwork,
							  unsigned int delay_ms)
{
	return queue_delayed_work(system_dfl_long_wq, dwork,
				  msecs_to_jiffies(delay_ms));
}

__rust_helper void rust_helper_pvlock_safe_halt(void)
{
	safe_halt();
}

__rust_helper bool rust_helper_pvlock_cpu_online(unsigned int cpu)
{
	return cpu_online(cpu);
}

__rust_helper bool rust_helper_pvlock_in_nmi(void)
{
	return in_nmi();
}

__rust_helper bool rust_helper_pvlock_irqs_disabled(void)
{
	return irqs_disabled();
}

__rust_helper unsigned long rust_helper_pvlock_local_irq_save(void)
{
	unsigned long flags;

	local_irq_save(flags);
	return flags;
}

__rust_helper void rust_helper_pvlock_local_irq_restore(unsigned long flags)
{
	local_irq_restore(flags);
}

__rust_helper u64 rust_helper_pvlock_local_clock(void)
{
	return local_clock();
}

__rust_helper unsigned int rust_helper_pvlock_tsc_khz(void)
{
	return tsc_khz;
}
