"""Tenstorrent's machine model: how a kernel runs on Tensix cores (`schedule`: circular
buffers, held operands, per-core time) and the numpy tile simulator of a `tt.plan.json`
(`simulator`). Kernel geometry is the `tt` dialect's (`dialects.tt_kernels`), the chips are
described in `devices.tt`."""
