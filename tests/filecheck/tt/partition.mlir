// tt-partition: 4x4 output tiles over a 2x2 grid, 4 tiles per core, by each strategy.
// Core (0,1) is the second core of the x-major order (row_major, block, z_order) and the
// third of the y-major order (column_major). auto keeps row_major: the cost model finds
// no faster strategy for a square matmul whose cores keep their A strip.
// Each core's items are one tt.work_list (one op per core, not per tile).
// RUN: planc-opt %s --split-input-file -p 'tt-partition{grid=2x2 strategy=row_major}' | filecheck %s --check-prefix=ROW
// RUN: planc-opt %s --split-input-file -p 'tt-partition{grid=2x2 strategy=column_major}' | filecheck %s --check-prefix=COL
// RUN: planc-opt %s --split-input-file -p 'tt-partition{grid=2x2 strategy=block}' | filecheck %s --check-prefix=BLOCK
// RUN: planc-opt %s --split-input-file -p 'tt-partition{grid=2x2 strategy=z_order}' | filecheck %s --check-prefix=Z
// RUN: planc-opt %s --split-input-file -p 'tt-partition{grid=2x2}' | filecheck %s --check-prefix=ROW
// RUN: planc-opt %s --split-input-file -p 'tt-partition{grid=2x2}' | filecheck %s --check-prefix=RANGES

tt.plans {
  tt.plan attributes {schema_version = 1 : i64} {
    tt.kernel grid_tiles [4, 4] len_k 4 {
      %t0 = ark.view : !ark.tensor<0, FP16, [128, 128], padded, buffer 0>
      %t1 = ark.view : !ark.tensor<1, FP16, [128, 128], padded, buffer 1>
      %t2 = ark.view : !ark.tensor<2, FP16, [128, 128], padded, buffer 2>
      %t3 = ark.matmul "matmul" reads(%t0, %t1 : !ark.tensor<0, FP16, [128, 128], padded, buffer 0>, !ark.tensor<1, FP16, [128, 128], padded, buffer 1>) writes(%t2 : !ark.tensor<2, FP16, [128, 128], padded, buffer 2>) {transpose_input = false, transpose_other = false} -> !ark.tensor<3, FP16, [128, 128], padded, buffer 2>
    }
  }
}

// ROW:        tt.plan grid 2 x 2
// ROW-NEXT:     tt.core_range start [0, 0] extent [2, 2]
// ROW:          tt.core "(0,1)" {
// ROW-NEXT:       tt.work_list io [1, 1, 1, 1] jo [0, 1, 2, 3] len_k 4 tile_order "row_major"
// ROW-NEXT:     }

// COL:          tt.core "(0,1)" {
// COL-NEXT:       tt.work_list io [0, 1, 2, 3] jo [2, 2, 2, 2] len_k 4 tile_order "column_major"

// BLOCK:        tt.core "(0,1)" {
// BLOCK-NEXT:     tt.work_list io [0, 0, 1, 1] jo [2, 3, 2, 3] len_k 4 tile_order "row_major"

// Z:            tt.core "(1,1)" {
// Z-NEXT:         tt.work_list io [2, 2, 3, 3] jo [2, 3, 2, 3] len_k 4 tile_order "z_order"

// -----

// Three tiles need three cores: a full column x = 0 and the first core of x = 1, as two
// disjoint ranges; the fourth core is not activated.
tt.plans {
  tt.plan attributes {schema_version = 1 : i64} {
    tt.kernel grid_tiles [1, 3] {
      %a = ark.view : !ark.tensor<0, FP32, [32, 96], padded, buffer 0>
      %c = ark.view : !ark.tensor<1, FP32, [32, 96], padded, buffer 1>
      %r = ark.relu "relu" reads(%a : !ark.tensor<0, FP32, [32, 96], padded, buffer 0>) writes(%c : !ark.tensor<1, FP32, [32, 96], padded, buffer 1>) -> !ark.tensor<2, FP32, [32, 96], padded, buffer 1>
    }
  }
}

// RANGES:      {{//[ ]-----}}
// RANGES:      tt.plan grid 2 x 2
// RANGES-NEXT:   tt.core_range start [0, 0] extent [1, 2]
// RANGES-NEXT:   tt.core_range start [1, 0] extent [1, 1]
// RANGES:        tt.core "(0,0)" {
// RANGES-NEXT:     tt.work_list io [0] jo [0] tile_order "row_major"
// RANGES:        tt.core "(1,0)" {
// RANGES-NEXT:     tt.work_list io [0] jo [2] tile_order "row_major"
// RANGES-NOT:    tt.core "(1,1)"
