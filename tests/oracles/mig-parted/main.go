// Command mig-parted-oracle reads mig-parted config files the way nvidia-mig-parted v0.15.0
// does (`assert`/`apply`: ParseConfigFile, then the selected config) and prints one JSON
// verdict per file. With -match, it also says which PCI device IDs each device-filter
// entry matches, as mig-parted's pkg/types DeviceID does.
//
// The MIG profile names are checked by NVIDIA's own go-nvlib (the version mig-parted pins),
// and the file is read by sigs.k8s.io/yaml at mig-parted's pinned version. NVIDIA's
// mig-parted module itself is not served by the Go module proxy this project can reach, so
// its api/spec/v1 decoding rules (required fields, "all" or a list of ints, the
// mig-enabled/mig-devices pairing) and pkg/types device-filter parsing (strconv.ParseUint
// with base 0: 0x/0o/0b prefixes, underscores, a leading 0 meaning octal) are restated here
// from v0.15.0; each rule names where it lives.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	nvdev "github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"sigs.k8s.io/yaml"
)

var profiles = nvdev.New(nil)

// MigConfigSpec is api/spec/v1's entry of one named config.
type MigConfigSpec struct {
	DeviceFilter interface{}    `json:"device-filter,omitempty"`
	Devices      interface{}    `json:"devices"`
	MigEnabled   bool           `json:"mig-enabled"`
	MigDevices   map[string]int `json:"mig-devices"`
}

type Spec struct {
	Version    string                     `json:"version"`
	MigConfigs map[string][]MigConfigSpec `json:"mig-configs,omitempty"`
}

// Spec.UnmarshalJSON: `version` must be v1, the only other key is `mig-configs`, which needs
// at least one config, each with at least one entry.
func (s *Spec) UnmarshalJSON(b []byte) error {
	raw := map[string]json.RawMessage{}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	version, ok := raw["version"]
	if !ok && len(raw) > 0 {
		return fmt.Errorf("unable to parse with missing 'version' field")
	}
	result := Spec{}
	if ok {
		if err := json.Unmarshal(version, &result.Version); err != nil {
			return err
		}
	}
	if result.Version != "v1" {
		return fmt.Errorf("unknown version: %v", result.Version)
	}
	delete(raw, "version")
	for k, v := range raw {
		if k != "mig-configs" {
			return fmt.Errorf("unexpected field: %v", k)
		}
		configs := map[string][]MigConfigSpec{}
		if err := json.Unmarshal(v, &configs); err != nil {
			return err
		}
		if len(configs) == 0 {
			return fmt.Errorf("at least one entry in '%v' is required", k)
		}
		for name, entries := range configs {
			if len(entries) == 0 {
				return fmt.Errorf("at least one entry in '%v' is required", name)
			}
		}
		result.MigConfigs = configs
	}
	*s = result
	return nil
}

// MigConfigSpec.UnmarshalJSON: `devices` and `mig-enabled` are required, keys are exact.
func (s *MigConfigSpec) UnmarshalJSON(b []byte) error {
	raw := map[string]json.RawMessage{}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	for _, required := range []string{"devices", "mig-enabled"} {
		if _, ok := raw[required]; !ok {
			return fmt.Errorf("missing required field: %v", required)
		}
	}
	result := MigConfigSpec{}
	for k, v := range raw {
		switch k {
		case "device-filter":
			var one string
			err1 := json.Unmarshal(v, &one)
			if err1 == nil {
				result.DeviceFilter = one
				break
			}
			var many []string
			err2 := json.Unmarshal(v, &many)
			if err2 == nil {
				result.DeviceFilter = many
				break
			}
			return fmt.Errorf("(%v, %v)", err1, err2)
		case "devices":
			var one string
			err1 := json.Unmarshal(v, &one)
			if err1 == nil {
				if one != "all" {
					return fmt.Errorf("invalid string input for '%v': %v", k, one)
				}
				result.Devices = one
				break
			}
			var indices []int
			err2 := json.Unmarshal(v, &indices)
			if err2 == nil {
				result.Devices = indices
				break
			}
			return fmt.Errorf("(%v, %v)", err1, err2)
		case "mig-enabled":
			if err := json.Unmarshal(v, &result.MigEnabled); err != nil {
				return err
			}
		case "mig-devices":
			devices := map[string]int{}
			if err := json.Unmarshal(v, &devices); err != nil {
				return err
			}
			if err := assertValidFormat(devices); err != nil {
				return fmt.Errorf("error validating values in '%v' field: %v", k, err)
			}
			result.MigDevices = devices
		default:
			return fmt.Errorf("unexpected field: %v", k)
		}
	}
	if result.MigEnabled && result.MigDevices == nil {
		return fmt.Errorf("missing required field 'mig-devices' when 'mig-enabled' is true")
	}
	if !result.MigEnabled && len(result.MigDevices) != 0 {
		return fmt.Errorf("MIG devices included when 'mig-enabled' is false")
	}
	*s = result
	return nil
}

// assertValidFormat is pkg/types MigConfig.AssertValidFormat: each name a MIG profile (as
// go-nvlib parses it), no negative count, and not every count zero.
func assertValidFormat(m map[string]int) error {
	if len(m) == 0 {
		return nil
	}
	for k, v := range m {
		if err := profiles.AssertValidMigProfileFormat(k); err != nil {
			return fmt.Errorf("invalid format for '%v': %v", k, err)
		}
		if v < 0 {
			return fmt.Errorf("invalid count for '%v': %v", v, nil)
		}
	}
	for _, v := range m {
		if v > 0 {
			return nil
		}
	}
	return fmt.Errorf("all counts for all MigProfiles are 0")
}

// deviceID is pkg/types NewDeviceIDFromString: `<devicevendor>[:<subdevicevendor>]`, each
// half parsed by strconv.ParseUint(s, 0, 32).
type deviceID struct {
	Device, Vendor, SubDevice, SubVendor uint16
	HasSubsystem                         bool
}

func parseDeviceID(s string) (deviceID, error) {
	parts := strings.Split(s, ":")
	if len(parts) > 2 {
		return deviceID{}, fmt.Errorf("invalid DeviceID format '%v'", s)
	}
	raw, err := strconv.ParseUint(parts[0], 0, 32)
	if err != nil {
		return deviceID{}, fmt.Errorf("unable to create DeviceID from string '%v': %v", s, err)
	}
	id := deviceID{Device: uint16(raw >> 16), Vendor: uint16(raw & 0xFFFF)}
	if len(parts) == 2 {
		sub, err := strconv.ParseUint(parts[1], 0, 32)
		if err != nil {
			return deviceID{}, fmt.Errorf("unable to create Subsystem from string '%v': %v", s, err)
		}
		id.SubDevice, id.SubVendor, id.HasSubsystem = uint16(sub>>16), uint16(sub&0xFFFF), true
	}
	return id, nil
}

// matches is MigConfigSpec.MatchesDeviceFilter for one GPU: a filter that does not parse
// is the zero DeviceID, which matches no real GPU.
func (s MigConfigSpec) matches(hardware deviceID) bool {
	var filters []string
	switch f := s.DeviceFilter.(type) {
	case string:
		if f != "" {
			filters = append(filters, f)
		}
	case []string:
		filters = f
	}
	if len(filters) == 0 {
		return true
	}
	for _, f := range filters {
		id, _ := parseDeviceID(f)
		if id.Device == hardware.Device && id.Vendor == hardware.Vendor &&
			(!id.HasSubsystem || (id.SubDevice == hardware.SubDevice && id.SubVendor == hardware.SubVendor)) {
			return true
		}
	}
	return false
}

type verdict struct {
	File        string              `json:"file"`
	Accepted    bool                `json:"accepted"`
	Error       string              `json:"error,omitempty"`
	Configs     []string            `json:"configs"`
	Selected    string              `json:"selected,omitempty"`
	SelectError string              `json:"selectError,omitempty"`
	Spec        *Spec               `json:"spec,omitempty"`
	Matches     map[string][]string `json:"matches,omitempty"` // config -> entry index -> matched IDs
}

func judge(file string, hardware []string) verdict {
	v := verdict{File: file, Configs: []string{}}
	text, err := os.ReadFile(file)
	if err != nil {
		v.Error = fmt.Sprintf("error parsing config file: read error: %v", err)
		return v
	}
	var spec Spec
	if err := yaml.Unmarshal(text, &spec); err != nil {
		v.Error = fmt.Sprintf("error parsing config file: unmarshal error: %v", err)
		return v
	}
	v.Accepted, v.Spec = true, &spec
	for name := range spec.MigConfigs {
		v.Configs = append(v.Configs, name)
	}
	sort.Strings(v.Configs)
	// GetSelectedMigConfig without --selected-config: only a file with one config selects.
	switch len(v.Configs) {
	case 0:
		v.SelectError = "error selecting MIG config: selected mig-config not present: "
	case 1:
		v.Selected = v.Configs[0]
	default:
		v.SelectError = "error selecting MIG config: missing required flag 'selected-config' when more than one config available"
	}
	if len(hardware) > 0 {
		v.Matches = map[string][]string{}
		for _, name := range v.Configs {
			for i, entry := range spec.MigConfigs[name] {
				key := fmt.Sprintf("%s/%d", name, i)
				v.Matches[key] = []string{}
				for _, h := range hardware {
					id, err := parseDeviceID(h)
					if err == nil && entry.matches(id) {
						v.Matches[key] = append(v.Matches[key], h)
					}
				}
			}
		}
	}
	return v
}

func main() {
	match := flag.String("match", "", "comma-separated PCI device IDs (0xDDDDVVVV) to match device filters against")
	flag.Parse()
	var hardware []string
	if *match != "" {
		hardware = strings.Split(*match, ",")
	}
	out := json.NewEncoder(os.Stdout)
	for _, file := range flag.Args() {
		if err := out.Encode(judge(file, hardware)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(70)
		}
	}
}
