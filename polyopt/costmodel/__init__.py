"""The machine and the cost model: what the host is, and what a schedule costs on it.

- ``machine``: the CPU (caches, vectors, cores, measured fork/join), read from the host or a
  profile; ``roofline``: its peak compute and bandwidth;
- ``cost``: the cycle estimate of a loop nest (strides, footprints, levels of memory, forks),
  with ``streams``, ``trips``, ``lanes``, ``calls`` and ``registers`` (a register tile's
  micro-kernel) as its parts; ``memory``: the scratch a kernel needs;
- ``strides``: the one stride analysis (on a schedule, and its fast path on the IR);
  ``verdict``: the one comparison of two predictions, with its reason;
- ``policy``, ``gpu_policy``: the thresholds the CPU and CUDA pipelines and the tuner derive
  from the machine.
"""
