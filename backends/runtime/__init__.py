"""C++ runtime headers that the `cpu` and `cuda` targets copy next to the code they emit.

`planc_types.h` (element types, exact fp16/bf16 rounding), `planc_kernels.h` (the per-operator
tile kernels and the format's task-distribution formula, shared by both targets),
`planc_cpu.h` and `planc_cuda.h` (threads or CUDA blocks as processors, barriers, and each
target's matmul) and `planc_host.h` (tensor files in and out of the device arena).
"""
