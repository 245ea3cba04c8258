builtin.module {
  ark.model rank 0 of 2 {
    %t0 = ark.view : !ark.tensor<0, FP32, [64], padded, buffer <0, send [[1, -2147483648]], recv []>>
    %t1 = ark.view : !ark.tensor<1, FP32, [64], padded, buffer 1>
    %t2 = ark.view : !ark.tensor<2, FP32, [64], padded, buffer <2, rank 1, send [], recv [[-1, -2147483648]]>>
    %t3 = ark.send "send" reads(%t0 : !ark.tensor<0, FP32, [64], padded, buffer <0, send [[1, -2147483648]], recv []>>) writes(%t2 : !ark.tensor<2, FP32, [64], padded, buffer <2, rank 1, send [], recv [[-1, -2147483648]]>>) {node = 0 : i64} -> !ark.tensor<3, FP32, [64], padded, buffer <2, rank 1, send [], recv [[-1, -2147483648]]>>
    %t4 = ark.send_done "send_done" reads(%t3 : !ark.tensor<3, FP32, [64], padded, buffer <2, rank 1, send [], recv [[-1, -2147483648]]>>) {node = 1 : i64} -> !ark.tensor<4, FP32, [64], padded, buffer <2, rank 1, send [], recv [[-1, -2147483648]]>>
    %t5 = ark.view : !ark.tensor<5, FP32, [64], padded, buffer <3, send [], recv [[1, -2147483648]]>>
    %t6 = ark.view : !ark.tensor<6, FP32, [64], padded, buffer <4, rank 1, send [[-1, -2147483648]], recv []>>
    %t7 = ark.recv "recv" reads(%t6 : !ark.tensor<6, FP32, [64], padded, buffer <4, rank 1, send [[-1, -2147483648]], recv []>>) writes(%t5 : !ark.tensor<5, FP32, [64], padded, buffer <3, send [], recv [[1, -2147483648]]>>) {node = 2 : i64} -> !ark.tensor<7, FP32, [64], padded, buffer <3, send [], recv [[1, -2147483648]]>>
    %t8 = ark.copy "copy" reads(%t7 : !ark.tensor<7, FP32, [64], padded, buffer <3, send [], recv [[1, -2147483648]]>>) writes(%t1 : !ark.tensor<1, FP32, [64], padded, buffer 1>) {node = 3 : i64} -> !ark.tensor<8, FP32, [64], padded, buffer 1>
  }
  ark.model rank 1 of 2 {
    %t0 = ark.view : !ark.tensor<0, FP32, [64], padded, buffer <0, send [[0, -2147483648]], recv []>>
    %t1 = ark.view : !ark.tensor<1, FP32, [64], padded, buffer 1>
    %t2 = ark.view : !ark.tensor<2, FP32, [64], padded, buffer <2, rank 0, send [], recv [[-1, -2147483648]]>>
    %t3 = ark.send "send" reads(%t0 : !ark.tensor<0, FP32, [64], padded, buffer <0, send [[0, -2147483648]], recv []>>) writes(%t2 : !ark.tensor<2, FP32, [64], padded, buffer <2, rank 0, send [], recv [[-1, -2147483648]]>>) {node = 0 : i64} -> !ark.tensor<3, FP32, [64], padded, buffer <2, rank 0, send [], recv [[-1, -2147483648]]>>
    %t4 = ark.send_done "send_done" reads(%t3 : !ark.tensor<3, FP32, [64], padded, buffer <2, rank 0, send [], recv [[-1, -2147483648]]>>) {node = 1 : i64} -> !ark.tensor<4, FP32, [64], padded, buffer <2, rank 0, send [], recv [[-1, -2147483648]]>>
    %t5 = ark.view : !ark.tensor<5, FP32, [64], padded, buffer <3, send [], recv [[0, -2147483648]]>>
    %t6 = ark.view : !ark.tensor<6, FP32, [64], padded, buffer <4, rank 0, send [[-1, -2147483648]], recv []>>
    %t7 = ark.recv "recv" reads(%t6 : !ark.tensor<6, FP32, [64], padded, buffer <4, rank 0, send [[-1, -2147483648]], recv []>>) writes(%t5 : !ark.tensor<5, FP32, [64], padded, buffer <3, send [], recv [[0, -2147483648]]>>) {node = 2 : i64} -> !ark.tensor<7, FP32, [64], padded, buffer <3, send [], recv [[0, -2147483648]]>>
    %t8 = ark.copy "copy" reads(%t7 : !ark.tensor<7, FP32, [64], padded, buffer <3, send [], recv [[0, -2147483648]]>>) writes(%t1 : !ark.tensor<1, FP32, [64], padded, buffer 1>) {node = 3 : i64} -> !ark.tensor<8, FP32, [64], padded, buffer 1>
  }
}
