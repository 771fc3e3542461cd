/* cuda_emu.h: run polyopt's emitted CUDA source on the CPU, with a shared-memory race checker.
 *
 * Force-included (g++ -x c++ -std=c++17 -DPOLYOPT_EMULATED -include cuda_emu.h) in front of
 * the exact source the CUDA printer emits; polyopt/runtime/emulator.py builds and calls it.
 *
 * Execution: the blocks of a grid run one after another; the threads of a block run as
 * cooperative fibers on the calling OS thread and switch only at __syncthreads(),
 * __syncwarp(), warp shuffles/votes and return. The order is fixed, so a run is
 * deterministic and needs no locks; a missing barrier is found every time, not by chance.
 *
 * Checker: every shared array declared with POLYOPT_SHARED is a checked array. Per element it
 * keeps the last write (thread, barrier epoch, warp-sync count) and up to two readers of the
 * current epoch, and stops the launch at the first
 *   - race: two accesses by different threads, one a write, with no barrier between them
 *     (__syncthreads() orders every thread, __syncwarp() the threads of one warp);
 *   - uninitialized shared read: a read of an element no thread of this block has written
 *     (judged at the next barrier, so a read racing with a later write is reported as a race);
 *   - barrier divergence: a __syncthreads() that some thread of the block never reaches;
 *   - shared index out of bounds.
 * The report (po_emu_report) names the kernel, block, array, index, threads and accesses.
 *
 * Not checked: global memory, warp-synchronous code that relies on lockstep execution without
 * __syncwarp(), and accesses through pointers taken with &A_sh[i] (they bypass the checker).
 *
 * Knobs (-D): POLYOPT_EMU_STACK_KIB (fiber stack, default 256), POLYOPT_EMU_SWAPCONTEXT (switch
 * fibers with swapcontext instead of the faster _setjmp/_longjmp; slower but no tricks).
 */
#ifndef POLYOPT_CUDA_EMU_H
#define POLYOPT_CUDA_EMU_H

/* Fortified longjmp refuses to jump to another stack, which is what a fiber switch is. */
#undef _FORTIFY_SOURCE

#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <type_traits>

/* ---------------------------------------------------------------- CUDA keywords */
#define __global__
#define __device__
#define __host__
#define __constant__
/* Not `inline`: `__device__ inline __forceinline__` would be a duplicate specifier in C++. */
#define __forceinline__
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
/* A function-static is one object for all the fibers of a block: CUDA's sharing (unchecked). */
#define __shared__ static
/* __restrict__ is a GNU C++ keyword already. */

#ifndef POLYOPT_EMU_STACK_KIB
#define POLYOPT_EMU_STACK_KIB 256
#endif

/* Only the launch entries and po_emu_report are exported: each emulated library keeps its own
 * runtime state even when several are loaded in one process. */
#pragma GCC visibility push(hidden)

/* ---------------------------------------------------------------- vector types */
struct uint3 { unsigned x, y, z; };
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};
struct __attribute__((aligned(8))) float2 { float x, y; };
struct float3 { float x, y, z; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(8))) int2 { int x, y; };
struct __attribute__((aligned(16))) int4 { int x, y, z, w; };
struct __attribute__((aligned(16))) double2 { double x, y; };
inline float2 make_float2(float x, float y) { return float2{x, y}; }
inline float3 make_float3(float x, float y, float z) { return float3{x, y, z}; }
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
inline int2 make_int2(int x, int y) { return int2{x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
inline double2 make_double2(double x, double y) { return double2{x, y}; }
inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }

/* ---------------------------------------------------------------- built-in variables */
/* Globals, not thread_local: the fibers share one OS thread, and the scheduler stores the
 * running fiber's threadIdx before every switch. External linkage (hidden) keeps the compiler
 * from caching them across the switch's calls into libc. */
inline uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
constexpr int warpSize = 32;

namespace po_emu {

constexpr int kMaxThreads = 1024;
constexpr int kWarp = 32;
constexpr int kMaxWarps = kMaxThreads / kWarp;
constexpr size_t kStackBytes = (size_t)POLYOPT_EMU_STACK_KIB * 1024;

enum class Run : unsigned char { ready, at_barrier, at_warp, done };
enum class Op : unsigned char { sync, idx, up, down, bxor, ballot };

struct Fiber {
  jmp_buf jb;
  ucontext_t ctx;
  uint3 tid;
  Run state;
  bool started;
  Op op;          // the warp-level operation this fiber waits at
  unsigned mask;  // its member mask (own lane included)
  int arg, width;
  uint64_t value, result;
};

/* Per-element access history; all-ones bytes mean "nothing recorded in this block". */
struct Cell {
  int wr_tid;
  unsigned wr_epoch, wr_wsync;
  unsigned rd_epoch;
  int rd_tid[2];
  unsigned rd_wsync[2];
};

struct Array {
  const char *name;
  long long size;
  void *data;
  size_t elem;
  Cell *cells;
  unsigned long long gen;  // block generation of the last reset
};

struct Runtime {
  Fiber *fibers;
  char *stacks;
  size_t stacks_len;
  int capacity;
  jmp_buf host_jb;
  ucontext_t host_ctx;
  const char *kernel;
  void (*body)(void *);
  void *arg;
  int n, cur, at_barrier, done;
  unsigned epoch;                 // block-wide barriers passed in this block
  unsigned wsync[kMaxWarps];      // warp-level syncs passed, per warp
  unsigned warp_done[kMaxWarps];  // lanes that have returned, per warp
  int queue[kMaxThreads];         // runnable fibers, FIFO
  int qhead, qlen;
  int bar_count;                  // __syncthreads_count accumulator
  int bar_result;
  unsigned long long block_gen;
  bool failed;
  const Array *uninit_array;      // first read of a never-written element, if any
  long long uninit_index;
  int uninit_tid;
};

inline Runtime rt;
inline thread_local char report_buf[1024];
inline pthread_mutex_t launch_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---------------------------------------------------------------- reports */
inline uint3 coords(int t) { return rt.fibers[t].tid; }

inline void vrecord(bool in_block, const char *fmt, va_list ap) {
  int off = in_block ? snprintf(report_buf, sizeof report_buf, "kernel '%s', block (%u,%u,%u): ",
                                rt.kernel, blockIdx.x, blockIdx.y, blockIdx.z)
                     : snprintf(report_buf, sizeof report_buf, "kernel '%s': ", rt.kernel);
  if (off < 0 || (size_t)off >= sizeof report_buf) off = 0;
  vsnprintf(report_buf + off, sizeof report_buf - off, fmt, ap);
  rt.failed = true;
}

/* A problem found while running a block; returns 1, the launch's result. */
inline int record(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
inline int record(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vrecord(true, fmt, ap);
  va_end(ap);
  return 1;
}

/* A launch rejected before any block ran. */
inline int reject(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
inline int reject(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vrecord(false, fmt, ap);
  va_end(ap);
  return 1;
}

[[noreturn]] inline void to_host();

#define PO_EMU_T(t) po_emu::coords(t).x, po_emu::coords(t).y, po_emu::coords(t).z
#define PO_EMU_FAIL(...) (po_emu::record(__VA_ARGS__), po_emu::to_host())

inline const char *op_name(Op op) {
  switch (op) {
    case Op::sync: return "__syncwarp()";
    case Op::idx: return "__shfl_sync()";
    case Op::up: return "__shfl_up_sync()";
    case Op::down: return "__shfl_down_sync()";
    case Op::bxor: return "__shfl_xor_sync()";
    case Op::ballot: return "a warp vote (__ballot/__any/__all_sync)";
  }
  return "?";
}

/* ---------------------------------------------------------------- fiber switching */
#ifdef POLYOPT_EMU_SWAPCONTEXT
__attribute__((noinline)) inline void switch_fiber(Fiber *from, Fiber *to) {
  swapcontext(&from->ctx, &to->ctx);
}
__attribute__((noinline)) inline void enter_block(Fiber *first) {
  swapcontext(&rt.host_ctx, &first->ctx);
}
[[noreturn]] inline void to_host() {
  setcontext(&rt.host_ctx);
  abort();
}
#else
/* swapcontext makes a signal-mask syscall per switch (~300 ns); after a fiber's first entry
 * through its ucontext, _setjmp/_longjmp switch it in ~25 ns. */
__attribute__((noinline)) inline void switch_fiber(Fiber *from, Fiber *to) {
  if (_setjmp(from->jb) == 0) {
    if (to->started) _longjmp(to->jb, 1);
    to->started = true;
    setcontext(&to->ctx);
  }
}
__attribute__((noinline)) inline void enter_block(Fiber *first) {
  if (_setjmp(rt.host_jb) == 0) {
    first->started = true;
    setcontext(&first->ctx);
  }
}
[[noreturn]] inline void to_host() { _longjmp(rt.host_jb, 1); }
#endif

inline void push(int t) { rt.queue[(rt.qhead + rt.qlen++) % kMaxThreads] = t; }

/* Run the next runnable fiber; returns when this one is resumed. With none runnable the block
 * is over (or deadlocked) and the host takes over. */
inline void yield() {
  if (rt.qlen == 0) to_host();
  int next = rt.queue[rt.qhead];
  rt.qhead = (rt.qhead + 1) % kMaxThreads;
  rt.qlen--;
  if (next == rt.cur) return;
  Fiber *me = &rt.fibers[rt.cur];
  rt.cur = next;
  threadIdx = rt.fibers[next].tid;
  switch_fiber(me, &rt.fibers[next]);
}

inline int first_in(Run state) {
  for (int t = 0; t < rt.n; ++t)
    if (rt.fibers[t].state == state) return t;
  return -1;
}

/* ---------------------------------------------------------------- shared-memory checker */
inline void reset(Array &a) {
  memset(a.data, 0, (size_t)a.size * a.elem);  // zeros, so a bad read cannot become a wild index
  memset(a.cells, 0xff, (size_t)a.size * sizeof(Cell));
  a.gen = rt.block_gen;
}

inline Cell &cell(Array &a, long long i, const char *access) {
  if ((unsigned long long)i >= (unsigned long long)a.size)
    PO_EMU_FAIL("shared index out of bounds: thread (%u,%u,%u) %s '%s' at index %lld, but '%s' "
                "has %lld elements", PO_EMU_T(rt.cur), access, a.name, i, a.name, a.size);
  if (a.gen != rt.block_gen) reset(a);
  return a.cells[i];
}

/* Whether an access by thread u (warp-sync count cu) in the current epoch is ordered before
 * the running thread's: only a __syncwarp() of their common warp can order them. */
inline bool ordered(int u, unsigned cu) {
  int w = rt.cur / kWarp;
  return u / kWarp == w && cu < rt.wsync[w];
}

[[noreturn]] inline void race(const Array &a, long long i, const char *first, int u,
                              const char *second) {
  PO_EMU_FAIL("race on shared array '%s' at index %lld: %s by thread (%u,%u,%u), then %s by "
              "thread (%u,%u,%u), with no __syncthreads() between them", a.name, i, first,
              PO_EMU_T(u), second, PO_EMU_T(rt.cur));
}

/* Two readers per element suffice: once they are in different warps every later write of the
 * epoch races with one of them; within one warp the highest warp-sync counts matter. */
inline void note_reader(Cell &c, int t) {
  unsigned cw = rt.wsync[t / kWarp];
  if (c.rd_epoch != rt.epoch) {
    c.rd_epoch = rt.epoch;
    c.rd_tid[0] = t, c.rd_wsync[0] = cw, c.rd_tid[1] = -1;
  } else if (c.rd_tid[0] == t) {
    c.rd_wsync[0] = cw;
  } else if (c.rd_tid[1] == t) {
    c.rd_wsync[1] = cw;
  } else if (c.rd_tid[1] < 0) {
    c.rd_tid[1] = t, c.rd_wsync[1] = cw;
  } else if (c.rd_tid[0] / kWarp == c.rd_tid[1] / kWarp) {
    int k = c.rd_wsync[0] <= c.rd_wsync[1] ? 0 : 1;
    c.rd_tid[k] = t, c.rd_wsync[k] = cw;
  }
}

inline void on_read(Array &a, long long i) {
  Cell &c = cell(a, i, "reads");
  int t = rt.cur;
  if (c.wr_tid < 0) {
    if (!rt.uninit_array) rt.uninit_array = &a, rt.uninit_index = i, rt.uninit_tid = t;
  } else if (c.wr_tid != t && c.wr_epoch == rt.epoch && !ordered(c.wr_tid, c.wr_wsync)) {
    race(a, i, "write", c.wr_tid, "read");
  }
  note_reader(c, t);
}

inline void on_write(Array &a, long long i) {
  Cell &c = cell(a, i, "writes");
  int t = rt.cur;
  if (c.wr_tid >= 0 && c.wr_tid != t && c.wr_epoch == rt.epoch && !ordered(c.wr_tid, c.wr_wsync))
    race(a, i, "write", c.wr_tid, "write");
  if (c.rd_epoch == rt.epoch)
    for (int k = 0; k < 2; ++k) {
      int u = c.rd_tid[k];
      if (u >= 0 && u != t && !ordered(u, c.rd_wsync[k])) race(a, i, "read", u, "write");
    }
  c.wr_tid = t, c.wr_epoch = rt.epoch, c.wr_wsync = rt.wsync[t / kWarp];
}

/* Judged at the next barrier (or the block's end): until then a write by another thread makes
 * the read a race, which is the better diagnosis. */
inline int report_uninit() {
  return record("uninitialized shared read: thread (%u,%u,%u) read '%s' at index %lld, which no "
                "thread of this block had written", PO_EMU_T(rt.uninit_tid),
                rt.uninit_array->name, rt.uninit_index);
}

template <class T> struct Shared;

/* What A_sh[i] returns: a read where a T is needed, a write when assigned to. */
template <class T> struct Ref {
  Shared<T> *a;
  long long i;
  operator T() const {
    on_read(a->meta, i);
    return a->data[i];
  }
  Ref &operator=(T v) {
    on_write(a->meta, i);
    a->data[i] = v;
    return *this;
  }
  Ref &operator=(const Ref &o) { return *this = T(o); }
  Ref &operator+=(T v) { return *this = T(T(*this) + v); }
  Ref &operator-=(T v) { return *this = T(T(*this) - v); }
  Ref &operator*=(T v) { return *this = T(T(*this) * v); }
  Ref &operator/=(T v) { return *this = T(T(*this) / v); }
  Ref &operator++() { return *this += T(1); }
  Ref &operator--() { return *this -= T(1); }
  T operator++(int) {
    T old = *this;
    *this = T(old + T(1));
    return old;
  }
  T operator--(int) {
    T old = *this;
    *this = T(old - T(1));
    return old;
  }
  /* A raw pointer (for atomics): accesses through it are not checked. */
  T *operator&() const {
    if (i < 0 || i > a->meta.size)
      PO_EMU_FAIL("shared index out of bounds: thread (%u,%u,%u) takes the address of '%s' at "
                  "index %lld, but '%s' has %lld elements", PO_EMU_T(rt.cur), a->meta.name, i,
                  a->meta.name, a->meta.size);
    return a->data + i;
  }
};

template <class T, long long N> struct Store {
  T data[N];
  Cell cells[N];
};

/* The block's view of one shared array; constant-initialized (no guard), storage in .bss. */
template <class T> struct Shared {
  Array meta;
  T *data;
  template <long long N>
  constexpr Shared(const char *name, Store<T, N> &s)
      : meta{name, N, s.data, sizeof(T), s.cells, 0}, data(s.data) {}
  Ref<T> operator[](long long i) { return Ref<T>{this, i}; }
};

/* ---------------------------------------------------------------- block barrier */
[[noreturn]] inline void diverge(int waiting, int returned) {
  PO_EMU_FAIL("barrier divergence: thread (%u,%u,%u) waits at __syncthreads() but thread "
              "(%u,%u,%u) has returned", PO_EMU_T(waiting), PO_EMU_T(returned));
}

inline void barrier(int pred) {
  if (rt.done > 0) diverge(rt.cur, first_in(Run::done));
  rt.fibers[rt.cur].state = Run::at_barrier;
  rt.bar_count += pred != 0;
  if (++rt.at_barrier == rt.n) {
    if (rt.uninit_array) report_uninit(), to_host();
    rt.at_barrier = 0;
    rt.epoch++;
    rt.bar_result = rt.bar_count;
    rt.bar_count = 0;
    for (int t = 0; t < rt.n; ++t) rt.fibers[t].state = Run::ready, push(t);
  }
  yield();
}

/* ---------------------------------------------------------------- warp-level operations */
inline unsigned live_lanes(int w) {
  int lanes = rt.n - w * kWarp;
  unsigned exist = lanes >= kWarp ? 0xffffffffu : (1u << lanes) - 1u;
  return exist & ~rt.warp_done[w];
}

inline int source_lane(const Fiber &f, int lane) {
  int width = f.width, base = lane & ~(width - 1), off = lane - base;
  switch (f.op) {
    case Op::idx: return base + (int)((unsigned)f.arg % (unsigned)width);
    case Op::up: return off >= f.arg ? lane - f.arg : lane;
    case Op::down: return off + f.arg < width ? lane + f.arg : lane;
    case Op::bxor: {
      int src = lane ^ f.arg;
      return src >= base && src < base + width ? src : lane;
    }
    default: return lane;
  }
}

/* All live lanes named by `mask` have arrived: exchange the values and wake them up. */
inline void complete(int w, unsigned need) {
  Fiber *lane0 = &rt.fibers[w * kWarp];
  int first = __builtin_ctz(need);
  Op op = lane0[first].op;
  uint64_t votes = 0;
  for (int l = 0; l < kWarp; ++l)
    if (need >> l & 1) {
      if (lane0[l].op != op)
        PO_EMU_FAIL("warp divergence: thread (%u,%u,%u) waits at %s but thread (%u,%u,%u) of its "
                    "warp at %s", PO_EMU_T(w * kWarp + first), op_name(op),
                    PO_EMU_T(w * kWarp + l), op_name(lane0[l].op));
      votes |= (uint64_t)(lane0[l].value != 0) << l;
    }
  for (int l = 0; l < kWarp; ++l)
    if (need >> l & 1) {
      int src = source_lane(lane0[l], l);
      lane0[l].result = op == Op::ballot ? votes
                        : need >> src & 1 ? lane0[src].value : lane0[l].value;
      lane0[l].state = Run::ready;
      push(w * kWarp + l);
    }
  if (op == Op::sync) rt.wsync[w]++;
}

inline void try_complete(int w, unsigned mask) {
  unsigned need = mask & live_lanes(w), have = 0;
  for (int l = 0; l < kWarp; ++l) {
    const Fiber &f = rt.fibers[w * kWarp + l];
    if ((need >> l & 1) && f.state == Run::at_warp && f.mask == mask) have |= 1u << l;
  }
  if (need != 0 && have == need) complete(w, need);
}

inline uint64_t warp_op(Op op, unsigned mask, uint64_t value, int arg, int width) {
  Fiber &f = rt.fibers[rt.cur];
  if (width <= 0 || width > kWarp || (width & (width - 1)) != 0) width = kWarp;
  f.state = Run::at_warp;
  f.op = op, f.mask = mask | 1u << (rt.cur % kWarp), f.value = value, f.arg = arg;
  f.width = width;
  try_complete(rt.cur / kWarp, f.mask);
  yield();
  return f.result;
}

template <class T> inline uint64_t bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                "warp shuffles move values of at most 8 bytes");
  uint64_t b = 0;
  memcpy(&b, &v, sizeof v);
  return b;
}
template <class T> inline T from_bits(uint64_t b) {
  T v;
  memcpy(&v, &b, sizeof v);
  return v;
}

/* A plain value, or what a shared-array reference reads. */
template <class T> inline T value(T v) { return v; }
template <class T> inline T value(const Ref<T> &r) { return T(r); }

template <class T> inline T shfl(Op op, unsigned mask, T v, int arg, int width) {
  return from_bits<T>(warp_op(op, mask, bits(v), arg, width));
}

/* ---------------------------------------------------------------- thread exit and launch */
inline void thread_exit() {
  int t = rt.cur, w = t / kWarp;
  rt.fibers[t].state = Run::done;
  rt.done++;
  rt.warp_done[w] |= 1u << (t % kWarp);
  if (rt.at_barrier > 0) diverge(first_in(Run::at_barrier), t);
  for (int l = 0; l < kWarp && w * kWarp + l < rt.n; ++l) {  // lanes that waited for this one
    const Fiber &f = rt.fibers[w * kWarp + l];
    if (f.state == Run::at_warp) try_complete(w, f.mask);
  }
}

inline void fiber_main() {
  rt.body(rt.arg);
  thread_exit();
  yield();  // a returned fiber is never resumed
  to_host();
}

/* Apart from reserve(): getcontext returns twice, which would pin reserve's locals. */
__attribute__((noinline)) inline void init_context(ucontext_t &ctx, char *stack) {
  getcontext(&ctx);
  ctx.uc_stack.ss_sp = stack;
  ctx.uc_stack.ss_size = kStackBytes;
  ctx.uc_link = &rt.host_ctx;
}

inline bool reserve(int n) {
  if (n <= rt.capacity) return true;
  int cap = 64;
  while (cap < n) cap *= 2;
  if (rt.stacks) munmap(rt.stacks, rt.stacks_len);
  free(rt.fibers);
  rt.capacity = 0;
  size_t guard = (size_t)sysconf(_SC_PAGESIZE), slot = kStackBytes + guard;
  rt.fibers = (Fiber *)calloc((size_t)cap, sizeof(Fiber));
  void *mem = mmap(nullptr, slot * cap, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  rt.stacks = mem == MAP_FAILED ? nullptr : (char *)mem;
  rt.stacks_len = slot * cap;
  if (!rt.fibers || !rt.stacks) return false;
  for (int t = 0; t < cap; ++t) {
    char *base = rt.stacks + slot * t;
    mprotect(base, guard, PROT_NONE);  // overflowing a fiber stack faults instead of corrupting
    init_context(rt.fibers[t].ctx, base + guard);
  }
  rt.capacity = cap;
  return true;
}

/* No fiber can run but some have not returned: they wait for each other forever. */
inline int report_stuck() {
  int bar = first_in(Run::at_barrier), warp = first_in(Run::at_warp);
  if (warp < 0) return record("deadlock: no thread can proceed");  // unreachable: kept as a net
  const Fiber &f = rt.fibers[warp];
  if (bar >= 0)
    return record("barrier divergence: thread (%u,%u,%u) waits at __syncthreads() while "
                  "thread (%u,%u,%u) waits at %s", PO_EMU_T(bar), PO_EMU_T(warp), op_name(f.op));
  return record("warp divergence: thread (%u,%u,%u) waits at %s with mask 0x%08x, but lanes "
                "0x%08x of its warp never join it", PO_EMU_T(warp), op_name(f.op), f.mask,
                f.mask & live_lanes(warp / kWarp) & ~(1u << warp % kWarp));
}

inline int run_block(uint3 b) {
  blockIdx = b;
  rt.block_gen++;
  rt.epoch = 0, rt.at_barrier = 0, rt.done = 0, rt.bar_count = 0, rt.failed = false;
  rt.uninit_array = nullptr;
  memset(rt.wsync, 0, sizeof rt.wsync);
  memset(rt.warp_done, 0, sizeof rt.warp_done);
  rt.qhead = 0, rt.qlen = 0;
  for (int t = 1; t < rt.n; ++t) push(t);
  for (int t = 0; t < rt.n; ++t) {
    Fiber &f = rt.fibers[t];
    f.state = Run::ready, f.started = false;
    makecontext(&f.ctx, fiber_main, 0);
  }
  rt.cur = 0;
  threadIdx = rt.fibers[0].tid;
  enter_block(&rt.fibers[0]);
  if (rt.failed) return 1;
  if (rt.done < rt.n) return report_stuck();
  return rt.uninit_array ? report_uninit() : 0;
}

inline int run_grid(const unsigned *grid, const unsigned *block) {
  blockIdx = uint3{0, 0, 0};
  long long n = (long long)block[0] * block[1] * block[2];
  if (!block[0] || !block[1] || !block[2] || n > kMaxThreads || block[2] > 64)
    return reject("invalid block (%u,%u,%u): every dimension must be at least 1, z at most 64 "
                  "and the block at most %d threads", block[0], block[1], block[2], kMaxThreads);
  if (!grid[0] || !grid[1] || !grid[2])
    return reject("invalid grid (%u,%u,%u): every dimension must be at least 1", grid[0],
                  grid[1], grid[2]);
  if (!reserve((int)n)) return reject("cannot allocate %lld fiber stacks", n);
  gridDim = dim3(grid[0], grid[1], grid[2]);
  blockDim = dim3(block[0], block[1], block[2]);
  rt.n = (int)n;
  for (int t = 0; t < rt.n; ++t)
    rt.fibers[t].tid = uint3{t % block[0], t / block[0] % block[1], t / (block[0] * block[1])};
  for (unsigned z = 0; z < grid[2]; ++z)
    for (unsigned y = 0; y < grid[1]; ++y)
      for (unsigned x = 0; x < grid[0]; ++x)
        if (run_block(uint3{x, y, z})) return 1;
  return 0;
}

/* Several Python threads may launch at once (ctypes drops the GIL): one launch at a time. */
inline int launch_body(const char *kernel, const unsigned *grid, const unsigned *block,
                       void (*body)(void *), void *arg) {
  pthread_mutex_lock(&launch_lock);
  report_buf[0] = '\0';
  rt.kernel = kernel, rt.body = body, rt.arg = arg;
  int rc = run_grid(grid, block);
  pthread_mutex_unlock(&launch_lock);
  return rc;
}

template <class F> inline int launch(const char *kernel, const unsigned *grid,
                                     const unsigned *block, unsigned shared_bytes, F &body) {
  (void)shared_bytes;  // static shared arrays only; the printer declares no dynamic ones
  return launch_body(kernel, grid, block, [](void *f) { (*static_cast<F *>(f))(); }, &body);
}

template <class T> struct same { using type = T; };

}  // namespace po_emu

/* ---------------------------------------------------------------- synchronization */
inline void __syncthreads() { po_emu::barrier(0); }
inline int __syncthreads_count(int p) { return po_emu::barrier(p), po_emu::rt.bar_result; }
inline int __syncthreads_and(int p) {
  return po_emu::barrier(p), po_emu::rt.bar_result == po_emu::rt.n;
}
inline int __syncthreads_or(int p) { return po_emu::barrier(p), po_emu::rt.bar_result != 0; }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  po_emu::warp_op(po_emu::Op::sync, mask, 0, 0, warpSize);
}
inline void __threadfence() {}
inline void __threadfence_block() {}
inline unsigned __activemask() { return po_emu::live_lanes(po_emu::rt.cur / warpSize); }

template <class T> inline auto __shfl_sync(unsigned m, const T &v, int src, int width = warpSize) {
  return po_emu::shfl(po_emu::Op::idx, m, po_emu::value(v), src, width);
}
template <class T>
inline auto __shfl_up_sync(unsigned m, const T &v, unsigned delta, int width = warpSize) {
  return po_emu::shfl(po_emu::Op::up, m, po_emu::value(v), (int)delta, width);
}
template <class T>
inline auto __shfl_down_sync(unsigned m, const T &v, unsigned delta, int width = warpSize) {
  return po_emu::shfl(po_emu::Op::down, m, po_emu::value(v), (int)delta, width);
}
template <class T>
inline auto __shfl_xor_sync(unsigned m, const T &v, int lane_mask, int width = warpSize) {
  return po_emu::shfl(po_emu::Op::bxor, m, po_emu::value(v), lane_mask, width);
}
inline unsigned __ballot_sync(unsigned m, int p) {
  return (unsigned)po_emu::warp_op(po_emu::Op::ballot, m, p != 0, 0, warpSize);
}
inline int __any_sync(unsigned m, int p) { return __ballot_sync(m, p) != 0; }
inline int __all_sync(unsigned m, int p) {
  return __ballot_sync(m, p) == (m & po_emu::live_lanes(po_emu::rt.cur / warpSize));
}

/* ---------------------------------------------------------------- atomics and loads */
/* Fibers never preempt each other, so a plain read-modify-write is atomic. */
template <class T> inline T atomicAdd(T *p, typename po_emu::same<T>::type v) {
  T old = *p;
  *p = old + v;
  return old;
}
template <class T> inline T atomicSub(T *p, typename po_emu::same<T>::type v) {
  T old = *p;
  *p = old - v;
  return old;
}
template <class T> inline T atomicExch(T *p, typename po_emu::same<T>::type v) {
  T old = *p;
  *p = v;
  return old;
}
template <class T> inline T atomicMin(T *p, typename po_emu::same<T>::type v) {
  T old = *p;
  *p = v < old ? v : old;
  return old;
}
template <class T> inline T atomicMax(T *p, typename po_emu::same<T>::type v) {
  T old = *p;
  *p = v > old ? v : old;
  return old;
}
template <class T>
inline T atomicCAS(T *p, typename po_emu::same<T>::type cmp, typename po_emu::same<T>::type v) {
  T old = *p;
  if (old == cmp) *p = v;
  return old;
}
template <class T> inline T __ldg(const T *p) { return *p; }

/* ---------------------------------------------------------------- math */
/* CUDA's min/max: the usual arithmetic conversions; fmin/fmax for floating point. */
template <class A, class B> inline auto min(const A &a, const B &b) {
  auto x = po_emu::value(a);
  auto y = po_emu::value(b);
  using C = std::common_type_t<decltype(x), decltype(y)>;
  if constexpr (std::is_floating_point<C>::value) return (C)fmin((C)x, (C)y);
  else return (C)y < (C)x ? (C)y : (C)x;
}
template <class A, class B> inline auto max(const A &a, const B &b) {
  auto x = po_emu::value(a);
  auto y = po_emu::value(b);
  using C = std::common_type_t<decltype(x), decltype(y)>;
  if constexpr (std::is_floating_point<C>::value) return (C)fmax((C)x, (C)y);
  else return (C)x < (C)y ? (C)y : (C)x;
}
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return powf(10.0f, x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __fadd_rn(float x, float y) { return x + y; }
inline float __fsub_rn(float x, float y) { return x - y; }
inline float __fmul_rn(float x, float y) { return x * y; }
inline float __fdiv_rn(float x, float y) { return x / y; }
inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
inline double __dadd_rn(double x, double y) { return x + y; }
inline double __dmul_rn(double x, double y) { return x * y; }
inline double __fma_rn(double x, double y, double z) { return fma(x, y, z); }
inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }
inline int __float2int_rn(float x) { return (int)lrintf(x); }
inline int __float2int_rz(float x) { return (int)x; }
inline float __int2float_rn(int x) { return (float)x; }
inline int __float_as_int(float x) { return po_emu::from_bits<int>(po_emu::bits(x)); }
inline unsigned __float_as_uint(float x) { return po_emu::from_bits<unsigned>(po_emu::bits(x)); }
inline float __int_as_float(int x) { return po_emu::from_bits<float>(po_emu::bits(x)); }
inline float __uint_as_float(unsigned x) { return po_emu::from_bits<float>(po_emu::bits(x)); }
inline long long __double_as_longlong(double x) {
  return po_emu::from_bits<long long>(po_emu::bits(x));
}
inline double __longlong_as_double(long long x) {
  return po_emu::from_bits<double>(po_emu::bits(x));
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __mul24(int x, int y) { return x * y; }
inline int __umul24(unsigned x, unsigned y) { return (int)(x * y); }

/* ---------------------------------------------------------------- the emitted-source contract */
#define POLYOPT_SHARED(T, name, n)                       \
  static ::po_emu::Store<T, (n)> po_emu_store_##name;    \
  static ::po_emu::Shared<T> name(#name, po_emu_store_##name)

#pragma GCC visibility pop

#define POLYOPT_EMU_PARAMS(...) __VA_OPT__(, ) __VA_ARGS__

/* extern "C" int po_emu_launch_<name>(const unsigned *grid, const unsigned *block,
 *                                     unsigned shared_bytes, <params>): 0, or nonzero with a
 * report in po_emu_report(). */
#define POLYOPT_EMU_ENTRY(name, params, args)                                                \
  extern "C" __attribute__((visibility("default"))) int po_emu_launch_##name(               \
      const unsigned *po_emu_grid_, const unsigned *po_emu_block_,                           \
      unsigned po_emu_shared_bytes_ POLYOPT_EMU_PARAMS params) {                             \
    auto po_emu_body_ = [&]() { name args; };                                                \
    return ::po_emu::launch(#name, po_emu_grid_, po_emu_block_, po_emu_shared_bytes_,        \
                            po_emu_body_);                                                   \
  }

extern "C" __attribute__((visibility("default"))) const char *po_emu_report(void) {
  return po_emu::report_buf;
}

#endif /* POLYOPT_CUDA_EMU_H */
