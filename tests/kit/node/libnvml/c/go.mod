module kubectl-gpu.test/fakes/libnvml

// Not a Go program: pins the Go module whose nvml.h (NVIDIA's NVML header) the C library
// compiles against. scripts/gobins.py reads the header from the module cache.

go 1.26.0

require github.com/NVIDIA/go-nvml v0.13.4-1
