"""Device descriptions: one JSON file per device (`a100.json`, `wormhole_b0.json`, ...) and
their typed readers.

* `hardware`  any device by name (`--arch NAME`, `$PLANC_DEVICE_PATH`), GPUs (`GpuDevice`) and
              the limits of an ARK Architecture;
* `tt`        Tenstorrent chips (`TTDevice`): core grid, L1, DRAM banks.

This layer sits between the ground and the dialects because the `plan` dialect's verifier asks an
Architecture's per-processor limits (a plan asking for more hangs ARK's persistent kernel).
It imports only `ground`.
"""
