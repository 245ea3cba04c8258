// Per-op shape rules. Each case is a separate module.
// RUN: planc-opt %s --split-input-file --verify-diagnostics | filecheck %s

ark.model rank 0 of 1 {
  %a = ark.view : !ark.tensor<0, FP16, [64, 32], padded, buffer 0>
  %b = ark.view : !ark.tensor<1, FP16, [64, 32], padded, buffer 1>
  %o = ark.view : !ark.tensor<2, FP16, [64, 64], padded, buffer 2>
  %r = ark.matmul "mm" reads(%a, %b : !ark.tensor<0, FP16, [64, 32], padded, buffer 0>, !ark.tensor<1, FP16, [64, 32], padded, buffer 1>) writes(%o : !ark.tensor<2, FP16, [64, 64], padded, buffer 2>) {transpose_input = false, transpose_other = false, node = 0 : i64} -> !ark.tensor<3, FP16, [64, 64], padded, buffer 2>
}
// CHECK: Matmul 'mm': inner dimensions differ: input [64, 32] gives K = 32 (TransposeInput false), other [64, 32] gives K = 64 (TransposeOther false)

// -----

ark.model rank 0 of 1 {
  %a = ark.view : !ark.tensor<0, FP32, [8, 16], padded, buffer 0>
  %o = ark.view : !ark.tensor<1, FP32, [8, 1], padded, buffer 1>
  %r = ark.reduce_sum "sum" reads(%a : !ark.tensor<0, FP32, [8, 16], padded, buffer 0>) writes(%o : !ark.tensor<1, FP32, [8, 1], padded, buffer 1>) {axis = 2 : si32, keep_dim = true, node = 0 : i64} -> !ark.tensor<2, FP32, [8, 1], padded, buffer 1>
}
// CHECK: ReduceSum 'sum': Axis 2 is out of range for a 2-dim input

// -----

ark.model rank 0 of 1 {
  %a = ark.view : !ark.tensor<0, FP32, [2, 3, 4], padded, buffer 0>
  %o = ark.view : !ark.tensor<1, FP32, [4, 3, 2], padded, buffer 1>
  %r = ark.transpose "t" reads(%a : !ark.tensor<0, FP32, [2, 3, 4], padded, buffer 0>) writes(%o : !ark.tensor<1, FP32, [4, 3, 2], padded, buffer 1>) {permutation = array<i64: 2, 1, 1>, node = 0 : i64} -> !ark.tensor<2, FP32, [4, 3, 2], padded, buffer 1>
}
// CHECK: Transpose 't': Permutation [2, 1, 1] is not a permutation of the 3 dims of input [2, 3, 4]

// -----

ark.model rank 0 of 1 {
  %i = ark.view : !ark.tensor<0, FP32, [8], padded, buffer 0>
  %w = ark.view : !ark.tensor<1, FP32, [100, 16], padded, buffer 1>
  %o = ark.view : !ark.tensor<2, FP32, [8, 16], padded, buffer 2>
  %r = ark.embedding "emb" reads(%i, %w : !ark.tensor<0, FP32, [8], padded, buffer 0>, !ark.tensor<1, FP32, [100, 16], padded, buffer 1>) writes(%o : !ark.tensor<2, FP32, [8, 16], padded, buffer 2>) {node = 0 : i64} -> !ark.tensor<3, FP32, [8, 16], padded, buffer 2>
}
// CHECK: Embedding 'emb': indices tensor 0 must have an integer data type, got FP32

// -----

ark.model rank 0 of 1 {
  %a = ark.view : !ark.tensor<0, FP16, [4, 8], padded, buffer 0>
  %b = ark.view : !ark.tensor<1, FP16, [3, 8], padded, buffer 1>
  %o = ark.view : !ark.tensor<2, FP16, [4, 8], padded, buffer 2>
  %r = ark.add "add" reads(%a, %b : !ark.tensor<0, FP16, [4, 8], padded, buffer 0>, !ark.tensor<1, FP16, [3, 8], padded, buffer 1>) writes(%o : !ark.tensor<2, FP16, [4, 8], padded, buffer 2>) {node = 0 : i64} -> !ark.tensor<3, FP16, [4, 8], padded, buffer 2>
}
// CHECK: Add 'add': shapes [4, 8] and [3, 8] do not broadcast

// -----

ark.model rank 0 of 1 {
  %a = ark.view : !ark.tensor<0, FP16, [4, 8], padded, buffer 0>
  %o = ark.view : !ark.tensor<1, FP16, [4, 8], padded, buffer 1>
  %r = ark.exp "exp" reads(%a : !ark.tensor<0, FP16, [4, 8], padded, buffer 0>) writes(%o : !ark.tensor<1, FP16, [4, 8], padded, buffer 1>) {node = 0 : i64} -> !ark.tensor<2, FP16, [4, 8], padded, buffer 7>
}
// CHECK: Exp 'exp': result tensor 2 must alias write tensor 1 (buffer 1, shape [4, 8]), but is on buffer 7 with shape [4, 8]
