// tt-place: a 32x8192 x 8192x8192 FP32 matmul on 8x8 Wormhole cores. The 256 MiB weight
// cannot be interleaved over 64 cores' 1.4 MiB of L1 and goes to DRAM; the activation and
// the output fit next to the circular buffers and go to L1.
// RUN: planc-opt %s -p 'tt-partition{grid=8x8 strategy=row_major},tt-place{arch=wormhole_b0}' | filecheck %s

tt.plans {
  tt.plan attributes {schema_version = 1 : i64} {
    tt.kernel grid_tiles [1, 256] len_k 256 {
      %t0 = ark.view : !ark.tensor<0, FP32, [32, 8192], padded, buffer 0>
      %t1 = ark.view : !ark.tensor<1, FP32, [8192, 8192], padded, buffer 1>
      %t2 = ark.view : !ark.tensor<2, FP32, [32, 8192], padded, buffer 2>
      %t3 = ark.matmul "matmul" reads(%t0, %t1 : !ark.tensor<0, FP32, [32, 8192], padded, buffer 0>, !ark.tensor<1, FP32, [8192, 8192], padded, buffer 1>) writes(%t2 : !ark.tensor<2, FP32, [32, 8192], padded, buffer 2>) {transpose_input = false, transpose_other = false} -> !ark.tensor<3, FP32, [32, 8192], padded, buffer 2>
    }
  }
}

// CHECK:      tt.layouts {
// CHECK-NEXT:   tt.layout "A" shard "L1" interleave true tile_id_order "row_major"
// CHECK-NEXT:   tt.layout "B" shard "DRAM" interleave true tile_id_order "row_major"
// CHECK-NEXT:   tt.layout "C" shard "L1" interleave true tile_id_order "row_major"
// CHECK-NEXT: }
