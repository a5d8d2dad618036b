// Command device-plugin-oracle reads device-plugin config files the way NVIDIA's
// k8s-device-plugin v0.20.0 does at start and prints one JSON verdict per file.
//
// NVIDIA's module is not served by the Go module proxy this project can reach, so the
// plugin's own packages cannot be imported. What decides almost every verdict is not the
// plugin's code but the libraries it reads with, and those are imported here at the
// plugin's pinned versions: sigs.k8s.io/yaml (YAML 1.1 through go.yaml.in/yaml/v2, then
// encoding/json with its case-insensitive field match and Unicode simple folding) and
// apimachinery's DNS-subdomain check. The plugin's own part (its types, their
// UnmarshalJSON rules, the Helm chart's flag defaults, validateFlags and the MPS replica
// cap) is restated below from v0.20.0 (commit 1b826acc6af3); each rule names where it lives.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// --- api/config/v1/config.go, flags.go, sharing.go, imex.go, resources.go: the types ---

type Config struct {
	Version   string    `json:"version"`
	Flags     Flags     `json:"flags,omitempty"`
	Resources Resources `json:"resources,omitempty"`
	Sharing   Sharing   `json:"sharing,omitempty"`
	Imex      Imex      `json:"imex,omitempty"`
}

// Flags embeds CommandLineFlags as upstream's does: sigs.k8s.io/yaml's type hints (a YAML
// number read into a string field becomes that string) do not reach into an embedded
// struct, so `nvidiaDriverRoot: 5` fails to decode instead of reading "5".
type Flags struct {
	CommandLineFlags
}

type CommandLineFlags struct {
	MigStrategy             *string      `json:"migStrategy"`
	FailOnInitError         *bool        `json:"failOnInitError"`
	MpsRoot                 *string      `json:"mpsRoot,omitempty"`
	NvidiaDriverRoot        *string      `json:"nvidiaDriverRoot,omitempty"`
	NvidiaDevRoot           *string      `json:"nvidiaDevRoot,omitempty"`
	GDRCopyEnabled          *bool        `json:"gdrcopyEnabled"`
	GDSEnabled              *bool        `json:"gdsEnabled"`
	MOFEDEnabled            *bool        `json:"mofedEnabled"`
	UseNodeFeatureAPI       *bool        `json:"useNodeFeatureAPI"`
	DeviceDiscoveryStrategy *string      `json:"deviceDiscoveryStrategy"`
	Plugin                  *PluginFlags `json:"plugin,omitempty"`
	GFD                     *GFDFlags    `json:"gfd,omitempty"`
}

type PluginFlags struct {
	PassDeviceSpecs               *bool               `json:"passDeviceSpecs"`
	DeviceListStrategy            *deviceListStrategy `json:"deviceListStrategy"`
	DeviceIDStrategy              *string             `json:"deviceIDStrategy"`
	CDIAnnotationPrefix           *string             `json:"cdiAnnotationPrefix"`
	NvidiaCTKPath                 *string             `json:"nvidiaCTKPath"`
	ContainerDriverRoot           *string             `json:"containerDriverRoot"`
	SharedDevicesAllocationPolicy *string             `json:"sharedDevicesAllocationPolicy"`
}

type GFDFlags struct {
	Oneshot         *bool     `json:"oneshot"`
	NoTimestamp     *bool     `json:"noTimestamp"`
	SleepInterval   *Duration `json:"sleepInterval"`
	OutputFile      *string   `json:"outputFile"`
	MachineTypeFile *string   `json:"machineTypeFile"`
}

// deviceListStrategy: one string or a list of strings (flags.go).
type deviceListStrategy []string

func (f *deviceListStrategy) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*f = []string{one}
		return nil
	}
	var many []string
	if json.Unmarshal(b, &many) == nil {
		*f = many
		return nil
	}
	return fmt.Errorf("invalid deviceListStrategy: %v", string(b))
}

// Duration: a number of nanoseconds, a Go duration string, or "infinite" (duration.go).
type Duration time.Duration

func (d *Duration) UnmarshalJSON(b []byte) error {
	var v interface{}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch value := v.(type) {
	case float64:
		*d = Duration(time.Duration(value))
		return nil
	case string:
		if value == "infinite" {
			*d = Duration(math.MaxInt64)
			return nil
		}
		parsed, err := time.ParseDuration(value)
		if err != nil {
			return err
		}
		*d = Duration(parsed)
		return nil
	}
	return fmt.Errorf("invalid duration")
}

func (d Duration) MarshalJSON() ([]byte, error) {
	if time.Duration(d) == math.MaxInt64 {
		return json.Marshal("infinite")
	}
	return json.Marshal(time.Duration(d).String())
}

type Imex struct {
	ChannelIDs []int `json:"channelIDs,omitempty"`
	Required   bool  `json:"required,omitempty"`
}

type Resources struct {
	GPUs []Resource `json:"gpus"`
	MIGs []Resource `json:"mig,omitempty"`
}

type Resource struct {
	Pattern string       `json:"pattern"`
	Name    ResourceName `json:"name"`
}

// A resource entry needs both fields (resources.go).
func (r *Resource) UnmarshalJSON(b []byte) error {
	raw := map[string]json.RawMessage{}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	pattern, hasPattern := raw["pattern"]
	name, hasName := raw["name"]
	if !hasPattern {
		return fmt.Errorf("resources must have a 'pattern' field set")
	}
	if !hasName {
		return fmt.Errorf("resources must have a 'name' field set")
	}
	if err := json.Unmarshal(pattern, &r.Pattern); err != nil {
		return err
	}
	return json.Unmarshal(name, &r.Name)
}

// ResourceName: prefixed with nvidia.com/, at most 63 characters, a DNS subdomain after
// the prefix (resources.go NewResourceName).
type ResourceName string

func (r *ResourceName) UnmarshalJSON(b []byte) error {
	var raw string
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if !strings.HasPrefix(raw, "nvidia.com/") {
		raw = "nvidia.com/" + raw
	}
	if len(raw) > 63 {
		return fmt.Errorf("fully-qualified resource name must be %v characters or less: %v", 63, raw)
	}
	name := raw
	if split := strings.SplitN(raw, "/", 2); len(split) == 2 {
		name = split[1]
	}
	if invalid := validation.IsDNS1123Subdomain(name); len(invalid) != 0 {
		return fmt.Errorf("incorrect format for resource name '%v': %v", raw, invalid)
	}
	*r = ResourceName(raw)
	return nil
}

func (r ResourceName) sharedRename() ResourceName { return r + ".shared" }

type Sharing struct {
	TimeSlicing ReplicatedResources  `json:"timeSlicing,omitempty"`
	MPS         *ReplicatedResources `json:"mps,omitempty"`
}

// --- api/config/v1/replicas.go ---

type ReplicatedResources struct {
	RenameByDefault            bool                 `json:"renameByDefault,omitempty"`
	FailRequestsGreaterThanOne *bool                `json:"failRequestsGreaterThanOne,omitempty"`
	Resources                  []ReplicatedResource `json:"resources,omitempty"`
}

// The keys of a sharing block are looked up exactly (a map, not a struct): `Resources`
// is not `resources`.
func (s *ReplicatedResources) UnmarshalJSON(b []byte) error {
	raw := map[string]json.RawMessage{}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	renameByDefault, ok := raw["renameByDefault"]
	if !ok {
		renameByDefault = []byte(`false`)
	}
	if err := json.Unmarshal(renameByDefault, &s.RenameByDefault); err != nil {
		return err
	}
	if fail, ok := raw["failRequestsGreaterThanOne"]; ok {
		if err := json.Unmarshal(fail, &s.FailRequestsGreaterThanOne); err != nil {
			return err
		}
	}
	resources, ok := raw["resources"]
	if !ok {
		return fmt.Errorf("no resources specified")
	}
	if err := json.Unmarshal(resources, &s.Resources); err != nil {
		return err
	}
	if len(s.Resources) == 0 {
		return fmt.Errorf("no resources specified")
	}
	for i, r := range s.Resources {
		if s.RenameByDefault && r.Rename == "" {
			s.Resources[i].Rename = r.Name.sharedRename()
		}
	}
	return nil
}

func (s *ReplicatedResources) replicated() bool {
	if s == nil {
		return false
	}
	for _, r := range s.Resources {
		if r.Replicas > 1 {
			return true
		}
	}
	return false
}

type ReplicatedResource struct {
	Name     ResourceName      `json:"name"`
	Rename   ResourceName      `json:"rename,omitempty"`
	Devices  ReplicatedDevices `json:"devices"`
	Replicas int               `json:"replicas"`
}

func (s *ReplicatedResource) UnmarshalJSON(b []byte) error {
	raw := map[string]json.RawMessage{}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	name, ok := raw["name"]
	if !ok {
		return fmt.Errorf("no resource name specified")
	}
	if err := json.Unmarshal(name, &s.Name); err != nil {
		return err
	}
	devices, ok := raw["devices"]
	if !ok {
		devices = []byte(`"all"`)
	}
	if err := json.Unmarshal(devices, &s.Devices); err != nil {
		return err
	}
	replicas, ok := raw["replicas"]
	if !ok {
		return fmt.Errorf("no replicas specified")
	}
	if err := json.Unmarshal(replicas, &s.Replicas); err != nil {
		return err
	}
	if s.Replicas < 2 {
		return fmt.Errorf("number of replicas must be >= 2")
	}
	if rename, ok := raw["rename"]; ok {
		return json.Unmarshal(rename, &s.Rename)
	}
	return nil
}

// ReplicatedDevices: "all", a positive count, or a list of GPU indices, MIG indices and
// UUIDs.
type ReplicatedDevices struct {
	All   bool
	Count int
	List  []string
}

func (s *ReplicatedDevices) UnmarshalJSON(b []byte) error {
	var str string
	if json.Unmarshal(b, &str) == nil {
		if str != "all" {
			return fmt.Errorf("devices set as '%v' but the only valid string input is 'all'", str)
		}
		s.All = true
		return nil
	}
	var count int
	if json.Unmarshal(b, &count) == nil {
		if count <= 0 {
			return fmt.Errorf("devices set as '%v' but a count of devices must be > 0", count)
		}
		s.Count = count
		return nil
	}
	var items []json.RawMessage
	if json.Unmarshal(b, &items) == nil {
		list := make([]string, len(items))
		for i, raw := range items {
			var index uint64
			if json.Unmarshal(raw, &index) == nil {
				list[i] = strconv.FormatUint(index, 10)
				continue
			}
			var item string
			if json.Unmarshal(raw, &item) == nil && deviceRef(item) {
				list[i] = item
				continue
			}
			return fmt.Errorf("unsupported type for device in devices list: %v, %T", item, item)
		}
		s.List = list
		return nil
	}
	return fmt.Errorf("unrecognized type for devices spec: %v", string(b))
}

func (s ReplicatedDevices) MarshalJSON() ([]byte, error) {
	switch {
	case s.All:
		return json.Marshal("all")
	case s.Count > 0:
		return json.Marshal(s.Count)
	case s.List != nil:
		return json.Marshal(s.List)
	}
	return nil, fmt.Errorf("unmarshallable ReplicatedDevices struct: %v", s)
}

func isUint(s string) bool {
	_, err := strconv.ParseUint(s, 10, 0)
	return err == nil
}

func gpuUUID(s string) bool {
	if !strings.HasPrefix(s, "GPU-") {
		return false
	}
	_, err := uuid.Parse(strings.TrimPrefix(s, "GPU-"))
	return err == nil
}

func migUUID(s string) bool {
	if !strings.HasPrefix(s, "MIG-") {
		return false
	}
	suffix := strings.TrimPrefix(s, "MIG-")
	if _, err := uuid.Parse(suffix); err == nil {
		return true
	}
	split := strings.SplitN(suffix, "/", 3)
	return len(split) == 3 && gpuUUID(split[0]) && isUint(split[1]) && isUint(split[2])
}

func deviceRef(s string) bool {
	if isUint(s) || gpuUUID(s) || migUUID(s) {
		return true
	}
	split := strings.SplitN(s, ":", 2)
	return len(split) == 2 && isUint(split[0]) && isUint(split[1])
}

// --- the plugin's start: cmd/nvidia-device-plugin/main.go ---

type verdict struct {
	File            string      `json:"file"`
	Accepted        bool        `json:"accepted"`
	Stage           string      `json:"stage,omitempty"`
	Error           string      `json:"error,omitempty"`
	SharingStrategy string      `json:"sharingStrategy,omitempty"`
	MpsCap16Error   string      `json:"mpsCap16Error,omitempty"`
	Effective       interface{} `json:"effective,omitempty"`
}

func ptr[T any](v T) *T { return &v }

// withDefault mirrors updateFromCLIFlag: an unset config field takes the flag's default;
// a flag set in the environment (the Helm chart sets MPS_ROOT) overrides the file.
func withDefault[T any](field **T, value T, fromEnv bool) {
	if fromEnv || *field == nil {
		*field = ptr(value)
	}
}

// load is loadConfig: parseConfigFrom, NewConfig's flag defaults (no environment but the
// chart's MPS_ROOT), then the GFD section dropped and resource naming disabled.
func load(text []byte, mpsRoot bool) (*Config, error) {
	var config Config
	if err := yaml.Unmarshal(text, &config); err != nil {
		return nil, fmt.Errorf("unable to load config: unable to finalize config: unable to parse config file: error parsing config file: unmarshal error: %v", err)
	}
	if config.Version == "" {
		config.Version = "v1"
	}
	if config.Version != "v1" {
		return nil, fmt.Errorf("unable to load config: unable to finalize config: unable to parse config file: error parsing config file: unknown version: %v", config.Version)
	}
	f := &config.Flags
	withDefault(&f.MigStrategy, "none", false)
	withDefault(&f.FailOnInitError, true, false)
	if mpsRoot {
		withDefault(&f.MpsRoot, "/run/nvidia/mps", true)
	} else {
		withDefault(&f.MpsRoot, "", false)
	}
	withDefault(&f.NvidiaDriverRoot, "/", false)
	withDefault(&f.NvidiaDevRoot, "", false)
	withDefault(&f.GDRCopyEnabled, false, false)
	withDefault(&f.GDSEnabled, false, false)
	withDefault(&f.MOFEDEnabled, false, false)
	withDefault(&f.DeviceDiscoveryStrategy, "auto", false)
	if f.Plugin == nil {
		f.Plugin = &PluginFlags{}
	}
	p := f.Plugin
	withDefault(&p.PassDeviceSpecs, false, false)
	withDefault(&p.DeviceListStrategy, deviceListStrategy{"envvar"}, false)
	withDefault(&p.DeviceIDStrategy, "uuid", false)
	withDefault(&p.CDIAnnotationPrefix, "cdi.k8s.io/", false)
	withDefault(&p.NvidiaCTKPath, "/usr/bin/nvidia-ctk", false)
	withDefault(&p.ContainerDriverRoot, "/driver-root", false)
	withDefault(&p.SharedDevicesAllocationPolicy, "distributed", false)
	if *f.NvidiaDevRoot == "" {
		f.NvidiaDevRoot = f.NvidiaDriverRoot
	}
	if config.Sharing.MPS != nil && config.Sharing.MPS.FailRequestsGreaterThanOne == nil {
		config.Sharing.MPS.FailRequestsGreaterThanOne = ptr(true)
	}
	f.GFD = nil
	config.Resources.GPUs, config.Resources.MIGs = nil, nil
	config.Sharing.TimeSlicing.disableRenaming()
	config.Sharing.MPS.disableRenaming()
	return &config, nil
}

// disableRenaming: `rename` and `devices` are validated, then reset (DisableResourceNamingInConfig).
func (s *ReplicatedResources) disableRenaming() {
	if s == nil {
		return
	}
	for i, r := range s.Resources {
		if s.RenameByDefault {
			s.Resources[i].Rename = r.Name.sharedRename()
		} else {
			s.Resources[i].Rename = ""
		}
		s.Resources[i].Devices = ReplicatedDevices{All: true}
	}
}

func (s *Sharing) strategy() string {
	if s.MPS != nil && s.MPS.replicated() {
		return "mps"
	}
	if s.TimeSlicing.replicated() {
		return "time-slicing"
	}
	return "none"
}

var errInvalidImex = errors.New("invalid IMEX config")

// validateFlags, on a node with NVML (CDI strategies allowed).
func validateFlags(config *Config) error {
	known := map[string]bool{"envvar": true, "volume-mounts": true, "cdi-annotations": true, "cdi-cri": true}
	for _, s := range *config.Flags.Plugin.DeviceListStrategy {
		if !known[s] {
			return fmt.Errorf("invalid --device-list-strategy option: invalid strategy: %v", s)
		}
	}
	if id := *config.Flags.Plugin.DeviceIDStrategy; id != "uuid" && id != "index" {
		return fmt.Errorf("invalid --device-id-strategy option: %v", id)
	}
	if policy := *config.Flags.Plugin.SharedDevicesAllocationPolicy; policy != "distributed" && policy != "packed" {
		return fmt.Errorf("invalid --shared-devices-allocation-policy option: %s", policy)
	}
	if config.Sharing.strategy() == "mps" {
		if *config.Flags.MigStrategy == "mixed" {
			return fmt.Errorf("using --mig-strategy=mixed is not supported with MPS")
		}
		if *config.Flags.MpsRoot == "" {
			return fmt.Errorf("using MPS requires --mps-root to be specified")
		}
	}
	switch *config.Flags.DeviceDiscoveryStrategy {
	case "auto", "nvml", "tegra":
	default:
		return fmt.Errorf("invalid --device-discovery-strategy option %v", *config.Flags.DeviceDiscoveryStrategy)
	}
	switch *config.Flags.MigStrategy {
	case "none", "single", "mixed":
	default:
		return fmt.Errorf("unknown MIG strategy: %v", *config.Flags.MigStrategy)
	}
	ids := config.Imex.ChannelIDs
	if !(len(ids) == 0 || (len(ids) == 1 && ids[0] == 0)) {
		return fmt.Errorf("invalid IMEX channel IDs: %w: channelIDs must be [] or [0]; found %v", errInvalidImex, ids)
	}
	return nil
}

// mpsCap: the MPS control daemon refuses more replicas than one MPS server has clients:
// 48 from compute capability 7.5 on, 16 below (cmd/mps-control-daemon/mps/device.go).
func mpsCap(config *Config, limit int) string {
	for _, r := range config.Sharing.MPS.Resources {
		if r.Replicas > limit {
			return fmt.Sprintf("invalid MPS configuration: invalid device maximum allowed replicas exceeded: %d > %d", r.Replicas, limit)
		}
	}
	return ""
}

func judge(file string, mpsRoot bool) verdict {
	v := verdict{File: file}
	text, err := os.ReadFile(file)
	if err != nil {
		v.Stage, v.Error = "load", err.Error()
		return v
	}
	config, err := load(text, mpsRoot)
	if err != nil {
		v.Stage, v.Error = "load", err.Error()
		return v
	}
	v.SharingStrategy = config.Sharing.strategy()
	if err := validateFlags(config); err != nil {
		v.Stage, v.Error = "validateFlags", "unable to validate flags: "+err.Error()
		return v
	}
	// The plugin prints the config it runs with; a value JSON cannot hold stops it here.
	effective, err := json.Marshal(config)
	if err != nil {
		v.Stage, v.Error = "marshal", "failed to marshal config to JSON: "+err.Error()
		return v
	}
	if err := json.Unmarshal(effective, &v.Effective); err != nil {
		v.Stage, v.Error = "marshal", err.Error()
		return v
	}
	if v.SharingStrategy == "mps" {
		v.MpsCap16Error = mpsCap(config, 16)
		if msg := mpsCap(config, 48); msg != "" {
			v.Stage, v.Error = "mps-control-daemon", msg
			return v
		}
	}
	v.Accepted = true
	return v
}

func main() {
	noMpsRoot := flag.Bool("no-mps-root", false, "model a deployment without MPS_ROOT")
	flag.Parse()
	out := json.NewEncoder(os.Stdout)
	for _, file := range flag.Args() {
		if err := out.Encode(judge(file, !*noMpsRoot)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(70)
		}
	}
}
