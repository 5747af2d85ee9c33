"""The CPU device (DEV=CPU): a real queue-API backend and the numerical reference for every other one.

Memory is anonymous host memory (va = host address). Each queue kind has a worker thread that runs
submitted command lists in order, so signal/wait have the same asynchronous semantics as a GPU's
command processor: a wait blocks that queue (not the host) until the signal is written.

As the smallest complete backend it shows what a vendor supplies: memory (`_alloc`/`_free`, `_signal_chunk`,
`_kernarg_chunk`), queues that record commands, programs, and the clock. Everything else (ordered submission,
host copies through buffers' host views, the kernel-argument arena, fault checks) comes from drivers/hcq.
It has no hardware ring: its queues hand command lists straight to the workers.
"""
from __future__ import annotations
import ctypes, mmap, os, queue, signal, tempfile, threading, time
from functools import cache

import cffi

from drivers.hcq import Device, Program, Queue
from drivers.hcq.program import KernArgs
from drivers.hcq.queue import Sealed
from drivers.cpu.compiler import ClangCompiler
from drivers.cpu.elf import SharedObjectError, check_shared_object

_LAUNCH_SRC = r"""
#include <stdint.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <time.h>
typedef void (*hcq_kernel)(const uint8_t *, const uint32_t *, const uint32_t *);
/* The threads of a launch take workgroups `chunk` at a time from the shared counter `next` until all n are taken, so
   a thread that runs less (its core busy with other work) takes fewer. */
struct job { hcq_kernel fn; const uint8_t *args; const uint32_t *grid, *lsize; uint64_t n, chunk, *next;
             int sig; uint64_t addr; uint32_t gid[3]; };
/* A kernel that touches memory it must not (SIGSEGV/SIGBUS) ends its workgroup loop instead of the process: the
   handler jumps back into run() on the faulting thread; faults outside kernels go to the previous handler. */
static __thread sigjmp_buf *in_kernel;
static __thread uint64_t fault_addr;
static struct sigaction prev_segv, prev_bus;
static void on_fault(int sig, siginfo_t *si, void *ctx) {
  /* si_code > 0: the kernel raised it for an access (si_addr is the address); <= 0 (SI_USER, SI_TKILL): another
     thread or process sent it, and si_addr overlays the sender's pid (sigaction(2)) */
  if (in_kernel) { fault_addr = si->si_code > 0 ? (uint64_t)si->si_addr : UINT64_MAX; siglongjmp(*in_kernel, sig); }
  sigaction(sig, sig == SIGSEGV ? &prev_segv : &prev_bus, 0);
  raise(sig);
}
static void install_one(int sig, struct sigaction *prev) {
  struct sigaction cur, sa = {0};
  sigaction(sig, 0, &cur);
  if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_fault) return;
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigaction(sig, &sa, prev);
}
/* at load, and again before each launch: a handler installed after ours (Python's faulthandler, a debugger's) would
   otherwise see a kernel's fault first and re-raise it as a sent signal, losing the address */
__attribute__((constructor)) static void install(void) { install_one(SIGSEGV, &prev_segv); install_one(SIGBUS, &prev_bus); }
static void *run(void *p) {
  struct job *j = p;
  sigjmp_buf env;
  if ((j->sig = sigsetjmp(env, 1))) { in_kernel = 0; j->addr = fault_addr; return 0; }
  in_kernel = &env;
  for (uint64_t first; (first = __atomic_fetch_add(j->next, j->chunk, __ATOMIC_RELAXED)) < j->n;)
    for (uint64_t g = first; g < first + j->chunk && g < j->n; g++) {
      j->gid[0] = g % j->grid[0]; j->gid[1] = (g / j->grid[0]) % j->grid[1]; j->gid[2] = g / ((uint64_t)j->grid[0] * j->grid[1]);
      j->fn(j->args, j->gid, j->lsize);
    }
  in_kernel = 0;
  return 0;
}
/* Helper threads, started once and kept: job t of a launch runs on helper t (t >= 1), job 0 on the caller. A launch
   publishes its jobs under `mu` with a new `generation`; each helper with a job runs it and counts `pending` down.
   Launches take `launch_mu`, so the jobs of one launch are never overwritten by another's. */
static pthread_mutex_t launch_mu = PTHREAD_MUTEX_INITIALIZER, mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t start_cv = PTHREAD_COND_INITIALIZER, done_cv = PTHREAD_COND_INITIALIZER;
static struct job jobs[64];
static uint32_t njobs, pending, helpers;
static uint64_t generation;
/* After running a job, a helper polls `generation` for SPIN_NS before sleeping: the next launch of a run of kernels
   (microseconds later) then finds it on its core, where a woken thread would wait behind whatever else the scheduler
   put there, and the caller would do the whole grid alone. */
#define SPIN_NS 500000
#if defined(__x86_64__) || defined(__i386__)
#define spin_pause() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define spin_pause() __asm__ __volatile__("yield")
#else
#define spin_pause() ((void)0)
#endif
static uint64_t now_ns(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec; }
static void *helper(void *p) {
  uint32_t t = (uint32_t)(uintptr_t)p;
  uint64_t seen = 0;
  int ran = 0;
  for (;;) {
    if (ran)
      for (uint64_t end = now_ns() + SPIN_NS; __atomic_load_n(&generation, __ATOMIC_ACQUIRE) == seen && now_ns() < end;)
        spin_pause();
    pthread_mutex_lock(&mu);
    while (generation == seen) pthread_cond_wait(&start_cv, &mu);
    seen = generation;
    int mine = ran = t < njobs;
    pthread_mutex_unlock(&mu);
    if (!mine) continue;
    run(&jobs[t]);
    pthread_mutex_lock(&mu);
    if (--pending == 0) pthread_cond_signal(&done_cv);
    pthread_mutex_unlock(&mu);
  }
  return 0;
}
/* Runs every workgroup of the grid, spread over up to `threads` threads (workgroups are independent). Returns 0, or
   the signal a kernel raised with its address and workgroup in fault[0..4] (address, x, y, z). */
int hcq_cpu_launch(void *fn, const uint8_t *args, const uint32_t *grid, const uint32_t *lsize, uint32_t threads, uint64_t *fault) {
  uint64_t n = (uint64_t)grid[0] * grid[1] * grid[2];
  if (threads > n) threads = n;
  if (threads > 64) threads = 64;
  if (!threads) return 0;
  uint64_t next = 0, chunk = n / (8 * threads) ? n / (8 * threads) : 1;
  pthread_mutex_lock(&launch_mu);
  install();
  for (uint32_t t = 0; t < threads; t++) jobs[t] = (struct job){ (hcq_kernel)fn, args, grid, lsize, n, chunk, &next, 0, 0, {0, 0, 0} };
  for (; helpers + 1 < threads; helpers++) {
    pthread_t tid;
    pthread_create(&tid, 0, helper, (void *)(uintptr_t)(helpers + 1));
    pthread_detach(tid);
  }
  pthread_mutex_lock(&mu);
  njobs = threads; pending = threads - 1; __atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
  pthread_cond_broadcast(&start_cv);
  pthread_mutex_unlock(&mu);
  run(&jobs[0]);
  pthread_mutex_lock(&mu);
  while (pending) pthread_cond_wait(&done_cv, &mu);
  pthread_mutex_unlock(&mu);
  int sig = 0;
  for (uint32_t t = 0; t < threads && !sig; t++)
    if ((sig = jobs[t].sig)) {
      fault[0] = jobs[t].addr; fault[1] = jobs[t].gid[0]; fault[2] = jobs[t].gid[1]; fault[3] = jobs[t].gid[2];
    }
  pthread_mutex_unlock(&launch_mu);
  return sig;
}
"""


def _dlopen(ffi: cffi.FFI, lib: bytes, what: str):
  """Load a shared object from bytes, checked first (a truncated one would kill the process in the loader). The file
  gets a unique name (the dynamic loader reuses a handle for a path it has seen) and is deleted once loaded."""
  check_shared_object(lib)
  with tempfile.NamedTemporaryFile(prefix=f"hcq-{what}-", suffix=".so") as f:
    f.write(lib)
    f.flush()
    return ffi.dlopen(f.name)


@cache
def _launcher():
  ffi = cffi.FFI()
  ffi.cdef("int hcq_cpu_launch(void *fn, const uint8_t *args, const uint32_t *grid, const uint32_t *lsize, uint32_t threads, "
           "uint64_t *fault);")
  return ffi, _dlopen(ffi, ClangCompiler().compile(_LAUNCH_SRC), "hcq_cpu_launch")


class CPUProgram(Program):
  def __init__(self, device: CPUDevice, name: str, lib: bytes):
    super().__init__(device, name, lib)
    self._ffi = cffi.FFI()
    self._ffi.cdef(f"void {name}(const uint8_t *args, const uint32_t *gid, const uint32_t *lsize);")
    try: self._lib = _dlopen(self._ffi, lib, name)
    except SharedObjectError as e:
      raise SharedObjectError(f"the CPU kernel library for {name} cannot be loaded: {e}; pass what the device's compiler "
                              "(dev.compiler.compile) returned, whole") from None
    except OSError as e: raise ValueError(f"cannot load the CPU kernel library for {name}: {e}") from None
    try: self.fn = self._ffi.cast("void *", getattr(self._lib, name))
    except AttributeError: raise ValueError(f"the library has no kernel function named {name!r}") from None


class CPUQueue(Queue):
  def __init__(self, device: CPUDevice, kind: str):
    super().__init__(device)
    self.kind, self.cmds = kind, []

  # a command is a tuple; a field a sealed list may patch is named by (command index, field index)
  def _exec(self, prg, args: KernArgs, global_size, local_size):
    self._patch_point("args", (len(self.cmds), 2))
    self.cmds.append(("exec", prg, args.va, (ctypes.c_uint32 * 3)(*global_size), (ctypes.c_uint32 * 3)(*local_size), args))
  def _copy(self, dest_va, src_va, size):
    self._patch_point("dest", (len(self.cmds), 1))
    self._patch_point("src", (len(self.cmds), 2))
    self.cmds.append(("copy", dest_va, src_va, size))
  def _signal(self, sig, value):
    self._patch_point("value", (len(self.cmds), 2))
    self.cmds.append(("signal", sig, value))
  def _wait(self, sig, value):
    self._patch_point("value", (len(self.cmds), 2))
    self.cmds.append(("wait", sig, value))
  def _timestamp(self, sig): self.cmds.append(("timestamp", sig))
  def _memory_barrier(self): pass   # one coherent memory: nothing to flush
  def _submit(self): self.device._workers[self.kind].put(self.cmds)
  def _seal(self) -> CPUSealed: return CPUSealed(self, self.cmds, self.patches)


class CPUSealed(Sealed):
  """The CPU's sealed stream: a pre-built command list. Patched commands are kept as lists; each submission hands the
  worker a snapshot (those commands as tuples), so patching for the next replay never changes one already submitted."""
  def __init__(self, q: CPUQueue, cmds: list, patches: list):
    super().__init__(q.device, q.kind, patches, [])
    self.cmds = list(cmds)
    self.patched = sorted({where[0] for _, where, _, _ in patches})
    for i in self.patched: self.cmds[i] = list(self.cmds[i])

  def _put(self, where: tuple[int, int], bits: int, value: int) -> None: self.cmds[where[0]][where[1]] = value

  def submit(self) -> None:
    self.device.check_faults()
    cmds = self.cmds.copy()
    for i in self.patched: cmds[i] = tuple(cmds[i])
    self.device._workers[self.kind].put(cmds)


class _Worker(threading.Thread):
  """The command processor of one queue."""
  def __init__(self, device: CPUDevice, kind: str):
    super().__init__(name=f"hcq-cpu-{kind}", daemon=True)
    self.device, self.kind, self.inbox, self.stopping = device, kind, queue.SimpleQueue(), False

  def put(self, cmds: list) -> None: self.inbox.put(cmds)

  def run(self) -> None:
    try: ffi, lib = _launcher()
    except Exception as e:   # no launcher (no C compiler, an unusable compile cache): the device is faulted, saying why
      self.device.report_fault(f"{self.kind} queue: {e}")
      return
    while (cmds := self.inbox.get()) is not None:
      for cmd in cmds:
        if self.stopping: return   # the queue was stopped: what is left in it is dropped
        try: self._run(ffi, lib, cmd)
        except _Stopped: return
        except KernelFault as e: self.device.report_fault(f"{self.kind} queue: {e}")
        except Exception as e:   # a failing command poisons the device, like a GPU fault
          self.device.report_fault(f"{self.kind} queue: {cmd[0]} failed: {e}")

  def _run(self, ffi, lib, cmd) -> None:
    op = cmd[0]
    if op == "exec":
      _, prg, args_va, grid, lsize, _ = cmd
      fault = ffi.new("uint64_t[4]")
      sig = lib.hcq_cpu_launch(prg.fn, ffi.cast("uint8_t *", args_va), ffi.cast("uint32_t *", ctypes.addressof(grid)),
                               ffi.cast("uint32_t *", ctypes.addressof(lsize)), self.device.threads, fault)
      if sig:
        what = {signal.SIGSEGV: "an unmapped or protected", signal.SIGBUS: "a misaligned or unbacked"}.get(sig, "a bad")
        where = f"address {fault[0]:#x}" if fault[0] != 2**64 - 1 else "address (unknown: the signal was sent to it)"
        raise KernelFault(f"kernel {prg.name} touched {what} {where} in workgroup ({fault[1]}, {fault[2]}, {fault[3]})")
    elif op == "copy": ctypes.memmove(cmd[1], cmd[2], cmd[3])
    elif op == "signal":
      cmd[1]._mem[1] = time.monotonic_ns()
      cmd[1].value = cmd[2]
    elif op == "timestamp": cmd[1]._mem[1] = time.monotonic_ns()
    elif op == "wait":
      sig, value, sleep = cmd[1], cmd[2], 0.0
      while sig.value < value:
        if self.stopping: raise _Stopped
        time.sleep(sleep)
        sleep = min(sleep * 2 + 1e-6, 1e-3)
    else: raise ValueError(f"unknown command {op!r}")


class _Stopped(Exception): pass


class KernelFault(RuntimeError):
  """A CPU kernel accessed memory it must not: the CPU device's page fault."""


def _vector_registers() -> tuple[int, int]:
  """(count, bytes) of the vector registers -march=native code has on this host: x86-64 with AVX-512 32 x 64 B, with
  AVX 16 x 32 B, else 16 x 16 B (SSE); Arm's Advanced SIMD 32 x 16 B."""
  try:
    with open("/proc/cpuinfo") as f: flags = set(next((l for l in f if l.startswith(("flags", "Features"))), "").split())
  except OSError: flags = set()
  if "avx512f" in flags: return (32, 64)
  if "avx" in flags: return (16, 32)
  return (32, 16) if "asimd" in flags else (16, 16)


class CPUDevice(Device):
  arch = "cpu"
  host_addressed = True
  vector_registers = _vector_registers()   # what the compute layer tiles CPU kernels for

  def __init__(self):
    self._maps: dict[int, mmap.mmap] = {}
    super().__init__("CPU")
    self.compiler = ClangCompiler()
    self.threads = os.cpu_count() or 1
    self._workers = {k: _Worker(self, k) for k in ("compute", "copy")}
    for w in self._workers.values(): w.start()

  def _alloc(self, size: int, host: bool):
    m = mmap.mmap(-1, max(size, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    va = ctypes.addressof(ctypes.c_char.from_buffer(m))
    self._maps[va] = m
    return va, memoryview(m)[:size], va

  def _free(self, va) -> None:
    self._maps.pop(va)   # the mapping is unmapped once the last view of it is gone

  def _signal_chunk(self):
    va, view, _ = self._alloc(4096, True)
    return view, va

  def _kernarg_chunk(self, size: int):
    va, view, _ = self._alloc(size, True)
    return view, va

  def compute_queue(self) -> CPUQueue: return CPUQueue(self, "compute")
  def copy_queue(self) -> CPUQueue: return CPUQueue(self, "copy")
  def program(self, name: str, lib: bytes) -> CPUProgram: return CPUProgram(self, name, lib)
  def ticks_to_us(self, ticks: int) -> float: return ticks / 1000

  def _stop_queues(self) -> None:
    for w in self._workers.values():
      w.stopping = True
      w.put(None)
    for w in self._workers.values(): w.join(timeout=5)   # the kernel in flight finishes: its memory is freed next

