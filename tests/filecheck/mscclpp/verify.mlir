// The executor's rules are verifiers next to the ops. Each case is a separate module.
// RUN: planc-opt %s --split-input-file --verify-diagnostics | filecheck %s

mscclpp.algorithm "allgather" "Simple" attributes {inplace = true} {
  mscclpp.gpu 0 attributes {input_chunks = 1 : i64, output_chunks = 2 : i64, scratch_chunks = 0 : i64, semaphores_listed = true} {
    mscclpp.threadblock 0 attributes {channels = []} {
      mscclpp.copy src(o[1:3]) dst(o[0:2])
    }
  }
}
// CHECK: src_buff[0] o[1:3]: chunks [1, 3) exceed the 2 chunks of the output of gpu 0

// -----

mscclpp.algorithm "allgather" "Simple" attributes {inplace = true} {
  mscclpp.gpu 0 attributes {input_chunks = 1 : i64, output_chunks = 2 : i64, scratch_chunks = 0 : i64, semaphores_listed = true} {
    mscclpp.threadblock 0 attributes {channels = []} {
      mscclpp.signal memory [0]
    }
  }
}
// CHECK: channel_ids names memory channel 0, but thread block 0 lists 0

// -----

mscclpp.algorithm "allreduce" "Simple" attributes {inplace = true} {
  mscclpp.gpu 0 attributes {input_chunks = 2 : i64, output_chunks = 2 : i64, scratch_chunks = 0 : i64, semaphores_listed = true} {
    mscclpp.threadblock 0 attributes {channels = []} {
      mscclpp.rre src(i[0:1], i[1:2]) dst(i[0:1])
    }
  }
}
// CHECK: rre src_buff[1] must be a remote buffer (buffer_id), got i[1:2]

// -----

mscclpp.algorithm "allreduce" "Simple" attributes {inplace = true} {
  mscclpp.gpu 0 attributes {input_chunks = 2 : i64, output_chunks = 2 : i64, scratch_chunks = 0 : i64, semaphores_listed = true} {
    mscclpp.threadblock 0 attributes {channels = []} {
      mscclpp.pipeline {iter_context = #mscclpp.iter<unit 64, chunks 1>} {
        mscclpp.pipeline {iter_context = #mscclpp.iter<unit 64, chunks 1>} {
        }
      }
    }
  }
}
// CHECK: pipelines cannot be nested

// -----

mscclpp.algorithm "allreduce" "Simple" attributes {inplace = true} {
  mscclpp.gpu 1 attributes {input_chunks = 2 : i64, output_chunks = 2 : i64, scratch_chunks = 0 : i64, semaphores_listed = true} {
  }
}
// CHECK: gpu id 1 must equal its position 0 in gpus
