// Rules of the sched dialect.
// RUN: planc-opt %s --split-input-file --verify-diagnostics | filecheck %s

sched.schedule rank 0 of 1 device "a100" {
  sched.kernel 0 "matmul"
  sched.kernel 0 "rows"
}
// CHECK: kernel id 0 is used twice

// -----

sched.schedule rank 0 of 1 device "a100" {
  sched.kernel 0 "fused"
}
// CHECK: kernel 0: unknown kind 'fused' (expected one of matmul, rows, elementwise, transpose, single)

// -----

sched.schedule rank 0 of 1 device "a100" {
  sched.kernel 0 "elementwise" tiles 4 warps 1 sram 0
  sched.phase {
    sched.launch 0 tiles [0, 8] units [0, 2] warps [0, 1] sram [0, 0] granularity 1
  }
}
// CHECK: tiles [0, 8] are not inside the 4 tiles of kernel 0

// -----

sched.schedule rank 0 of 1 device "a100" {
  sched.phase {
    sched.launch 3 tiles [0, 8] units [0, 2] warps [0, 1] sram [0, 0] granularity 1
  }
}
// CHECK: launch of kernel 3, which is not declared

// -----

sched.schedule rank 0 of 1 device "a100" {
  sched.kernel 0 "elementwise" tiles 4 warps 1 sram 0
  sched.phase {
    sched.launch 0 tiles [0, 4] units [0, 2] warps [0, 1] sram [0, 0] granularity 0
  }
}
// CHECK: granularity must be positive, got 0

// -----

sched.schedule rank 0 of 1 device "a100" {
  %x = ark.view : !ark.tensor<0, FP32, [4, 8], padded, buffer 0>
  %o = ark.view : !ark.tensor<1, FP32, [4, 8], padded, buffer 1>
  %e = ark.exp "exp" reads(%x : !ark.tensor<0, FP32, [4, 8], padded, buffer 0>) writes(%o : !ark.tensor<1, FP32, [4, 8], padded, buffer 1>) {task = 2 : i64} -> !ark.tensor<2, FP32, [4, 8], padded, buffer 1>
}
// CHECK: Exp 'exp' belongs to kernel 2, which is not declared
