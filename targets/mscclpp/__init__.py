"""Collective algorithms: MSCCL++ plans expanded, simulated, costed, synthesized and lowered.

* `program`        a plan expanded into per-thread-block steps with the executor's byte ranges;
* `replay`         the synchronisation every replay shares (channels, semaphores, barriers);
* `simulator`      symbolic replay: post-conditions, races, deadlocks (`planc simulate`);
* `cost`           the alpha-beta timing replay and hardware models;
* `builder`        a Python DSL for writing plans (paired channels, automatic nops);
* `synthesis`      standard algorithms for the five collectives (`planc --collective ...`);
* `selection`      the fastest generated algorithm for a message size;
* `communication`  the communication of multi-rank ARK models and its reference semantics;
* `lowering`       ARK model communication -> one MSCCL++ algorithm.
"""
