// ark-compress removes virtual Tensor operators the way ARK's Model::compress() does: their
// results become views of what they reshaped, and node ids become positions again.
// RUN: planc-opt %s -p ark-compress | filecheck %s
// RUN: planc-opt %s -p 'ark-compress{renumber=false}' | filecheck %s --check-prefix=KEEP

ark.model rank 0 of 1 {
  %x = ark.view : !ark.tensor<0, FP32, [4, 8], padded, buffer 0>
  %o = ark.view : !ark.tensor<1, FP32, [4, 8], padded, buffer 1>
  %e = ark.exp "exp" reads(%x : !ark.tensor<0, FP32, [4, 8], padded, buffer 0>) writes(%o : !ark.tensor<1, FP32, [4, 8], padded, buffer 1>) {node = 0 : i64} -> !ark.tensor<2, FP32, [4, 8], padded, buffer 1>
  %r = ark.tensor "reshape" reads(%e : !ark.tensor<2, FP32, [4, 8], padded, buffer 1>) {node = 1 : i64} -> !ark.tensor<3, FP32, [32], padded, buffer 1>
  %o2 = ark.view : !ark.tensor<4, FP32, [32], padded, buffer 2>
  %s = ark.sqrt "sqrt" reads(%r : !ark.tensor<3, FP32, [32], padded, buffer 1>) writes(%o2 : !ark.tensor<4, FP32, [32], padded, buffer 2>) {node = 2 : i64} -> !ark.tensor<5, FP32, [32], padded, buffer 2>
}

// CHECK:       %e = ark.exp "exp" {{.*}} {node = 0 : i64}
// CHECK-NEXT:  %r = ark.view of %e : !ark.tensor<2, FP32, [4, 8], padded, buffer 1> : !ark.tensor<3, FP32, [32], padded, buffer 1>
// CHECK-NOT:   ark.tensor "reshape"
// CHECK:       %s = ark.sqrt "sqrt" reads(%r : {{.*}}) {{.*}} {node = 1 : i64}

// KEEP:        %s = ark.sqrt "sqrt" {{.*}} {node = 2 : i64}
