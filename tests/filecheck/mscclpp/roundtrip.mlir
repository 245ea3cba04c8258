// RUN: %roundtrip

mscclpp.algorithm "allreduce" "LL" attributes {inplace = true, plan_name = "pkt", use_double_scratch_buffer = true, extra = {root = 0 : i64}} {
  mscclpp.gpu 0 attributes {input_chunks = 2 : i64, output_chunks = 2 : i64, scratch_chunks = 4 : i64, semaphores_listed = true} {
    mscclpp.channel "memory" {connected_to = array<i64: 1>}
    mscclpp.channel "switch" {buffer_type = "i", rank_groups = [#mscclpp.rank_group<size 2, [0, 1]>]}
    mscclpp.remote_buffer 1 "s" {access_channel_types = ["memory"]}
    mscclpp.semaphore 1
    mscclpp.threadblock 0 attributes {channels = [#mscclpp.tb_channels<memory [0]>, #mscclpp.tb_channels<switch [0] extra {buff = "i"}>], remote_buffer_refs = [#mscclpp.tb_remote<memory [0]>]} {
      mscclpp.ppkt memory src(i[1:2]) dst(remote 0[0:1] extra {hint = 1 : i64})
      mscclpp.respkt memory src(i[0:1], s[0:1]) dst(i[0:1], remote 0[2:3]) {reduce_op = "sum", tbg_info = #mscclpp.tbg<0 of 1>}
      mscclpp.pipeline {iter_context = #mscclpp.iter<unit 1048576, chunks 1>} {
        mscclpp.glres switch src(switch 0[0:1]) dst(switch 0[0:1])
      }
      mscclpp.sem_release {semaphore_ids = array<i64: 0>}
      mscclpp.sem_acquire {semaphore_ids = array<i64: 0>, spellings = {"@name" = "sem_acquire"}}
    }
  }
  mscclpp.gpu 1 attributes {input_chunks = 2 : i64, output_chunks = 2 : i64, scratch_chunks = 4 : i64, semaphores_listed = false} {
    mscclpp.channel "memory" {connected_to = array<i64: 0>}
    mscclpp.channel "switch" {buffer_type = "i", rank_groups = [#mscclpp.rank_group<size 2, [0, 1]>]}
  }
}

// CHECK:      mscclpp.algorithm "allreduce" "LL" attributes {inplace = true, plan_name = "pkt", use_double_scratch_buffer = true, extra = {root = 0 : i64}} {
// CHECK-NEXT:   mscclpp.gpu 0 attributes {input_chunks = 2 : i64, output_chunks = 2 : i64, scratch_chunks = 4 : i64, semaphores_listed = true} {
// CHECK-NEXT:     mscclpp.channel "memory" {connected_to = array<i64: 1>}
// CHECK-NEXT:     mscclpp.channel "switch" {buffer_type = "i", rank_groups = [#mscclpp.rank_group<size 2, [0, 1]>]}
// CHECK-NEXT:     mscclpp.remote_buffer 1 "s" {access_channel_types = ["memory"]}
// CHECK-NEXT:     mscclpp.semaphore 1
// CHECK-NEXT:     mscclpp.threadblock 0 attributes {channels = [#mscclpp.tb_channels<memory [0]>, #mscclpp.tb_channels<switch [0] extra {buff = "i"}>], remote_buffer_refs = [#mscclpp.tb_remote<memory [0]>]} {
// CHECK-NEXT:       mscclpp.ppkt memory src(i[1:2]) dst(remote 0[0:1] extra {hint = 1 : i64})
// CHECK-NEXT:       mscclpp.respkt memory src(i[0:1], s[0:1]) dst(i[0:1], remote 0[2:3]) {reduce_op = "sum", tbg_info = #mscclpp.tbg<0 of 1>}
// CHECK-NEXT:       mscclpp.pipeline {iter_context = #mscclpp.iter<unit 1048576, chunks 1>} {
// CHECK-NEXT:         mscclpp.glres switch src(switch 0[0:1]) dst(switch 0[0:1])
// CHECK-NEXT:       }
// CHECK-NEXT:       mscclpp.sem_release {semaphore_ids = array<i64: 0>}
// CHECK-NEXT:       mscclpp.sem_acquire {semaphore_ids = array<i64: 0>, spellings = {"@name" = "sem_acquire"}}
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   mscclpp.gpu 1 attributes {input_chunks = 2 : i64, output_chunks = 2 : i64, scratch_chunks = 4 : i64, semaphores_listed = false} {
// CHECK-NEXT:     mscclpp.channel "memory" {connected_to = array<i64: 0>}
// CHECK-NEXT:     mscclpp.channel "switch" {buffer_type = "i", rank_groups = [#mscclpp.rank_group<size 2, [0, 1]>]}
// CHECK-NEXT:   }
// CHECK-NEXT: }
