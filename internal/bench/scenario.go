package bench

import (
	"fmt"
	"strings"
)

// Scenario is one client workload, run the same way against every target.
type Scenario struct {
	// Name is how reports and results.json call it (oltp_point_select).
	Name string `json:"name"`
	// Short is the name accepted by --scenarios besides Name.
	Short string `json:"short"`
	// Workload is the sysbench test: a bundled one (oltp_point_select) or
	// the path of a Lua script.
	Workload string `json:"workload"`
	// Args are extra sysbench options of the workload (--skip_trx=on).
	Args []string `json:"args,omitempty"`
	// Threads is the number of client threads; 0 takes Options.Threads.
	Threads int `json:"threads"`
	// Default scenarios run when --scenarios is not given.
	Default bool `json:"-"`
	// Description says what the scenario measures, for the report.
	Description string `json:"description"`
}

// Scenarios are the workloads vigil bench knows, defaults first. It is a
// function so no caller can change the list another caller sees.
func Scenarios() []Scenario {
	return []Scenario{
		{
			Name: "oltp_point_select", Short: "point_select", Workload: "oltp_point_select",
			Default:     true,
			Description: "one primary-key SELECT per transaction, outside transactions: Vigil sends it to a replica",
		},
		{
			Name: "oltp_read_only", Short: "read_only", Workload: "oltp_read_only",
			Args:        []string{"--skip_trx=on"},
			Default:     true,
			Description: "14 SELECTs (points and ranges) per event without BEGIN/COMMIT: Vigil sends them to replicas",
		},
		{
			Name: "oltp_read_only_trx", Short: "read_only_trx", Workload: "oltp_read_only",
			Description: "the same reads inside BEGIN/COMMIT: Vigil keeps them on the primary",
		},
		{
			Name: "oltp_read_write", Short: "read_write", Workload: "oltp_read_write",
			Description: "reads and writes in transactions: everything goes to the primary",
		},
	}
}

// DefaultScenarios are the scenarios run without --scenarios.
func DefaultScenarios() []Scenario {
	var out []Scenario
	for _, s := range Scenarios() {
		if s.Default {
			out = append(out, s)
		}
	}
	return out
}

// ParseScenarios resolves a comma-separated list of scenario names (Name
// or Short) in the order given; an empty list means the defaults.
func ParseScenarios(list string) ([]Scenario, error) {
	if strings.TrimSpace(list) == "" {
		return DefaultScenarios(), nil
	}
	known := Scenarios()
	var out []Scenario
	seen := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		var found *Scenario
		for i := range known {
			if known[i].Name == name || known[i].Short == name {
				found = &known[i]
				break
			}
		}
		if found == nil {
			var names []string
			for _, k := range known {
				names = append(names, k.Short)
			}
			return nil, fmt.Errorf("unknown scenario %q (known: %s)", name, strings.Join(names, ", "))
		}
		if !seen[found.Name] {
			seen[found.Name] = true
			out = append(out, *found)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no scenario in %q", list)
	}
	return out, nil
}
