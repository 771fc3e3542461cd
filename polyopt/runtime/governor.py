"""The threads a kernel's parallel regions get: the cores other processes leave free.

A kernel's parallel loops split their work statically and meet at a barrier after each
loop. When another process keeps a core busy, one of polyopt's threads waits for that core
behind it, and every barrier costs the OS scheduler's time slice (about 8 ms here): with a
CPU-bound competitor on one of two cores, floyd-warshall's 179 barriers took 1448 ms a call
against 0.68 ms quiet, while one thread alone takes about twice the quiet time, the fair
share. So before each call the trampoline (:mod:`.trampoline`, which calls every CPU
kernel) asks the governor, and at most every ``PO_GOVERN_S`` it measures how much CPU
other processes used since the last look: ``/proc/stat``'s busy time of every CPU (user,
nice, system, irq, softirq, steal) less this process's own CPU time
(``CLOCK_PROCESS_CPUTIME_ID``, its spinning OpenMP threads included), per second of wall
time. The cores that leaves, rounded, at least one and at most the OpenMP runtime's own
count (``OMP_NUM_THREADS`` or every CPU), become the calling thread's ``nthreads-var``
(``omp_set_num_threads``) while the kernel runs, and the old value is back after it: another
library on the same OpenMP runtime (a torch build may share libgomp) keeps its own count.

``/proc/stat`` counts in ticks of 10 ms, so a 100 ms look at two CPUs is good to about a
fifth of a core; a competitor is seen at the first call 100 ms after it started, and gone
at the first call 100 ms after it stopped. The check costs a coarse clock read per call
(about 10 ns) and a read of ``/proc/stat`` (a few microseconds) per look.

``OMP_DYNAMIC=false`` (the OpenMP standard's switch for "no dynamic adjustment of the
number of threads") turns the governor off, and so does a platform without ``/proc/stat``.
Compile-time decisions never depend on the load: a schedule is the same on a busy machine.
"""

from __future__ import annotations

GOVERN_S = 0.1
"""Seconds between two looks at the machine's load: long enough for ``/proc/stat``'s
10 ms ticks to measure a fifth of a core on two CPUs, short enough to follow a build or a
test run that starts next to a benchmark."""

SOURCE = r"""
#include <omp.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define PO_GOVERN_S @GOVERN_S@

static int po_gov_state = -1;   /* -1 not started, 0 off, 1 on */
static int po_gov_fd = -1, po_gov_cores = 1, po_gov_max = 1, po_gov_want = 1;
static double po_gov_next, po_gov_wall, po_gov_ours, po_gov_busy, po_gov_tick;

static double po_gov_clock(clockid_t id) {
  struct timespec t;
  clock_gettime(id, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* CPU seconds every process ran on every CPU since boot (/proc/stat's first line). */
static int po_gov_busy_seconds(double *out) {
  char buf[256];
  ssize_t n = pread(po_gov_fd, buf, sizeof buf - 1, 0);
  if (n < 5 || strncmp(buf, "cpu ", 4) != 0) return 0;
  buf[n] = 0;
  char *p = buf + 4, *end;
  unsigned long long v[8];
  for (int i = 0; i < 8; i++) {
    v[i] = strtoull(p, &end, 10);
    if (end == p) return 0;
    p = end;
  }
  /* user nice system idle iowait irq softirq steal: all but idle and iowait */
  *out = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) * po_gov_tick;
  return 1;
}

static int po_gov_start(void) {
  const char *dyn = getenv("OMP_DYNAMIC");
  if (dyn != NULL && (strcasecmp(dyn, "false") == 0 || strcmp(dyn, "0") == 0)) return 0;
  long hz = sysconf(_SC_CLK_TCK);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  po_gov_max = omp_get_max_threads();
  if (hz <= 0 || cores <= 1 || po_gov_max <= 1) return 0;
  po_gov_fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
  if (po_gov_fd < 0) return 0;
  po_gov_tick = 1.0 / (double)hz;
  po_gov_cores = (int)cores;
  po_gov_want = po_gov_max;
  po_gov_wall = po_gov_clock(CLOCK_MONOTONIC);
  po_gov_ours = po_gov_clock(CLOCK_PROCESS_CPUTIME_ID);
  if (!po_gov_busy_seconds(&po_gov_busy)) { close(po_gov_fd); return 0; }
  po_gov_next = po_gov_wall + PO_GOVERN_S;
  return 1;
}

/* Another look at the load, when the last is PO_GOVERN_S old. */
static void po_gov_look(double now) {
  double busy, wall = po_gov_clock(CLOCK_MONOTONIC);
  double ours = po_gov_clock(CLOCK_PROCESS_CPUTIME_ID);
  po_gov_next = now + PO_GOVERN_S;
  if (!po_gov_busy_seconds(&busy) || wall <= po_gov_wall) return;
  double others = ((busy - po_gov_busy) - (ours - po_gov_ours)) / (wall - po_gov_wall);
  int free_cores = po_gov_cores - (int)(others + 0.5);
  po_gov_want = free_cores < 1 ? 1 : free_cores > po_gov_max ? po_gov_max : free_cores;
  po_gov_wall = wall;
  po_gov_ours = ours;
  po_gov_busy = busy;
}

/* Before each kernel call, with the GIL held (the shared state needs no lock): the
   calling thread's nthreads-var to restore after the call, or 0 when it stays. The count
   is set for the call alone: another library on the same OpenMP runtime (torch may be)
   keeps its own. */
static int po_govern(void) {
  if (po_gov_state < 0) po_gov_state = po_gov_start();
  if (po_gov_state == 0) return 0;
  double now = po_gov_clock(CLOCK_MONOTONIC_COARSE);
  if (now >= po_gov_next) po_gov_look(now);
  if (po_gov_want >= po_gov_max) return 0;
  int had = omp_get_max_threads();
  if (had <= po_gov_want) return 0;
  omp_set_num_threads(po_gov_want);
  return had;
}

static void po_ungovern(int had) {
  if (had > 0) omp_set_num_threads(had);
}

/* threads(): the thread count the governor gives the calling thread's next kernel. */
static PyObject *po_threads(PyObject *self, PyObject *args) {
  (void)self; (void)args;
  int had = po_govern();
  int now = omp_get_max_threads();
  po_ungovern(had);
  return PyLong_FromLong(now);
}
""".replace("@GOVERN_S@", repr(GOVERN_S))
