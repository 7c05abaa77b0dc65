// The block emulator's stack switch (block_emulator.hpp) on x86-64: the System V callee-saved registers go
// onto the old stack under the return address, the stack pointer is swapped, and the new stack's are
// popped. Nothing else (signal mask, floating-point state) is saved: the fibers share them.
#include "tests/cuda/block_emulator.hpp"

#ifdef CBATCH_EMULATOR_STACK_SWITCH
asm(R"(
  .text
  .globl cbatch_emulator_switch_stack
  .type cbatch_emulator_switch_stack, @function
cbatch_emulator_switch_stack:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size cbatch_emulator_switch_stack, .-cbatch_emulator_switch_stack
  .section .note.GNU-stack,"",@progbits
  .text
)");
#endif
