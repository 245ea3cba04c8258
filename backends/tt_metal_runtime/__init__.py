"""The C++ support header the TT-Metalium host programs planc writes include."""
