// tt-to-metalium: one scheduled matmul plan becomes a host program and three kernels.
// B is [N, K] (TransposeOther) in DRAM without interleaving, i.e. one page read at byte
// offsets; A and C are interleaved tile pages. The cores' tiles are not row-major runs, so
// work items travel as packed (io << 16) | jo runtime args.
// RUN: planc-opt %s -p 'tt-to-metalium' | filecheck %s
// RUN: planc-opt %s -p 'tt-to-metalium' -t tt-metal | filecheck %s --check-prefix=CPP

tt.plans {
  tt.plan grid 2 x 1 attributes {schema_version = 1 : i64} {
    tt.core_range start [0, 0] extent [2, 1]
    tt.kernel grid_tiles [2, 2] len_k 3 {
      %t0 = ark.view : !ark.tensor<0, BF16, [64, 96], padded, buffer 0>
      %t1 = ark.view : !ark.tensor<1, BF16, [40, 96], padded, buffer 1>
      %t2 = ark.view : !ark.tensor<2, BF16, [64, 40], padded, buffer 2>
      %t3 = ark.matmul "matmul" reads(%t0, %t1 : !ark.tensor<0, BF16, [64, 96], padded, buffer 0>, !ark.tensor<1, BF16, [40, 96], padded, buffer 1>) writes(%t2 : !ark.tensor<2, BF16, [64, 40], padded, buffer 2>) {transpose_input = false, transpose_other = true} -> !ark.tensor<3, BF16, [64, 40], padded, buffer 2>
    }
    tt.work_partition {
      tt.core "(0,0)" {
        tt.work io 0 jo 0 len_k 3 tile_order "z_order"
        tt.work io 1 jo 1 len_k 3 tile_order "z_order"
      }
      tt.core "(1,0)" {
        tt.work io 0 jo 1 len_k 3 tile_order "z_order"
        tt.work io 1 jo 0 len_k 3 tile_order "z_order"
      }
    }
    tt.layouts {
      tt.layout "A" shard "DRAM" interleave true tile_id_order "row_major"
      tt.layout "B" shard "DRAM" interleave false tile_id_order "row_major"
      tt.layout "C" shard "L1" interleave true tile_id_order "row_major"
    }
  }
}

// The host: buffers (B as one page), then one program per plan, CBs from the kernel's table.
// CHECK:      metalium.source "host" "main.cpp"
// CHECK:        %[[A:.*]] = metalium.buffer "buffer_0" size 12288 page 2048 l1 false
// CHECK-NEXT:   %[[B:.*]] = metalium.buffer "buffer_1" size 12288 page 12288 l1 false
// CHECK-NEXT:   %[[C:.*]] = metalium.buffer "buffer_2" size 8192 page 2048 l1 true
// CHECK:        metalium.program "kernel 0: Matmul 'matmul'" {
// CHECK-NEXT:     %[[CORES:.*]] = metalium.core_ranges "cores" {ranges = array<i64: 0, 0, 1, 0>}
// CHECK-NEXT:     metalium.circular_buffer %[[CORES]] index 0 pages 3 x 2048 "Float16_b"
// CHECK-NEXT:     metalium.circular_buffer %[[CORES]] index 1 pages 2 x 2048 "Float16_b"
// CHECK-NEXT:     metalium.circular_buffer %[[CORES]] index 16 pages 2 x 2048 "Float16_b"
// CHECK:          metalium.runtime_args %{{.*}} core (0, 0) addresses (%[[A]], %[[B]]) {values = array<i64: 2, 0, 65537>}
// CHECK:        metalium.read_output %[[C]] "out_t3.bin" : "uint16_t" {shape = array<i64: 1, 64, 40>}

// The compute kernel keeps A's K strip while io repeats.
// CHECK:      metalium.source "compute" "kernels/00_matmul/compute.cpp"
// CHECK:        metalium.mm_init
// CHECK:        scf.for
// CHECK:          metalium.tile_regs_acquire
// CHECK:          scf.for
// CHECK:            metalium.matmul_tiles

// CPP:      // ===== main.cpp =====
// CPP:      auto buffer_1 = distributed::MeshBuffer::create(
// CPP-NEXT:     distributed::ReplicatedBufferConfig{.size = 12288},
// CPP-NEXT:     distributed::DeviceLocalBufferConfig{.page_size = 12288, .buffer_type = BufferType::DRAM},
// CPP:      CreateCircularBuffer(program, cores, CircularBufferConfig(3 * 2048, {{[{][{]}}CBIndex::c_0, tt::DataFormat::Float16_b{{[}][}]}}).set_page_size(CBIndex::c_0, 2048));
// CPP:      TensorAccessorArgs(*buffer_0).append_to(reader_compile_args);
// CPP-NEXT: TensorAccessorArgs(*buffer_1).append_to(reader_compile_args);
// CPP:      SetRuntimeArgs(program, reader, CoreCoord(1, 0), {static_cast<uint32_t>(buffer_0->address()), static_cast<uint32_t>(buffer_1->address()), 2u, 1u, 65536u});

// CPP:      // ===== kernels/00_matmul/reader.cpp =====
// CPP:          uint32_t item = get_arg_val<uint32_t>((3 + i));
// CPP-NEXT:     uint32_t io = (item >> 16);
// CPP-NEXT:     uint32_t jo = (item & 65535);
// CPP-NEXT:     if (io != held_index) {
// CPP:              noc_async_read_tile(a_tile, a, l1_addr);
// CPP:          uint32_t b_tile = ((jo * 3) + k_2);
// CPP:          uint64_t noc_addr = b.get_noc_addr(0, (b_tile * 2048));
// CPP-NEXT:     noc_async_read(noc_addr, l1_addr_2, 2048);

// CPP:      // ===== kernels/00_matmul/compute.cpp =====
// CPP:      namespace NAMESPACE {
// CPP-NEXT: void MAIN {
// CPP:          mm_init(cb_in0, cb_in1, cb_out0, 1);
// CPP:              tile_regs_acquire();
// CPP-NEXT:         for (uint32_t k = 0; k < Kt; ++k) {
// CPP-NEXT:             cb_wait_front(cb_in1, 1);
// CPP-NEXT:             matmul_tiles(cb_in0, cb_in1, k, 0, 0);
// CPP-NEXT:             cb_pop_front(cb_in1, 1);
// CPP-NEXT:         }
// CPP-NEXT:         tile_regs_commit();
// CPP-NEXT:         tile_regs_wait();
// CPP-NEXT:         cb_reserve_back(cb_out0, 1);
// CPP-NEXT:         pack_tile(0, cb_out0);
// CPP-NEXT:         cb_push_back(cb_out0, 1);
// CPP-NEXT:         tile_regs_release();

// CPP:      // ===== kernels/00_matmul/writer.cpp =====
// CPP:          uint32_t c_tile = ((io * 2) + jo);
// CPP:          noc_async_write_tile(c_tile, c, l1_addr);
