// emu_kernel.cpp — the fibers behind emu_kernel.h: one block at a time, its threads as fibers
// switched by emu_switch (x86-64 System V: the callee-saved registers and the stack pointer).
#include "emu_kernel.h"
#include <cstdio>
#include <cstdlib>
thread_local uint3 threadIdx;
uint3 blockIdx_g;
dim3 blockDim, gridDim;
unsigned long long emu_warp_slot[32][32];

extern "C" void emu_switch(void **save_sp, void *new_sp);
asm(R"(
.text
.globl emu_switch
.type emu_switch,@function
emu_switch:
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
)");

enum { RUN, AT_BAR, AT_WARP, DONE };
struct fiber { void *sp; int state; char *stack; };
static fiber F[1024];
static void *sched_sp;
static int cur, nth;
static std::function<void()> *body;
enum { STACK = 256 * 1024 };

static void yield_to_sched(int st) {
    F[cur].state = st;
    emu_switch(&F[cur].sp, sched_sp);
}
static void trampoline() {
    (*body)();
    F[cur].state = DONE;
    emu_switch(&F[cur].sp, sched_sp);
    abort();
}
void emu_syncthreads() { yield_to_sched(AT_BAR); }
void emu_warp_sync() { yield_to_sched(AT_WARP); }

static void start(int i) {
    if (!F[i].stack) F[i].stack = (char *)aligned_alloc(64, STACK);
    uintptr_t top = ((uintptr_t)(F[i].stack + STACK)) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = 0;                    // alignment slot: at entry rsp+8 is 16-aligned
    *--sp = (void *)trampoline;   // ret address
    for (int r = 0; r < 6; r++) *--sp = 0; // rbp rbx r12-r15
    F[i].sp = sp;
    F[i].state = RUN;
}

void emu_launch(dim3 grid, dim3 block, std::function<void()> b) {
    if (block.y != 1 || block.z != 1 || block.x > 1024 || block.x % 32) { fprintf(stderr, "emu: block %u\n", block.x); abort(); }
    gridDim = grid; blockDim = block; body = &b; nth = (int)block.x;
    for (unsigned z = 0; z < grid.z; z++) for (unsigned y = 0; y < grid.y; y++) for (unsigned x = 0; x < grid.x; x++) {
        blockIdx_g = uint3{x, y, z};
        for (int i = 0; i < nth; i++) start(i);
        for (;;) {
            bool ran = false;
            for (int i = 0; i < nth; i++)
                if (F[i].state == RUN) {
                    cur = i; threadIdx = uint3{(unsigned)i, 0, 0};
                    emu_switch(&sched_sp, F[i].sp);
                    ran = true;
                }
            if (ran) continue;
            // warps whose live lanes all wait at a warp point go on
            bool released = false;
            for (int w = 0; w < nth / 32; w++) {
                int live = 0, waiting = 0;
                for (int l = 0; l < 32; l++) { int s = F[w * 32 + l].state; live += s != DONE; waiting += s == AT_WARP; }
                if (live && waiting == live) { for (int l = 0; l < 32; l++) if (F[w * 32 + l].state == AT_WARP) F[w * 32 + l].state = RUN; released = true; }
            }
            if (released) continue;
            int live = 0, at_bar = 0;
            for (int i = 0; i < nth; i++) { live += F[i].state != DONE; at_bar += F[i].state == AT_BAR; }
            if (!live) break;
            if (at_bar == live) { for (int i = 0; i < nth; i++) if (F[i].state == AT_BAR) F[i].state = RUN; continue; }
            fprintf(stderr, "emu: deadlock in block (%u,%u,%u): %d live, %d at __syncthreads, others at warp points\n", x, y, z, live, at_bar);
            abort();
        }
    }
}
