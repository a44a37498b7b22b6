package bench

import (
	"fmt"
	"strings"
)

// Kind says which client runs a scenario and how its targets are set up.
type Kind string

const (
	// KindSysbench is a bundled sysbench OLTP workload, run at every
	// thread count of the matrix against direct, vigil and haproxy.
	KindSysbench Kind = "sysbench"
	// KindChurn is the Go load generator opening a connection per event:
	// connect, SELECT 1, disconnect.
	KindChurn Kind = "churn"
	// KindManyClients holds many idle connections open while a few
	// workers run point selects.
	KindManyClients Kind = "many_clients"
	// KindRules is oltp_point_select against Vigils with 0, 100 and 1,000
	// query rules.
	KindRules Kind = "rules"
	// KindFailover is kill -9 of the primary and a switchover under
	// writes, on a semi-sync sandbox of its own.
	KindFailover Kind = "failover"
)

// Scenario is one client workload, run the same way against every target.
type Scenario struct {
	// Name is how reports and results.json call it (oltp_point_select).
	Name string `json:"name"`
	// Short is the name accepted by --scenarios besides Name.
	Short string `json:"short"`
	// Kind defaults to KindSysbench.
	Kind Kind `json:"kind,omitempty"`
	// Workload is the sysbench test: a bundled one (oltp_point_select) or
	// the path of a Lua script.
	Workload string `json:"workload,omitempty"`
	// Args are extra sysbench options of the workload (--skip_trx=on).
	Args []string `json:"args,omitempty"`
	// Threads fixes the client threads; 0 runs the scenario at every
	// thread count of Options.Threads.
	Threads int `json:"threads"`
	// Default scenarios run when --scenarios is not given; Quick ones
	// with --quick.
	Default bool `json:"-"`
	Quick   bool `json:"-"`
	// Description says what the scenario measures, for the report.
	Description string `json:"description"`
}

// kind is Kind with the default filled in (results of schema 1 have none).
func (s Scenario) kind() Kind {
	if s.Kind == "" {
		return KindSysbench
	}
	return s.Kind
}

// Scenarios are the workloads vigil-bench knows, in the order a default
// bench runs them: reads before writes (the writes make the replicas lag),
// failover last (it kills servers). It is a function so no caller can
// change the list another caller sees.
func Scenarios() []Scenario {
	return []Scenario{
		{
			Name: "oltp_point_select", Short: "point_select", Workload: "oltp_point_select",
			Default: true, Quick: true,
			Description: "one primary-key SELECT per event, outside transactions: Vigil sends it to a replica",
		},
		{
			Name: "oltp_read_only", Short: "read_only", Workload: "oltp_read_only",
			Args:    []string{"--skip_trx=on"},
			Default: true, Quick: true,
			Description: "14 SELECTs (points and ranges) per event without BEGIN/COMMIT: Vigil sends them to replicas",
		},
		{
			Name: "oltp_read_only_trx", Short: "read_only_trx", Workload: "oltp_read_only",
			Description: "the same reads inside BEGIN/COMMIT: Vigil keeps them on the primary",
		},
		{
			Name: "oltp_read_write", Short: "read_write", Workload: "oltp_read_write",
			Default:     true,
			Description: "reads and writes in transactions: everything goes to the primary",
		},
		{
			Name: "oltp_insert", Short: "insert", Workload: "oltp_insert",
			Default:     true,
			Description: "one INSERT per event, autocommit: the primary",
		},
		{
			Name: "conn_churn", Short: "churn", Kind: KindChurn, Threads: 64,
			Default: true, Quick: true,
			Description: "each event connects, runs SELECT 1 and disconnects (Go client): connections per second",
		},
		{
			Name: "many_clients", Short: "clients", Kind: KindManyClients, Threads: 32,
			Default: true, Quick: true,
			Description: "1,000 and 10,000 idle connections held open while 32 workers run point selects (Go client)",
		},
		{
			Name: "rules_scaling", Short: "rules", Kind: KindRules, Workload: "oltp_point_select", Threads: 32,
			Default:     true,
			Description: "oltp_point_select through Vigils with 0, 100 and 1,000 query rules that do not match",
		},
		{
			Name: "failover", Short: "failover", Kind: KindFailover,
			Default: true, Quick: true,
			Description: "kill -9 of the primary under writes → first acknowledged write; switchover → write pause (own semi-sync sandbox)",
		},
	}
}

// DefaultScenarios are the scenarios run without --scenarios.
func DefaultScenarios() []Scenario {
	return filterScenarios(func(s Scenario) bool { return s.Default })
}

// QuickScenarios are the scenarios run with --quick and no --scenarios.
func QuickScenarios() []Scenario {
	return filterScenarios(func(s Scenario) bool { return s.Quick })
}

func filterScenarios(keep func(Scenario) bool) []Scenario {
	var out []Scenario
	for _, s := range Scenarios() {
		if keep(s) {
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
