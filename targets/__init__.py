"""Machine models, one package per target runtime: hardware cost models, simulators, reference
interpreters, and the whole-document checks that need them.

* `targets.ark`      ARK: the model interpreter, byte regions and tensor layouts, the cost
                     model, the plan simulator and the plan checks;
* `targets.tt`       Tenstorrent: kernel schedules (circular buffers, per-core timing) and the
                     tile simulator;
* `targets.gemini`   Gemini: the layer/hardware model, schedule facts, L2 planning, the layer
                     interpreter, the schedule simulator and graph equivalence;
* `targets.mscclpp`  MSCCL++ collectives: expansion, replay, simulation, cost, synthesis,
                     selection and the lowering of multi-rank ARK models.

A target package imports `ground`, `devices`, `dialects` and the target packages it builds on
(`targets.tt` and `targets.gemini` run ARK operators with `targets.ark`), never `frontends`,
`passes`, `backends` or the driver (tests/test_layers.py).
"""
