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
