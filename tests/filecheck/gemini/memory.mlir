// The DRAM queue, L2 and WL0 allocation and the cycle model on one core.
// RUN: planc-opt %S/Inputs/tiny_net.mlir -p 'gemini-group-layers,gemini-batch-cut,gemini-partition,gemini-workloads{buffer-size=65536},gemini-receptive-field,gemini-transfer-ids,gemini-dram-order' | filecheck %s --check-prefix=DRAM
// RUN: planc-opt %S/Inputs/tiny_net.mlir -p 'gemini-group-layers,gemini-batch-cut,gemini-partition,gemini-workloads{buffer-size=65536},gemini-receptive-field,gemini-transfer-ids,gemini-dram-order,gemini-allocate-l2,gemini-wl0,gemini-cycles' | filecheck %s --check-prefix=MEM

// Queue: the conv weights and the input land before the conv (issue 0), the dense weights
// during the pool (issue 1), the result is stored last. tensor_order = gemini.order.
// DRAM:      gemini.dram_store {gemini.order = 3 : i64, {{.*}} transfer_id = 5 : i64
// DRAM-NEXT: gemini.dram_load {gemini.issue = 0 : i64, gemini.order = 0 : i64, kind = "weight", transfer_id = 0 : i64
// DRAM-NEXT: gemini.dram_load {gemini.issue = 1 : i64, gemini.order = 2 : i64, kind = "weight", transfer_id = 1 : i64
// DRAM-NEXT: gemini.dram_load {gemini.from = "input1", gemini.issue = 0 : i64, gemini.order = 1 : i64, kind = "fmap", transfer_id = 2 : i64

// The conv's snapshot: the loaded input (tensor_order 1) and the conv's own output, allocated
// for its consumer first (it lives longer) at address 0; the input goes above it. Its weights
// come straight from DRAM into WL0: 8 channels of 8*3*3 + 32 = 104 bytes, each padded to 128,
// K padded to 64 rows, in 64-byte units: 64 * 128 / 64 = 128.
// MEM-LABEL: layer_name = "conv", layer_type = "pe"
// MEM:       gemini.l2_tensor {address = 128 : i64, size = 128 : i64, tensor_id = 0 : i64, kind = "ifmap", {{.*}} tensor_order = 1 : i64, newly_added = true, transfer_id = array<i64: 2>, source = [#gemini.source<core_id = -1, layer_name = "input1", {{.*}} kind = "DRAM"
// MEM-SAME:  cur_wl_ifmap = true
// MEM-NEXT:  gemini.l2_tensor {address = 0 : i64, size = 128 : i64, tensor_id = 1 : i64, kind = "ifmap", {{.*}} tensor_order = 4 : i64, newly_added = true, transfer_id = array<i64: 3>, source = [#gemini.source<core_id = 0, layer_name = "conv", {{.*}} kind = "core"
// MEM-NEXT:  gemini.wl0_tensor {address = 0 : i64, size = 128 : i64, {{.*}} layer_name = "conv", source = "DDR", tensor_order = 0 : i64, transfer_id = array<i64: 0>
// MEM-NEXT:  gemini.tile {key = "tile_num_0", ofmap_lower = array<i64: 0, 0, 0, 0>, ofmap_upper = array<i64: 0, 7, 3, 3>, single_tile_time_pred = {{.*}}, layer_name = "conv", cut_mode = "KC", loop_order = "KNHW", tile_padding_tblr = array<i64: 1, 1, 1, 1>}
// The pool reads tensor 1 (no longer new) and writes tensor 2 where the input was; the dense
// layer's weights are prefetched into WL0.
// MEM-LABEL: layer_name = "pool", layer_type = "vp"
// MEM:       gemini.l2_tensor {address = 128 : i64, size = 32 : i64, tensor_id = 2 : i64, {{.*}} newly_added = true
// MEM-NEXT:  gemini.l2_tensor {address = 0 : i64, size = 128 : i64, tensor_id = 1 : i64, {{.*}} newly_added = false, {{.*}} cur_wl_ifmap = true}
// MEM-NEXT:  gemini.wl0_tensor {{{.*}} layer_name = "fc", source = "DDR", tensor_order = 2 : i64
// VP cost: 128 input bytes / 32 per cycle + 16 = 20 cycles.
// MEM-NEXT:  gemini.tile {key = "tile_num_0", {{.*}} single_tile_time_pred = 2.000000e+01 : f64
// The dense output is staged for its DRAM store (no newly_added, no transfer ids: as Gemini).
// MEM-LABEL: layer_name = "fc", layer_type = "pe"
// MEM:       gemini.l2_tensor {address = 0 : i64, size = 8 : i64, tensor_id = 3 : i64, kind = "ofmap", align = 8 : i64, bitwidth = 8 : i64, lower = array<i64: 0, 0, 0, 0>, upper = array<i64: 0, 3, 0, 0>, tensor_order = 3 : i64, layer_name = "fc", start_send = true}
