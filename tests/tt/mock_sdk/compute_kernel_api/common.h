// Mock of compute_kernel_api/common.h: the compute entry point and shared enums.
#pragma once
#include <cstdint>

#include "../mock_common.h"

// The build defines these per TRISC; a compute kernel is `namespace NAMESPACE { void MAIN {} }`.
#ifndef NAMESPACE
#define NAMESPACE chlkc_compute
#endif
#ifndef MAIN
#define MAIN compute_main()
#endif

namespace ckernel {
enum EltwiseBinaryType { ELWMUL, ELWDIV, ELWADD, ELWSUB, ELWLESS };
enum class BroadcastType { NONE, COL, ROW, SCALAR };
}  // namespace ckernel
using namespace ckernel;
