// The sched dialect's text form survives a print/parse round trip (generic and custom).
// RUN: %roundtrip

sched.schedule rank 0 of 1 device "mi300x" {
  %x = ark.view : !ark.tensor<0, FP32, [4, 8], padded, buffer 0>
  %o = ark.view : !ark.tensor<1, FP32, [4, 8], padded, buffer 1>
  sched.kernel 0 "elementwise" tiles 4 warps 1 sram 0
  %e = ark.exp "exp" reads(%x : !ark.tensor<0, FP32, [4, 8], padded, buffer 0>) writes(%o : !ark.tensor<1, FP32, [4, 8], padded, buffer 1>) {task = 0 : i64, config = {NumWarps = 1 : i64, SramBytes = 0 : i64, Tile = [1 : i64, 8 : i64], NumTasks = 4 : i64}} -> !ark.tensor<2, FP32, [4, 8], padded, buffer 1>
  sched.kernel 1 "single"
  sched.phase {
    sched.launch 0 tiles [0, 4] units [0, 8, 2] warps [0, 8] sram [0, 0] granularity 2
  }
  sched.region 0 offset 0 size 128 {holds = array<i64: 0>}
  sched.region 1 offset 128 size 128 {holds = array<i64: 1, 5>}
}

// CHECK:      sched.schedule rank 0 of 1 device "mi300x" {
// CHECK:        sched.kernel 0 "elementwise" tiles 4 warps 1 sram 0
// CHECK-NEXT:   %e = ark.exp "exp"
// CHECK-NEXT:   sched.kernel 1 "single"{{$}}
// CHECK-NEXT:   sched.phase {
// CHECK-NEXT:     sched.launch 0 tiles [0, 4] units [0, 8, 2] warps [0, 8] sram [0, 0] granularity 2
// CHECK-NEXT:   }
// CHECK-NEXT:   sched.region 0 offset 0 size 128 {holds = array<i64: 0>}
// CHECK-NEXT:   sched.region 1 offset 128 size 128 {holds = array<i64: 1, 5>}
// CHECK-NEXT: }
