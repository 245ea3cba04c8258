// gemini-workloads and gemini-receptive-field on a 2x2 mesh.
// RUN: planc-opt %S/Inputs/tiny_net.mlir -p 'gemini-group-layers{mesh=2x2},gemini-batch-cut,gemini-partition,gemini-workloads{buffer-size=65536}' | filecheck %s --check-prefix=WL
// RUN: planc-opt %S/Inputs/tiny_net.mlir -p 'gemini-group-layers{mesh=2x2},gemini-batch-cut,gemini-partition,gemini-workloads{buffer-size=65536},gemini-receptive-field' | filecheck %s --check-prefix=RF
// RUN: planc-opt %S/Inputs/tiny_net.mlir -p 'gemini-group-layers{mesh=2x2},gemini-batch-cut,gemini-partition,gemini-workloads{buffer-size=65536},gemini-receptive-field,gemini-transfer-ids' | filecheck %s --check-prefix=IDS

// One workload per part, ids dense per core, the global order in gemini.step.
// WL:      gemini.schedule attributes {buffersize = 65536 : i64, xlen = 2 : i64, ylen = 2 : i64, top_batch_cut = 1 : i64}
// WL:      gemini.core attributes {core_id = 0 : i64}
// WL:        gemini.workload attributes {gemini.step = 0 : i64, workload_id = 0 : i64, layer_name = "conv", layer_type = "pe", workload = [array<i64: 0, 0, 0, 0>, array<i64: 0, 3, 1, 3>], lists = ["ifmap", "ofmap"], ofmap_size = 64 : i64}
// WL:        gemini.workload attributes {gemini.step = 4 : i64, workload_id = 1 : i64, layer_name = "pool", layer_type = "vp"
// WL:        gemini.workload attributes {gemini.step = 8 : i64, workload_id = 2 : i64, layer_name = "fc"
// WL:      gemini.core attributes {core_id = 1 : i64}
// WL:        gemini.workload attributes {gemini.step = 1 : i64, workload_id = 0 : i64, layer_name = "conv", layer_type = "pe", workload = [array<i64: 0, 0, 2, 0>, array<i64: 0, 3, 3, 3>]

// Core 0's conv part (rows 0-1) needs input rows 0-2 (padding 1 at the top, none below),
// read from DRAM; it sends its left and right halves to the pool parts of cores 0 and 1.
// RF:      gemini.dram_load {gemini.from = "input1", kind = "fmap", transfer_id = 0 : i64, lower = array<i64: 0, 0, 0, 0>, upper = array<i64: 0, 7, 2, 3>, size = 96 : i64, related_ifmap = array<i64>, destination = [#gemini.dest<core_id = 0, layer_name = "conv", kind = "core", workload_id = 0>]}
// RF:      gemini.dram_load {kind = "weight", transfer_id = {{[0-9]+}} : i64, lower = array<i64: 0, 0, 0, 0>, upper = array<i64: 0, 3, 7, 8>, size = 416 : i64, related_ifmap = array<i64>, destination = [#gemini.dest<core_id = 0, layer_name = "conv", kind = "core", workload_id = 0>, #gemini.dest<core_id = 1, layer_name = "conv", kind = "core", workload_id = 0>]}
// RF:      gemini.dram_store {core_id = 0 : i64, layer_name = "fc", workload_id = 2 : i64, transfer_id = [[FC0:[0-9]+]] : i64, lower = array<i64: 0, 0, 0, 0>, upper = array<i64: 0, 0, 0, 0>, related_ofmap = array<i64>}
// RF-LABEL: gemini.core attributes {core_id = 0 : i64}
// RF:        layer_name = "conv", {{.*}} tile_padding_tblr = array<i64: 1, 0, 1, 1>}
// RF-NEXT:     gemini.ifmap {align = 8 : i64, bitwidth = 8 : i64, lower = array<i64: 0, 0, 0, 0>, upper = array<i64: 0, 7, 2, 3>, size = 96 : i64, transfer_id = array<i64: 0>}
// RF-NEXT:     gemini.ofmap {lower = array<i64: 0, 0, 0, 0>, upper = array<i64: 0, 3, 1, 1>, size = 32 : i64, transfer_id = [[LEFT:[0-9]+]] : i64, destination = [#gemini.dest<core_id = 0, kind = "core", workload_id = 1>]}
// RF-NEXT:     gemini.ofmap {lower = array<i64: 0, 0, 0, 2>, upper = array<i64: 0, 3, 1, 3>, size = 32 : i64, transfer_id = {{[0-9]+}} : i64, destination = [#gemini.dest<core_id = 1, kind = "core", workload_id = 1>]}
// RF-NEXT:     gemini.weight {lower = array<i64: 0, 0, 0, 0>, upper = array<i64: 0, 3, 7, 8>, size = 416 : i64
// The pool part of core 0 reads its 2x2 window from two conv parts (both channel halves).
// RF:        layer_name = "pool"
// RF-NEXT:     gemini.ifmap {{{.*}} upper = array<i64: 0, 7, 1, 1>, size = 32 : i64, transfer_id = array<i64: [[LEFT]], {{[0-9]+}}>}
// The dense part reads the four pool outputs (a multicast block from every core).
// RF:        layer_name = "fc"
// RF-NEXT:     gemini.ifmap {{{.*}} upper = array<i64: 0, 7, 1, 1>, size = 32 : i64, transfer_id = array<i64: {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}>}
// RF:          gemini.ofmap {{{.*}} transfer_id = [[FC0]] : i64, destination = [#gemini.dest<core_id = -1, kind = "DRAM">]}

// Canonical numbering: the 6 weight loads first, then the 4 input loads, then blocks in
// execution order.
// IDS:      gemini.dram_load {kind = "weight", transfer_id = 0 : i64, lower = array<i64: 0, 0, 0, 0>, upper = array<i64: 0, 3, 7, 8>
// IDS-NEXT: gemini.dram_load {kind = "weight", transfer_id = 1 : i64, lower = array<i64: 0, 4, 0, 0>, upper = array<i64: 0, 7, 7, 8>
// IDS:      gemini.dram_load {gemini.from = "input1", kind = "fmap", transfer_id = 6 : i64
// IDS-NEXT: gemini.dram_load {gemini.from = "input1", kind = "fmap", transfer_id = 7 : i64
// IDS:      gemini.ofmap {{{.*}} transfer_id = 10 : i64
