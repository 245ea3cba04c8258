// RUN: %roundtrip

ark.model rank 1 of 2 attributes {node_form = "Ops"} {
  %a = ark.view : !ark.tensor<0, BF16, [2, 64], padded, buffer <0, send [[0, -2147483648]], recv [], external true>>
  %o = ark.view : !ark.tensor<1, BF16, [2, 64], strides [2, 128], offsets [0, 64], pads [1, 1], buffer 1>
  %r = ark.scalar_mul "mul_3" reads(%a : !ark.tensor<0, BF16, [2, 64], padded, buffer <0, send [[0, -2147483648]], recv [], external true>>) writes(%o : !ark.tensor<1, BF16, [2, 64], strides [2, 128], offsets [0, 64], pads [1, 1], buffer 1>) {factor = 0.0883883461356163 : f64, node = 0 : i64, extra_args = {Scale = 3 : si32}} -> !ark.tensor<2, BF16, [2, 64], strides [2, 128], offsets [0, 64], pads [1, 1], buffer 1>
  %v = ark.view of %r : !ark.tensor<2, BF16, [2, 64], strides [2, 128], offsets [0, 64], pads [1, 1], buffer 1> : !ark.tensor<3, BF16, [128], padded, buffer 1>
  %g = ark.generic "x" reads(%v : !ark.tensor<3, BF16, [128], padded, buffer 1>) {type_name = "FancyOp", args = {Alpha = 1.5 : f64, Dims = array<i64: 1, 2>}, node = 1 : i64} -> !ark.tensor<4, BF16, [128], padded, buffer 1>
}

// CHECK:      ark.model rank 1 of 2 attributes {node_form = "Ops"} {
// CHECK-NEXT:   %a = ark.view : !ark.tensor<0, BF16, [2, 64], padded, buffer <0, send [[0, -2147483648]], recv [], external true>>
// CHECK-NEXT:   %o = ark.view : !ark.tensor<1, BF16, [2, 64], strides [2, 128], offsets [0, 64], pads [1, 1], buffer 1>
// CHECK-NEXT:   %r = ark.scalar_mul "mul_3" reads(%a : {{.*}}) writes(%o : {{.*}}) {factor = 0.088388346135616302 : f64, node = 0 : i64, extra_args = {Scale = 3 : si32}} -> !ark.tensor<2, BF16, [2, 64], strides [2, 128], offsets [0, 64], pads [1, 1], buffer 1>
// CHECK-NEXT:   %v = ark.view of %r : {{.*}} : !ark.tensor<3, BF16, [128], padded, buffer 1>
// CHECK-NEXT:   %g = ark.generic "x" reads(%v : {{.*}}) {type_name = "FancyOp", args = {Alpha = 1.500000e+00 : f64, Dims = array<i64: 1, 2>}, node = 1 : i64} -> !ark.tensor<4, BF16, [128], padded, buffer 1>
// CHECK-NEXT: }
