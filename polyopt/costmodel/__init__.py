"""The machine and the cost model: what the host is, and what a schedule costs on it.

- ``machine``: the CPU (caches, vectors, cores, the core's loads, bandwidths and TLB, measured
  memory and fork/join), read from the host or a profile; ``roofline``: its peak compute and
  bandwidth; ``gpu_machine``: the GPU (what the CUDA pipeline, its code and runtime read);
- ``cost``: the cycle estimate of a loop nest (strides, footprints, levels of memory, forks),
  with ``streams``, ``trips``, ``lanes``, ``calls`` and ``registers`` (a register tile's
  micro-kernel) as its parts; ``memory``: the scratch a kernel needs;
- ``strides``: the one stride analysis (on a schedule, and its fast path on the IR);
  ``verdict``: the one comparison of two predictions, with its reason.

The pipelines' thresholds are not here (``pipeline/policy.py``, ``pipeline/gpu_policy.py``):
the model reads the machine alone, and the one threshold it mirrors (the iterations a
parallel loop needs) is an argument of ``cost.estimate``.
"""
