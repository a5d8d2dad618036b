module kubectl-gpu.test/oracles/mig-parted

go 1.26.0

require (
	github.com/NVIDIA/go-nvlib v0.12.0
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/NVIDIA/go-nvml v0.13.3-1 // indirect
	github.com/google/uuid v1.6.0 // indirect
	go.yaml.in/yaml/v2 v2.4.3 // indirect
)
