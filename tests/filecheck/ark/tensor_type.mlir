// The tensor type checks its layout when it is built, so bad layouts fail at parse time.
// RUN: planc-opt %s --split-input-file --parsing-diagnostics | filecheck %s

%a = "test.op"() : () -> !ark.tensor<0, FP16, [4, 8], strides [4, 8], offsets [0, 4], buffer 0>
// CHECK: tensor 0: offsets + shape exceed strides in dim 1 (4 + 8 > 8)

// -----

%a = "test.op"() : () -> !ark.tensor<0, FP8, [4], buffer 0>
// CHECK: tensor 0: unknown data type 'FP8' (expected one of FP32, FP16, BF16, INT32, UINT32, INT8, UINT8, BYTE)

// -----

%a = "test.op"() : () -> !ark.tensor<0, FP32, [1, 2, 3, 4, 5], buffer 0>
// CHECK: tensor 0: expected 1 to 4 dims, got 5
