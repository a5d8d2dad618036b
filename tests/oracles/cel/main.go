// Command cel-oracle compiles and evaluates DRA device selectors with Kubernetes' own CEL
// environment (k8s.io/dynamic-resource-allocation/cel, the code the scheduler runs) and prints
// one JSON verdict per input file.
//
// Each input file is JSON: {"expression": "...", "driver": "gpu.nvidia.com", "device": D},
// D a ResourceSlice device as the API writes it ({"attributes": {"productName":
// {"string": "..."}}, "capacity": {"memory": {"value": "80Gi"}}, "allowMultipleAllocations":
// true}). The verdict is {"file", "compiled", "matches", "error"}: `compiled` false with the
// compile error, or the match result, or the evaluation error (a missing attribute, ...).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	resourceapi "k8s.io/api/resource/v1"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

type input struct {
	Expression string             `json:"expression"`
	Driver     string             `json:"driver"`
	Device     resourceapi.Device `json:"device"`
}

type verdict struct {
	File     string `json:"file"`
	Compiled bool   `json:"compiled"`
	Matches  *bool  `json:"matches,omitempty"`
	Error    string `json:"error,omitempty"`
}

// The feature gates of Kubernetes 1.37's defaults that change the environment.
var compiler = dracel.GetCompiler(dracel.Features{EnableConsumableCapacity: true})

func judge(file string) verdict {
	v := verdict{File: file}
	text, err := os.ReadFile(file)
	if err != nil {
		v.Error = err.Error()
		return v
	}
	var in input
	if err := json.Unmarshal(text, &in); err != nil {
		v.Error = fmt.Sprintf("input: %v", err)
		return v
	}
	result := compiler.CompileCELExpression(in.Expression, dracel.Options{})
	if result.Error != nil {
		v.Error = result.Error.Error()
		return v
	}
	v.Compiled = true
	matches, _, err := result.DeviceMatches(context.Background(), dracel.Device{
		Driver:                   in.Driver,
		AllowMultipleAllocations: in.Device.AllowMultipleAllocations,
		Attributes:               in.Device.Attributes,
		Capacity:                 in.Device.Capacity,
	})
	if err != nil {
		v.Error = err.Error()
		return v
	}
	v.Matches = &matches
	return v
}

func main() {
	out := json.NewEncoder(os.Stdout)
	for _, file := range os.Args[1:] {
		if err := out.Encode(judge(file)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(70)
		}
	}
}
