// A 3-layer network: 3x3 conv (padding 1), 2x2 max pool, dense.
dnn.graph {
  %x = dnn.input "input1" : !dnn.fmap<[1, 8, 4, 4], int8>
  %w = dnn.input "conv_weight" {constant = true} : !dnn.fmap<[8, 8, 3, 3], int8>
  %v = dnn.input "fc_weight" {constant = true} : !dnn.fmap<[4, 32, 1, 1], int8>
  %c = dnn.conv2d "conv" "conv2d"(%x, %w) {kernel_size = array<i64: 3, 3>, stride = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>} : (!dnn.fmap<[1, 8, 4, 4], int8>, !dnn.fmap<[8, 8, 3, 3], int8>) -> !dnn.fmap<[1, 8, 4, 4], int8>
  %p = dnn.pool "pool" "max_pool2d"(%c) {pool_size = array<i64: 2, 2>, stride = array<i64: 2, 2>} : (!dnn.fmap<[1, 8, 4, 4], int8>) -> !dnn.fmap<[1, 8, 2, 2], int8>
  %f = dnn.dense "fc" "dense"(%p, %v) : (!dnn.fmap<[1, 8, 2, 2], int8>, !dnn.fmap<[4, 32, 1, 1], int8>) -> !dnn.fmap<[1, 4, 1, 1], int8>
  dnn.output "output1" %f : !dnn.fmap<[1, 4, 1, 1], int8>
}
