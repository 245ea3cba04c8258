"""Collective algorithms: MSCCL++ plans expanded, simulated, costed and synthesized.

* `program`    a plan expanded into per-thread-block steps with the executor's byte ranges;
* `replay`     the synchronisation every replay shares (channels, semaphores, barriers);
* `simulator`  symbolic replay: post-conditions, races, deadlocks (`planc simulate`);
* `cost`       the alpha-beta timing replay and hardware models;
* `synthesis`  standard algorithms for the five collectives (`planc --collective ...`).
"""
