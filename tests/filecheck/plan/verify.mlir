// Local rules of the plan ops.
// RUN: planc-opt %s --split-input-file --verify-diagnostics | filecheck %s

plan.plan rank 0 of 1 processors 4 warps 4 {
  plan.processor_group processors [0, 4] {
    plan.resource_group processors [0, 4] warps [0, 4] sram [0, 1024, 2] {
    }
  }
}
// CHECK: SramRange [0, 1024, 2] must have step 1

// -----

plan.plan rank 0 of 1 processors 4 warps 4 {
  plan.processor_group processors [0, 2] {
    plan.resource_group processors [0, 4] warps [0, 4] sram [0, 0] {
    }
  }
}
// CHECK: resource group processors [0, 4] are not inside the processor group's [0, 2]
