// The first three scheduling passes record their decisions on the layers.
//
// Layer grouping: with a tiny L2 the network cannot stay on chip as one segment. (l2-budget is
// the share of the buffer the passes plan to use; 90% here.)
// RUN: planc-opt %S/Inputs/tiny_net.mlir -p 'gemini-group-layers{buffer-size=200 l2-budget=180}' | filecheck %s --check-prefix=GROUP
// GROUP: dnn.conv2d "conv" "conv2d"(%{{.*}}) {gemini.segment = 0 : i64
// GROUP: dnn.pool "pool" "max_pool2d"(%{{.*}}) {gemini.segment = 1 : i64
// GROUP: dnn.dense "fc" "dense"(%{{.*}}) {gemini.segment = 1 : i64}
//
// Batch cut: batch 4 fits as one group in 1350 planned bytes; in 810 the whole batch does not
// fit and the convolution gets its own segment. Its weights (832 bytes with channel padding and
// parameters) exceed the 810 alone, but they go straight to WL0 and stay there across batch
// groups (loaded once from DRAM, as Gemini's batch-4 ResNet-50 IR keeps its first stages'
// weights), so L2 holds only the maps: two groups of two samples fit.
// RUN: planc-opt %S/Inputs/tiny_net.mlir -p 'dnn-rebatch{batch=4},gemini-group-layers{buffer-size=1500 l2-budget=1350},gemini-batch-cut{buffer-size=1500 l2-budget=1350}' | filecheck %s --check-prefix=BIG
// BIG:      %x = dnn.input "input1" : !dnn.fmap<[4, 8, 4, 4], int8>
// BIG:      dnn.conv2d "conv" {{.*}} {gemini.segment = 0 : i64, gemini.sub_batch = 4 : i64, gemini.groups = 1 : i64
// BIG-SAME: -> !dnn.fmap<[4, 8, 4, 4], int8>
// BIG:      dnn.dense "fc" {{.*}} {gemini.segment = 0 : i64, gemini.sub_batch = 4 : i64, gemini.groups = 1 : i64
// RUN: planc-opt %S/Inputs/tiny_net.mlir -p 'dnn-rebatch{batch=4},gemini-group-layers{buffer-size=900 l2-budget=810},gemini-batch-cut{buffer-size=900 l2-budget=810}' | filecheck %s --check-prefix=SMALL
// SMALL: dnn.conv2d "conv" {{.*}} {gemini.segment = 0 : i64, gemini.sub_batch = 2 : i64, gemini.groups = 2 : i64, gemini.wl0_resident = 1 : i64
// SMALL: dnn.pool "pool" {{.*}} {gemini.segment = 1 : i64, gemini.sub_batch = 4 : i64, gemini.groups = 1 : i64
//
// Partition over a 2x2 mesh: the conv splits output channels and rows, the pool rows and
// columns, the dense layer its 4 outputs; parts go to the cores along the snake 0, 1, 3, 2.
// RUN: planc-opt %S/Inputs/tiny_net.mlir -p 'gemini-group-layers{mesh=2x2},gemini-batch-cut,gemini-partition' | filecheck %s --check-prefix=PART
// PART: dnn.graph attributes {gemini.mesh = array<i64: 2, 2>}
// PART: dnn.conv2d "conv" {{.*}} gemini.split = array<i64: 1, 2, 2, 1>, gemini.cores = array<i64: 0, 1, 3, 2>
// PART: dnn.pool "pool" {{.*}} gemini.split = array<i64: 1, 1, 2, 2>, gemini.cores = array<i64: 0, 1, 3, 2>
// PART: dnn.dense "fc" {{.*}} gemini.split = array<i64: 1, 4, 1, 1>, gemini.cores = array<i64: 0, 1, 3, 2>
