// Command dra-driver-oracle reads opaque DRA device configs (`parameters` for gpu.nvidia.com)
// the way NVIDIA's DRA driver (sigs.k8s.io/dra-driver-nvidia-gpu) does when it prepares a
// claim's devices on the node, and prints one JSON verdict per file.
//
// The API is the driver's own: sigs.k8s.io/dra-driver-nvidia-gpu v0.4.1's
// api/nvidia.com/resource/v1beta1 is imported, with its StrictDecoder (apimachinery's strict
// JSON serializer over the driver's scheme), its types' Normalize and Validate, the strategy
// getters, MpsPerDevicePinnedMemoryLimit.Normalize, and pkg/featuregates for -gates.
//
// Restated here, naming the upstream file, is only what cannot be imported or what the
// newest release changed:
//   - the order in which the GPU kubelet plugin calls those (cmd/gpu-kubelet-plugin/
//     device_state.go prepareDevices and applyConfig, sharing.go's MPS daemon start: package
//     main, which loads NVML);
//   - with -release v0.5.0, v0.5.0's `mpsConfig.multiUser` (api/nvidia.com/resource/v1beta1/
//     sharing.go: an optional bool there, an unknown field to v0.4.1's strict decoder).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	configapi "sigs.k8s.io/dra-driver-nvidia-gpu/api/nvidia.com/resource/v1beta1"
	"sigs.k8s.io/dra-driver-nvidia-gpu/pkg/featuregates"
	"sigs.k8s.io/yaml"
)

// allocated: the UUID of the one GPU the claim's config applies to, as on a simulated node.
var allocated = []string{"GPU-8f4c2bbe-1111-2222-3333-444455556666"}

// prepare is prepareDevices' Normalize and Validate, then applyConfig's getter for the
// strategy whose gate is on, then (MPS) the per-device limits the control daemon's start
// normalizes.
func prepare(obj runtime.Object) error {
	var config configapi.Interface
	switch c := obj.(type) {
	case *configapi.GpuConfig:
		config = c
	case *configapi.MigDeviceConfig:
		config = c
	default:
		return nil // other kinds are not the GPU plugin's to apply
	}
	if err := config.Normalize(); err != nil {
		return fmt.Errorf("error normalizing GPU config: %w", err)
	}
	if err := config.Validate(); err != nil {
		return fmt.Errorf("error validating GPU config: %w", err)
	}
	type sharing interface {
		IsTimeSlicing() bool
		IsMps() bool
		GetTimeSlicingConfig() (*configapi.TimeSlicingConfig, error)
		GetMpsConfig() (*configapi.MpsConfig, error)
	}
	var s sharing
	switch c := obj.(type) {
	case *configapi.GpuConfig:
		if c.Sharing == nil {
			return nil
		}
		s = c.Sharing
	case *configapi.MigDeviceConfig:
		if c.Sharing == nil {
			return nil
		}
		s = c.Sharing
	}
	if featuregates.Enabled(featuregates.TimeSlicingSettings) && s.IsTimeSlicing() {
		if _, err := s.GetTimeSlicingConfig(); err != nil {
			return fmt.Errorf("error getting timeslice config: %w", err)
		}
	}
	if featuregates.Enabled(featuregates.MPSSupport) && s.IsMps() {
		mps, err := s.GetMpsConfig()
		if err != nil {
			return fmt.Errorf("error getting MPS configuration: %w", err)
		}
		if mps != nil {
			if _, err := mps.DefaultPerDevicePinnedMemoryLimit.Normalize(allocated, mps.DefaultPinnedDeviceMemoryLimit); err != nil {
				return fmt.Errorf("error starting MPS control daemon: error transforming DefaultPerDevicePinnedMemoryLimit into string: %w", err)
			}
		}
	}
	return nil
}

// withoutMultiUser: v0.5.0 reads `sharing.mpsConfig.multiUser` as an optional bool; the
// field is taken out (after checking its type) so that v0.4.1's strict decoder judges the rest.
func withoutMultiUser(raw []byte) ([]byte, error) {
	var doc map[string]interface{}
	if json.Unmarshal(raw, &doc) != nil {
		return raw, nil
	}
	sharing, _ := doc["sharing"].(map[string]interface{})
	mps, _ := sharing["mpsConfig"].(map[string]interface{})
	value, ok := mps["multiUser"]
	if !ok {
		return raw, nil
	}
	if _, isBool := value.(bool); !isBool && value != nil {
		return nil, fmt.Errorf("json: cannot unmarshal %T into Go struct field MpsConfig.sharing.mpsConfig.multiUser of type bool", value)
	}
	delete(mps, "multiUser")
	return json.Marshal(doc)
}

type verdict struct {
	File     string `json:"file"`
	Accepted bool   `json:"accepted"`
	Stage    string `json:"stage,omitempty"`
	Kind     string `json:"kind,omitempty"`
	Error    string `json:"error,omitempty"`
}

func judge(file string, v050 bool) (v verdict) {
	v = verdict{File: file}
	defer func() {
		// A nil the driver dereferences (`timeSlicingConfig: {}` has no interval to
		// validate) crashes its prepare: that config is refused.
		if r := recover(); r != nil {
			v.Accepted, v.Stage, v.Error = false, "prepare", fmt.Sprintf("panic: %v", r)
		}
	}()
	text, err := os.ReadFile(file)
	if err != nil {
		v.Stage, v.Error = "read", err.Error()
		return v
	}
	// A claim carries parameters as JSON (kubectl converts the YAML it is written in).
	raw, err := yaml.YAMLToJSON(text)
	if err != nil {
		v.Stage, v.Error = "yaml", err.Error()
		return v
	}
	if v050 {
		if raw, err = withoutMultiUser(raw); err != nil {
			v.Stage, v.Error = "decode", fmt.Sprintf("error decoding config parameters: %v", err)
			return v
		}
	}
	obj, gvk, err := configapi.StrictDecoder.Decode(raw, nil, nil)
	if err != nil {
		v.Stage, v.Error = "decode", fmt.Sprintf("error decoding config parameters: %v", err)
		return v
	}
	v.Kind = gvk.Kind
	if err := prepare(obj); err != nil {
		v.Stage, v.Error = "prepare", err.Error()
		return v
	}
	v.Accepted = true
	return v
}

func main() {
	enabled := flag.String("gates", "", "comma-separated feature gates to enable (TimeSlicingSettings, MPSSupport)")
	release := flag.String("release", "v0.4.1", "v0.4.1 (the imported code, the nodes' driver) or v0.5.0 (the newest release)")
	flag.Parse()
	if *release != "v0.4.1" && *release != "v0.5.0" {
		fmt.Fprintf(os.Stderr, "unknown -release %q: v0.4.1 or v0.5.0\n", *release)
		os.Exit(2)
	}
	gates := map[string]bool{}
	for _, gate := range strings.Split(*enabled, ",") {
		if gate != "" {
			gates[gate] = true
		}
	}
	if err := featuregates.FeatureGates().SetFromMap(gates); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	out := json.NewEncoder(os.Stdout)
	for _, file := range flag.Args() {
		if err := out.Encode(judge(file, *release == "v0.5.0")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(70)
		}
	}
}
