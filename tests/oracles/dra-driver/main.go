// Command dra-driver-oracle reads opaque DRA device configs (`parameters` for gpu.nvidia.com)
// the way NVIDIA's DRA driver (sigs.k8s.io/dra-driver-nvidia-gpu) does when it prepares a
// claim's devices on the node, and prints one JSON verdict per file.
//
// The driver's module is not served by the Go module proxy this project can reach, so its
// packages cannot be imported. Its decoding is apimachinery's strict JSON serializer over a
// scheme of its types, and that serializer is imported here at the driver's pinned
// apimachinery: unknown and duplicate fields, wrong types, apiVersion/kind resolution and
// quantities are decided by Kubernetes' own code. The driver's types (api/nvidia.com/resource/
// v1beta1), Normalize, Validate, and the per-strategy config getters its kubelet plugin calls
// are restated below; -gates names the alpha feature gates to turn on (both are off by
// default: then any sharing strategy fails).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"sigs.k8s.io/yaml"
)

const (
	group       = "resource.nvidia.com"
	version     = "v1beta1"
	timeSlicing = "TimeSlicing"
	mps         = "MPS"
)

var gates = map[string]bool{}

type GpuConfig struct {
	metav1.TypeMeta `json:",inline"`
	Sharing         *GpuSharing `json:"sharing,omitempty"`
}

type MigDeviceConfig struct {
	metav1.TypeMeta `json:",inline"`
	Sharing         *MigDeviceSharing `json:"sharing,omitempty"`
}

// The other kinds the scheme registers: decoded, never checked here.
type VfioDeviceConfig struct {
	metav1.TypeMeta `json:",inline"`
}
type ComputeDomainChannelConfig struct {
	metav1.TypeMeta `json:",inline"`
	DomainID        string `json:"domainID"`
	AllocationMode  string `json:"allocationMode,omitempty"`
}
type ComputeDomainDaemonConfig struct {
	metav1.TypeMeta `json:",inline"`
	DomainID        string `json:"domainID"`
}

type GpuSharing struct {
	Strategy          string             `json:"strategy"`
	TimeSlicingConfig *TimeSlicingConfig `json:"timeSlicingConfig,omitempty"`
	MpsConfig         *MpsConfig         `json:"mpsConfig,omitempty"`
}

type MigDeviceSharing struct {
	Strategy  string     `json:"strategy"`
	MpsConfig *MpsConfig `json:"mpsConfig,omitempty"`
}

type TimeSlicingConfig struct {
	Interval *string `json:"interval,omitempty"`
}

type MpsConfig struct {
	DefaultActiveThreadPercentage     *int                         `json:"defaultActiveThreadPercentage,omitempty"`
	DefaultPinnedDeviceMemoryLimit    *resource.Quantity           `json:"defaultPinnedDeviceMemoryLimit,omitempty"`
	DefaultPerDevicePinnedMemoryLimit map[string]resource.Quantity `json:"defaultPerDevicePinnedMemoryLimit,omitempty"`
}

// DeepCopyObject makes each type a runtime.Object (the scheme only needs the method set).
func (c *GpuConfig) DeepCopyObject() runtime.Object                  { d := *c; return &d }
func (c *MigDeviceConfig) DeepCopyObject() runtime.Object            { d := *c; return &d }
func (c *VfioDeviceConfig) DeepCopyObject() runtime.Object           { d := *c; return &d }
func (c *ComputeDomainChannelConfig) DeepCopyObject() runtime.Object { d := *c; return &d }
func (c *ComputeDomainDaemonConfig) DeepCopyObject() runtime.Object  { d := *c; return &d }

func strictDecoder() runtime.Decoder {
	scheme := runtime.NewScheme()
	gv := schema.GroupVersion{Group: group, Version: version}
	scheme.AddKnownTypes(gv, &GpuConfig{}, &MigDeviceConfig{}, &VfioDeviceConfig{},
		&ComputeDomainChannelConfig{}, &ComputeDomainDaemonConfig{})
	metav1.AddToGroupVersion(scheme, gv)
	return kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme,
		kjson.SerializerOptions{Strict: true})
}

// validateStrategy: validate.go validateSharingStrategy.
func validateStrategy(s string) error {
	gate := map[string]string{timeSlicing: "TimeSlicingSettings", mps: "MPSSupport"}[s]
	if gate == "" {
		return fmt.Errorf("unknown GPU sharing strategy: %v, supported GPU sharing strategies: %s, %s", s, timeSlicing, mps)
	}
	if !gates[gate] {
		return fmt.Errorf("%q is selected as the GPU sharing strategy, but the %q feature gate is not enabled", s, gate)
	}
	return nil
}

func (c *MpsConfig) validate() error {
	if c == nil || c.DefaultActiveThreadPercentage == nil {
		return nil
	}
	if *c.DefaultActiveThreadPercentage < 0 {
		return fmt.Errorf("active thread percentage must not be negative")
	}
	if *c.DefaultActiveThreadPercentage > 100 {
		return fmt.Errorf("active thread percentage must not be greater than 100")
	}
	return nil
}

// limits: MpsPerDevicePinnedMemoryLimit.Normalize for a node whose allocated device is GPU 0:
// each limit at least 1 MiB, each key a UUID of it or an index into the allocated devices.
func (c *MpsConfig) limits(uuids []string) error {
	if c == nil {
		return nil
	}
	if c.DefaultPinnedDeviceMemoryLimit != nil && c.DefaultPinnedDeviceMemoryLimit.Value()/1024/1024 <= 0 {
		return fmt.Errorf("invalid limit: default value set too low: %v", c.DefaultPinnedDeviceMemoryLimit)
	}
	for key, value := range c.DefaultPerDevicePinnedMemoryLimit {
		known := false
		for i, uuid := range uuids {
			known = known || key == uuid || key == fmt.Sprint(i)
		}
		if !known {
			var index int
			if _, err := fmt.Sscanf(key, "%d", &index); err != nil || fmt.Sprint(index) != key {
				return fmt.Errorf("invalid device: unable to parse key as an integer: %v", key)
			}
			return fmt.Errorf("invalid device: invalid device index: %v", index)
		}
		if value.Value()/1024/1024 <= 0 {
			return fmt.Errorf("invalid limit: value set too low: %v: %v", key, value.String())
		}
	}
	return nil
}

// prepare: Normalize, Validate, then the config getter the plugin calls for the strategy.
func prepare(obj runtime.Object, uuids []string) error {
	switch c := obj.(type) {
	case *GpuConfig:
		if c.Sharing == nil {
			if !gates["TimeSlicingSettings"] {
				return nil
			}
			c.Sharing = &GpuSharing{Strategy: timeSlicing}
		}
		s := c.Sharing
		if gates["TimeSlicingSettings"] && s.Strategy == timeSlicing && s.TimeSlicingConfig == nil {
			interval := "Default"
			s.TimeSlicingConfig = &TimeSlicingConfig{Interval: &interval}
		}
		if gates["MPSSupport"] && s.Strategy == mps && s.MpsConfig == nil {
			s.MpsConfig = &MpsConfig{}
		}
		if err := validateStrategy(s.Strategy); err != nil {
			return err
		}
		switch {
		case s.Strategy == timeSlicing:
			interval := ""
			if s.TimeSlicingConfig.Interval != nil {
				interval = *s.TimeSlicingConfig.Interval
			}
			switch interval {
			case "Default", "Short", "Medium", "Long":
			default:
				return fmt.Errorf("unknown time-slice interval: %v, supported time-slice intervals: Default, Short, Medium, Long", interval)
			}
			if s.MpsConfig != nil {
				return fmt.Errorf("cannot use MpsConfig with the '%v' strategy", timeSlicing)
			}
		case s.Strategy == mps:
			if err := s.MpsConfig.validate(); err != nil {
				return err
			}
			if s.TimeSlicingConfig != nil {
				return fmt.Errorf("cannot use TimeSlicingConfig with the '%v' strategy", mps)
			}
			return s.MpsConfig.limits(uuids)
		}
	case *MigDeviceConfig:
		if c.Sharing == nil {
			if !gates["TimeSlicingSettings"] {
				return nil
			}
			c.Sharing = &MigDeviceSharing{Strategy: timeSlicing}
		}
		s := c.Sharing
		if gates["MPSSupport"] && s.Strategy == mps && s.MpsConfig == nil {
			s.MpsConfig = &MpsConfig{}
		}
		if err := validateStrategy(s.Strategy); err != nil {
			return err
		}
		if s.Strategy == mps {
			if err := s.MpsConfig.validate(); err != nil {
				return err
			}
			return s.MpsConfig.limits(uuids)
		}
	}
	return nil
}

type verdict struct {
	File     string `json:"file"`
	Accepted bool   `json:"accepted"`
	Stage    string `json:"stage,omitempty"`
	Kind     string `json:"kind,omitempty"`
	Error    string `json:"error,omitempty"`
}

func judge(decoder runtime.Decoder, file string) verdict {
	v := verdict{File: file}
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
	obj, gvk, err := decoder.Decode(raw, nil, nil)
	if err != nil {
		v.Stage, v.Error = "decode", fmt.Sprintf("error decoding config parameters: %v", err)
		return v
	}
	v.Kind = gvk.Kind
	if err := prepare(obj, []string{"GPU-8f4c2bbe-1111-2222-3333-444455556666"}); err != nil {
		v.Stage, v.Error = "prepare", err.Error()
		return v
	}
	v.Accepted = true
	return v
}

func main() {
	enabled := flag.String("gates", "", "comma-separated feature gates to enable (TimeSlicingSettings, MPSSupport)")
	flag.Parse()
	for _, gate := range strings.Split(*enabled, ",") {
		if gate != "" {
			gates[gate] = true
		}
	}
	decoder := strictDecoder()
	out := json.NewEncoder(os.Stdout)
	for _, file := range flag.Args() {
		if err := out.Encode(judge(decoder, file)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(70)
		}
	}
}
