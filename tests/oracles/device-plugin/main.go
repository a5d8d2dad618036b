// Command device-plugin-oracle reads device-plugin config files the way NVIDIA's
// k8s-device-plugin reads them at start and prints one JSON verdict per file.
//
// The config code is NVIDIA's own: github.com/NVIDIA/k8s-device-plugin v0.19.3's
// api/config/v1 is imported, and the file is read by its NewConfig, given a urfave/cli
// context holding the plugin's flags, exactly as cmd/nvidia-device-plugin's loadConfig does;
// its DisableResourceNamingInConfig, NewDeviceListStrategies, AssertChannelIDsValid and
// SharingStrategy are called as the plugin calls them. The package pulls in no NVML.
//
// Restated here, each naming its upstream file, is only what cannot be imported or what
// the newest release (v0.20.0, commit 1b826acc6af3, refused by the module proxy) changed:
//   - the plugin's flag list and validateFlags (cmd/nvidia-device-plugin/main.go: package
//     main, not importable) and the MPS control daemon's replica cap
//     (cmd/mps-control-daemon/mps/device.go: imports go-nvml);
//   - v0.20.0's `flags.plugin.sharedDevicesAllocationPolicy` (api/config/v1/flags.go,
//     validated in cmd/nvidia-device-plugin/main.go), absent from v0.19.3's types;
//   - v0.20.0's `failRequestsGreaterThanOne` as an optional bool (api/config/v1/replicas.go,
//     config.go): MPS keeps an explicit `false`, where v0.19.3 forces true.
//
// -release v0.19.3 leaves the v0.20.0 part out (the version the simulated nodes run);
// the default is v0.20.0, the release `validate` is measured against.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	spec "github.com/NVIDIA/k8s-device-plugin/api/config/v1"
	cli "github.com/urfave/cli/v2"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

// pluginFlags: the flags of cmd/nvidia-device-plugin/main.go that UpdateFromCLIFlags reads,
// with their defaults and aliases (v0.19.3; environment variables are left out, the chart's
// MPS_ROOT is given as --mps-root). v0.20.0 adds shared-devices-allocation-policy.
func pluginFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "mig-strategy", Value: spec.MigStrategyNone},
		&cli.BoolFlag{Name: "fail-on-init-error", Value: true},
		&cli.StringFlag{Name: "driver-root", Aliases: []string{"nvidia-driver-root"}, Value: "/"},
		&cli.StringFlag{Name: "dev-root", Aliases: []string{"nvidia-dev-root"}},
		&cli.BoolFlag{Name: "pass-device-specs", Value: false},
		&cli.StringSliceFlag{Name: "device-list-strategy", Value: cli.NewStringSlice(string(spec.DeviceListStrategyEnvVar))},
		&cli.StringFlag{Name: "device-id-strategy", Value: spec.DeviceIDStrategyUUID},
		&cli.BoolFlag{Name: "gdrcopy-enabled"},
		&cli.BoolFlag{Name: "gds-enabled"},
		&cli.BoolFlag{Name: "mofed-enabled"},
		&cli.StringFlag{Name: "cdi-annotation-prefix", Value: spec.DefaultCDIAnnotationPrefix},
		&cli.StringFlag{Name: "nvidia-cdi-hook-path", Aliases: []string{"nvidia-ctk-path"}, Value: spec.DefaultNvidiaCTKPath},
		&cli.StringFlag{Name: "driver-root-ctr-path", Aliases: []string{"container-driver-root"}, Value: spec.DefaultContainerDriverRoot},
		&cli.StringFlag{Name: "mps-root"},
		&cli.StringFlag{Name: "device-discovery-strategy", Value: "auto"},
		&cli.IntSliceFlag{Name: "imex-channel-ids"},
		&cli.BoolFlag{Name: "imex-required"},
		&cli.StringFlag{Name: "config-file"},
	}
}

// load is loadConfig (cmd/nvidia-device-plugin/main.go): NewConfig, then the GFD section
// dropped; then DisableResourceNamingInConfig, which the plugin applies before it serves.
func load(file string, mpsRoot bool) (*spec.Config, error) {
	flags := pluginFlags()
	var config *spec.Config
	var loadErr error
	app := &cli.App{
		Name:   "nvidia-device-plugin",
		Flags:  flags,
		Writer: io.Discard, ErrWriter: io.Discard,
		Action: func(c *cli.Context) error {
			config, loadErr = spec.NewConfig(c, flags)
			return nil
		},
	}
	args := []string{"nvidia-device-plugin", "--config-file", file}
	if mpsRoot {
		args = append(args, "--mps-root", "/run/nvidia/mps")
	}
	if err := app.Run(args); err != nil {
		return nil, err
	}
	if loadErr != nil {
		return nil, fmt.Errorf("unable to load config: unable to finalize config: %v", loadErr)
	}
	config.Flags.GFD = nil
	spec.DisableResourceNamingInConfig(config)
	return config, nil
}

// --- v0.20.0's additions, restated (api/config/v1/flags.go, replicas.go, config.go) ---

// newer holds the fields v0.20.0 reads that v0.19.3's types lack or read otherwise. Its
// shape is upstream's (Flags embeds its struct, so sigs.k8s.io/yaml's string hints do not
// reach `plugin`; the sharing blocks' keys are looked up exactly), so the same spellings
// match and the same values fail.
type newer struct {
	Flags   newerFlags   `json:"flags,omitempty"`
	Sharing newerSharing `json:"sharing,omitempty"`
}

type newerFlags struct {
	newerCommandLineFlags
}

type newerCommandLineFlags struct {
	Plugin *newerPluginFlags `json:"plugin,omitempty"`
}

type newerPluginFlags struct {
	SharedDevicesAllocationPolicy *string `json:"sharedDevicesAllocationPolicy"`
}

type newerSharing struct {
	TimeSlicing newerReplicated  `json:"timeSlicing,omitempty"`
	MPS         *newerReplicated `json:"mps,omitempty"`
}

type newerReplicated struct {
	FailRequestsGreaterThanOne *bool
}

func (s *newerReplicated) UnmarshalJSON(b []byte) error {
	raw := map[string]json.RawMessage{}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if value, ok := raw["failRequestsGreaterThanOne"]; ok {
		return json.Unmarshal(value, &s.FailRequestsGreaterThanOne)
	}
	return nil
}

// applyNewer reads the v0.20.0 fields and returns the policy (the flag's default
// "distributed" where unset) or v0.20.0's decode error.
func applyNewer(text []byte) (*newer, string, error) {
	var n newer
	if err := yaml.Unmarshal(text, &n); err != nil {
		return nil, "", fmt.Errorf("unable to load config: unable to finalize config: unable to parse config file: error parsing config file: unmarshal error: %v", err)
	}
	policy := "distributed"
	if n.Flags.Plugin != nil && n.Flags.Plugin.SharedDevicesAllocationPolicy != nil {
		policy = *n.Flags.Plugin.SharedDevicesAllocationPolicy
	}
	return &n, policy, nil
}

// --- cmd/nvidia-device-plugin/main.go validateFlags, on a node with NVML ---

func validateFlags(config *spec.Config, policy string, v020 bool) error {
	if _, err := spec.NewDeviceListStrategies(*config.Flags.Plugin.DeviceListStrategy); err != nil {
		return fmt.Errorf("invalid --device-list-strategy option: %v", err)
	}
	if id := *config.Flags.Plugin.DeviceIDStrategy; id != spec.DeviceIDStrategyUUID && id != spec.DeviceIDStrategyIndex {
		return fmt.Errorf("invalid --device-id-strategy option: %v", id)
	}
	if v020 && policy != "distributed" && policy != "packed" {
		return fmt.Errorf("invalid --shared-devices-allocation-policy option: %s", policy)
	}
	if config.Sharing.SharingStrategy() == spec.SharingStrategyMPS {
		if *config.Flags.MigStrategy == spec.MigStrategyMixed {
			return fmt.Errorf("using --mig-strategy=mixed is not supported with MPS")
		}
		if config.Flags.MpsRoot == nil || *config.Flags.MpsRoot == "" {
			return fmt.Errorf("using MPS requires --mps-root to be specified")
		}
	}
	switch *config.Flags.DeviceDiscoveryStrategy {
	case "auto", "nvml", "tegra":
	default:
		return fmt.Errorf("invalid --device-discovery-strategy option %v", *config.Flags.DeviceDiscoveryStrategy)
	}
	switch *config.Flags.MigStrategy {
	case spec.MigStrategyNone, spec.MigStrategySingle, spec.MigStrategyMixed:
	default:
		return fmt.Errorf("unknown MIG strategy: %v", *config.Flags.MigStrategy)
	}
	if err := spec.AssertChannelIDsValid(config.Imex.ChannelIDs); err != nil {
		return fmt.Errorf("invalid IMEX channel IDs: %w", err)
	}
	return nil
}

// mpsCap: the MPS control daemon refuses more replicas than one MPS server has clients:
// 48 from compute capability 7.5 on, 16 below (cmd/mps-control-daemon/mps/device.go).
func mpsCap(config *spec.Config, limit int) string {
	for _, r := range config.Sharing.MPS.Resources {
		if r.Replicas > limit {
			return fmt.Sprintf("invalid MPS configuration: invalid device maximum allowed replicas exceeded: %d > %d", r.Replicas, limit)
		}
	}
	return ""
}

type verdict struct {
	File            string      `json:"file"`
	Accepted        bool        `json:"accepted"`
	Stage           string      `json:"stage,omitempty"`
	Error           string      `json:"error,omitempty"`
	SharingStrategy string      `json:"sharingStrategy,omitempty"`
	MpsCap16Error   string      `json:"mpsCap16Error,omitempty"`
	Effective       interface{} `json:"effective,omitempty"`
}

// effective is the config the plugin logs at start (json.Marshal of it); for v0.20.0 with
// its policy and its optional failRequestsGreaterThanOne (printed where set, MPS's
// defaulting to true).
func effective(config *spec.Config, n *newer, policy string) (map[string]interface{}, error) {
	text, err := json.Marshal(config)
	if err != nil {
		return nil, err
	}
	var out map[string]interface{}
	if err := json.Unmarshal(text, &out); err != nil {
		return nil, err
	}
	if n == nil {
		return out, nil
	}
	if plugin, ok := out["flags"].(map[string]interface{})["plugin"].(map[string]interface{}); ok {
		plugin["sharedDevicesAllocationPolicy"] = policy
	}
	sharing, _ := out["sharing"].(map[string]interface{})
	if block, ok := sharing["timeSlicing"].(map[string]interface{}); ok {
		delete(block, "failRequestsGreaterThanOne")
		if set := n.Sharing.TimeSlicing.FailRequestsGreaterThanOne; set != nil {
			block["failRequestsGreaterThanOne"] = *set
		}
	}
	if block, ok := sharing["mps"].(map[string]interface{}); ok && n.Sharing.MPS != nil {
		if set := n.Sharing.MPS.FailRequestsGreaterThanOne; set != nil {
			block["failRequestsGreaterThanOne"] = *set
		}
	}
	return out, nil
}

func judge(file string, mpsRoot bool, v020 bool) verdict {
	v := verdict{File: file}
	text, err := os.ReadFile(file)
	if err != nil {
		v.Stage, v.Error = "load", err.Error()
		return v
	}
	config, err := load(file, mpsRoot)
	if err != nil {
		v.Stage, v.Error = "load", err.Error()
		return v
	}
	var n *newer
	policy := "distributed"
	if v020 {
		if n, policy, err = applyNewer(text); err != nil {
			v.Stage, v.Error = "load", err.Error()
			return v
		}
	}
	v.SharingStrategy = string(config.Sharing.SharingStrategy())
	if err := validateFlags(config, policy, v020); err != nil {
		v.Stage, v.Error = "validateFlags", "unable to validate flags: "+err.Error()
		return v
	}
	// The plugin prints the config it runs with; a value JSON cannot hold stops it here.
	out, err := effective(config, n, policy)
	if err != nil {
		v.Stage, v.Error = "marshal", "failed to marshal config to JSON: "+err.Error()
		return v
	}
	v.Effective = out
	if v.SharingStrategy == string(spec.SharingStrategyMPS) {
		v.MpsCap16Error = mpsCap(config, 16)
		if msg := mpsCap(config, 48); msg != "" {
			v.Stage, v.Error = "mps-control-daemon", msg
			return v
		}
	}
	v.Accepted = true
	return v
}

// readYAML is the reading step of parseConfigFrom alone: sigs.k8s.io/yaml turning the file's
// first YAML document into JSON through go.yaml.in/yaml/v2, before any config type is
// involved (the conformance corpus runs through it: tests/differential/conformance.py).
type reading struct {
	File     string          `json:"file"`
	Accepted bool            `json:"accepted"`
	Error    string          `json:"error,omitempty"`
	JSON     json.RawMessage `json:"json,omitempty"`
}

func readYAML(file string) reading {
	r := reading{File: file}
	text, err := os.ReadFile(file)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	out, err := yaml.YAMLToJSON(text)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.Accepted, r.JSON = true, out
	return r
}

func main() {
	noMpsRoot := flag.Bool("no-mps-root", false, "model a deployment without MPS_ROOT")
	onlyRead := flag.Bool("read-yaml", false, "print only what NVIDIA's YAML reading makes of each file (JSON, or its error)")
	release := flag.String("release", "v0.20.0", "v0.20.0 (the newest release), or v0.19.3 (the imported code alone)")
	flag.Parse()
	if *release != "v0.20.0" && *release != "v0.19.3" {
		fmt.Fprintf(os.Stderr, "unknown -release %q: v0.20.0 or v0.19.3\n", *release)
		os.Exit(2)
	}
	// NVIDIA's config code logs its "not yet supported ... Ignoring" warnings through klog.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	out := json.NewEncoder(os.Stdout)
	if *onlyRead {
		for _, file := range flag.Args() {
			if err := out.Encode(readYAML(file)); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(70)
			}
		}
		return
	}
	for _, file := range flag.Args() {
		if err := out.Encode(judge(file, !*noMpsRoot, *release == "v0.20.0")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(70)
		}
	}
}
