/* fctx.c - the CPU executor's fiber contexts (cpu.c): a stack pointer each,
 * switched by a few instructions. On x86-64 the switch is written here: it
 * saves the callee-saved registers, MXCSR and the x87 control word on the
 * stack it leaves, and restores them from the stack it enters. swapcontext,
 * which it replaces, also saves and restores the signal mask, one
 * sigprocmask system call a switch: that cost dominated kernels with barriers
 * and warp operations (a block of 256 threads at one barrier is 512 switches).
 * The fibers of a block all run on one OS thread, whose mask they keep, so
 * there is nothing to save. Elsewhere the contexts are ucontexts. */
#include <stdint.h>
#include <string.h>

#include "runtime/runtime.h"

#if defined(__x86_64__)

/* oxr_fctx_switch(from, to): rdi = from, rsi = to. The frame it leaves on
 * the stack: an 8-byte word holding MXCSR and the x87 control word, then
 * r15, r14, r13, r12, rbx, rbp, the return address. */
__asm__(".text\n"
        ".globl oxr_fctx_switch\n"
        ".hidden oxr_fctx_switch\n"
        ".type oxr_fctx_switch,@function\n"
        "oxr_fctx_switch:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  subq $8, %rsp\n"
        "  stmxcsr (%rsp)\n"
        "  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n"
        "  movq (%rsi), %rsp\n"
        "  ldmxcsr (%rsp)\n"
        "  fldcw 4(%rsp)\n"
        "  addq $8, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size oxr_fctx_switch, .-oxr_fctx_switch\n");

void oxr_fctx_make(oxr_fctx *c, void *bottom, size_t size, void (*fn)(void)) {
  /* the frame oxr_fctx_switch restores, at the top of the stack (16-byte
     aligned): `fn` is "returned" to with the stack as a call leaves it, a
     zero return address above, so that unwinders stop there */
  uint64_t *top = (uint64_t *)(((uintptr_t)bottom + size) & ~(uintptr_t)15);
  uint64_t *sp = top - 9;
  uint32_t mxcsr;
  uint16_t fpucw;
  __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
  __asm__ volatile("fnstcw %0" : "=m"(fpucw));
  memset(sp, 0, 9 * sizeof *sp);
  sp[0] = (uint64_t)mxcsr | (uint64_t)fpucw << 32; /* the current thread's rounding and flush modes */
  sp[7] = (uint64_t)(uintptr_t)fn;                 /* after r15..rbp (sp[1..6]) */
  sp[8] = 0;
  c->sp = sp;
}

#else

void oxr_fctx_make(oxr_fctx *c, void *bottom, size_t size, void (*fn)(void)) {
  int rc = getcontext(&c->uc);
  assert(rc == 0);
  OXB_UNUSED(rc);
  c->uc.uc_stack.ss_sp = bottom;
  c->uc.uc_stack.ss_size = size;
  c->uc.uc_link = NULL; /* fn never returns */
  /* else the fiber would run with the mask of whichever thread made it */
  pthread_sigmask(SIG_SETMASK, NULL, &c->uc.uc_sigmask);
  makecontext(&c->uc, fn, 0);
}

void oxr_fctx_switch(oxr_fctx *from, oxr_fctx *to) {
  int rc = swapcontext(&from->uc, &to->uc);
  assert(rc == 0);
  OXB_UNUSED(rc);
}

#endif
