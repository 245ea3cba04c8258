// Mock of tt-metalium/device.hpp.
#pragma once
#include "host_api.hpp"
