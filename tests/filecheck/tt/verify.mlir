// The format's rules are verifiers, so they hold for IR too (JSON paths are in errors.test).
// RUN: planc-opt %s --split-input-file --verify-diagnostics | filecheck %s

tt.plans {
  tt.plan grid 2 x 2 {
    tt.core_range start [1, 0] extent [2, 1]
  }
}
// CHECK: core range start [1, 0] extent [2, 1] exceeds grid bounds: it reaches core (2,0) of a 2x2 grid

// -----

tt.plans {
  tt.plan grid 2 x 2 {
    tt.core_range start [0, 0] extent [2, 2]
    tt.core_range start [1, 1] extent [1, 1]
  }
}
// CHECK: core range 1 (start [1, 1] extent [1, 1]) overlaps core range 0 (start [0, 0] extent [2, 2]) at core (1,1); ranges may overlap only when both are "replicated": true

// -----

tt.plans {
  tt.plan grid 1 x 1 {
    tt.core_range start [0, 0] extent [1, 1]
    tt.work_partition {
      tt.core "(0,0)" {
        tt.work io 0 jo 0
        tt.work io 0 jo 2
      }
    }
  }
}
// CHECK: tile (0,1) is assigned to no core (1 of the 1x3 tiles the partition spans are unassigned)

// -----

tt.plans {
  tt.plan grid 1 x 1 {
    tt.core_range start [0, 0] extent [1, 1]
    tt.work_partition {
      tt.core "(0,0)" {
        tt.work io 0 jo 0 tile_order "spiral"
      }
    }
  }
}
// CHECK: tile_order must be one of row_major, column_major, match_shard, z_order, got "spiral"

// -----

tt.plans {
  tt.plan grid 1 x 1 {
    tt.kernel grid_tiles [1, 2] len_k 2 {
      %a = ark.view : !ark.tensor<0, FP32, [32, 64], padded, buffer 0>
      %c = ark.view : !ark.tensor<1, FP32, [32, 64], padded, buffer 1>
      %r = ark.exp "exp" reads(%a : !ark.tensor<0, FP32, [32, 64], padded, buffer 0>) writes(%c : !ark.tensor<1, FP32, [32, 64], padded, buffer 1>) -> !ark.tensor<2, FP32, [32, 64], padded, buffer 1>
    }
  }
}
// CHECK: len_k is 2, but Exp 'exp' has no K dimension (it reduces over nothing)

// -----

tt.plans {
  tt.plan grid 1 x 1 {
    tt.kernel grid_tiles [1, 1] {
      %a = ark.view : !ark.tensor<0, FP32, [32, 64], padded, buffer 0>
      %c = ark.view : !ark.tensor<1, FP32, [32, 64], padded, buffer 1>
      %r = ark.exp "exp" reads(%a : !ark.tensor<0, FP32, [32, 64], padded, buffer 0>) writes(%c : !ark.tensor<1, FP32, [32, 64], padded, buffer 1>) -> !ark.tensor<2, FP32, [32, 64], padded, buffer 1>
    }
    tt.layouts {
      tt.layout "A" shard "SRAM"
    }
  }
}
// CHECK: grid_tiles is [1, 1], but the output [32, 64] of Exp 'exp' has 1x2 tiles of 32x32

// -----

// A tt.work_list (what tt-partition writes: one op per core) is held to the same rules as
// the tt.work items it stands for; errors point at the list.
tt.plans {
  tt.plan grid 2 x 1 {
    tt.core_range start [0, 0] extent [2, 1]
    tt.kernel grid_tiles [1, 2] {
      %a = ark.view : !ark.tensor<0, FP32, [32, 64], padded, buffer 0>
      %c = ark.view : !ark.tensor<1, FP32, [32, 64], padded, buffer 1>
      %r = ark.exp "exp" reads(%a : !ark.tensor<0, FP32, [32, 64], padded, buffer 0>) writes(%c : !ark.tensor<1, FP32, [32, 64], padded, buffer 1>) -> !ark.tensor<2, FP32, [32, 64], padded, buffer 1>
    }
    tt.work_partition {
      tt.core "(0,0)" {
        tt.work_list io [0] jo [0]
      }
      tt.core "(1,0)" {
        tt.work_list io [0] jo [0]
      }
    }
  }
}
// CHECK: tile (0,0) is assigned twice: to core (0,0) and to core (1,0); a tile is computed once unless both cores are in replicated core ranges

// -----

tt.plans {
  tt.plan grid 1 x 1 {
    tt.core_range start [0, 0] extent [1, 1]
    tt.kernel grid_tiles [1, 2] {
      %a = ark.view : !ark.tensor<0, FP32, [32, 64], padded, buffer 0>
      %c = ark.view : !ark.tensor<1, FP32, [32, 64], padded, buffer 1>
      %r = ark.exp "exp" reads(%a : !ark.tensor<0, FP32, [32, 64], padded, buffer 0>) writes(%c : !ark.tensor<1, FP32, [32, 64], padded, buffer 1>) -> !ark.tensor<2, FP32, [32, 64], padded, buffer 1>
    }
    tt.work_partition {
      tt.core "(0,0)" {
        tt.work_list io [0, 0] jo [1, 2]
      }
    }
  }
}
// CHECK: tile (0,2) is outside the 1x2 output tiles of Exp 'exp'

// -----

tt.plans {
  tt.plan grid 1 x 1 {
    tt.core_range start [0, 0] extent [1, 1]
    tt.work_partition {
      tt.core "(0,0)" {
        tt.work_list io [0, 1] jo [0]
      }
    }
  }
}
// CHECK: io has 2 tiles but jo has 1

// -----

tt.plans {
  tt.plan grid 1 x 1 {
    tt.core_range start [0, 0] extent [1, 1]
    tt.work_partition {
      tt.core "(0,0)" {
        tt.work_list io [0, -3] jo [0, 0]
      }
    }
  }
}
// CHECK: io must be >= 0, got -3
