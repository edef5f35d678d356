// SPDX-License-Identifier: GPL-2.0
/*
 * guest_pvlock's queued_spin_unlock: the static call is made with the
 * callee-saved convention (only %rax may change), which only an assembly
 * thunk can honour. Like upstream's __raw_callee_save___pv_queued_spin_unlock
 * it releases an uncontended lock inline (cmpxchg of the locked byte from 1
 * to 0) and otherwise calls the Rust unlock slowpath through a thunk that
 * saves the caller-saved registers.
 */
#include <linux/linkage.h>
#include <linux/spinlock.h>
#include <asm/asm.h>
#include <asm/frame.h>
#include <asm/paravirt.h>

/* Defined in Rust: kernel::pvlock_unlock_slowpath!(guest_pvlock_unlock_slowpath, ...) */
void guest_pvlock_unlock_slowpath(struct qspinlock *lock, u8 locked);
PV_CALLEE_SAVE_REGS_THUNK(guest_pvlock_unlock_slowpath);

/*
 *   rdi = lock, rsi = locked byte found (second argument), rdx = scratch 0
 */
#define GUEST_PVLOCK_UNLOCK_ASM						\
	FRAME_BEGIN							\
	"push  %rdx\n\t"						\
	"mov   $" __stringify(_Q_LOCKED_VAL) ",%eax\n\t"		\
	"xor   %edx,%edx\n\t"						\
	LOCK_PREFIX "cmpxchg %dl,(%rdi)\n\t"				\
	"jne   .Lguest_pvlock_unlock_slow\n\t"				\
	"pop   %rdx\n\t"						\
	FRAME_END							\
	ASM_RET								\
	".Lguest_pvlock_unlock_slow:\n\t"				\
	"push  %rsi\n\t"						\
	"movzbl %al,%esi\n\t"						\
	"call  __raw_callee_save_guest_pvlock_unlock_slowpath\n\t"	\
	"pop   %rsi\n\t"						\
	"pop   %rdx\n\t"						\
	FRAME_END

DEFINE_ASM_FUNC(guest_pvlock_unlock, GUEST_PVLOCK_UNLOCK_ASM, .text);
