// The tt dialect's custom syntax prints and parses back.
// RUN: %roundtrip

tt.plans listed {
  tt.plan grid 4 x 2 attributes {schema_version = 1 : i64, backend_version = "0.1"} {
    tt.core_range start [0, 0] extent [2, 2] {replicated = true}
    tt.core_range start [1, 1] extent [1, 1] {replicated = true}
    tt.kernel grid_tiles [1, 2] {
      %a = ark.view : !ark.tensor<0, FP32, [32, 64], padded, buffer 0>
      %c = ark.view : !ark.tensor<1, FP32, [32, 64], padded, buffer 1>
      %r = ark.exp "exp" reads(%a : !ark.tensor<0, FP32, [32, 64], padded, buffer 0>) writes(%c : !ark.tensor<1, FP32, [32, 64], padded, buffer 1>) -> !ark.tensor<2, FP32, [32, 64], padded, buffer 1>
    }
    tt.work_partition {
      tt.core "(0,0)" {
        tt.work io 0 jo 0 tile_order "z_order"
      }
      tt.core "(1,1)" {
        tt.work io 0 jo 1 {extra = {note = "late"}}
        tt.work io 0 jo 0
      }
      tt.core "(0,1)" {
        tt.work_list io [0, 0] jo [1, 0] tile_order "row_major"
        tt.work_list io [] jo []
      }
    }
    tt.layouts {
      tt.layout "A" shard "DRAM" interleave false stride [64, 1] tile_id_order "match_shard"
      tt.layout "C" shard "L1"
    }
  }
}

// CHECK:      tt.plans listed {
// CHECK-NEXT:   tt.plan grid 4 x 2 attributes {schema_version = 1 : i64, backend_version = "0.1"} {
// CHECK-NEXT:     tt.core_range start [0, 0] extent [2, 2] {replicated = true}
// CHECK-NEXT:     tt.core_range start [1, 1] extent [1, 1] {replicated = true}
// CHECK-NEXT:     tt.kernel grid_tiles [1, 2] {
// CHECK:          %r = ark.exp "exp"
// CHECK:          tt.core "(1,1)" {
// CHECK-NEXT:       tt.work io 0 jo 1 {extra = {note = "late"}}
// CHECK-NEXT:       tt.work io 0 jo 0
// CHECK:          tt.core "(0,1)" {
// CHECK-NEXT:       tt.work_list io [0, 0] jo [1, 0] tile_order "row_major"
// CHECK-NEXT:       tt.work_list io [] jo []
// CHECK:          tt.layout "A" shard "DRAM" interleave false stride [64, 1] tile_id_order "match_shard"
// CHECK-NEXT:     tt.layout "C" shard "L1"
