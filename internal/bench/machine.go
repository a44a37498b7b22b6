package bench

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// Machine is what the numbers were measured on.
type Machine struct {
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpu_model"`
	Kernel   string `json:"kernel"`
	Hostname string `json:"hostname"`
	// Load averages (1 minute) when the bench started and ended: other
	// work on a shared machine moves the numbers.
	LoadStart string `json:"loadavg_start"`
	LoadEnd   string `json:"loadavg_end"`
	GoVersion string `json:"go_version"`
	Mariadbd  string `json:"mariadbd"`
	Sysbench  string `json:"sysbench"`
	HAProxy   string `json:"haproxy"`
	Vigil     string `json:"vigil"`
}

// ParseCPUModel is the first "model name" of /proc/cpuinfo.
func ParseCPUModel(cpuinfo string) string {
	sc := bufio.NewScanner(strings.NewReader(cpuinfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// DescribeMachine gathers Machine; what cannot be found says "unknown".
func DescribeMachine(ctx context.Context, vigilVersion string) Machine {
	m := Machine{
		CPUs:      runtime.NumCPU(),
		CPUModel:  "unknown",
		Kernel:    strings.TrimSpace(readFileOr("/proc/sys/kernel/osrelease", "unknown")),
		LoadStart: loadAvg(),
		GoVersion: runtime.Version(),
		Vigil:     vigilVersion,
	}
	m.Hostname, _ = os.Hostname()
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPUModel = ParseCPUModel(string(data))
	}
	m.Mariadbd = commandVersion(ctx, "mariadbd", "--version")
	m.Sysbench = commandVersion(ctx, "sysbench", "--version")
	m.HAProxy = commandVersion(ctx, "haproxy", "-v")
	return m
}

// loadAvg is the first three fields of /proc/loadavg.
func loadAvg() string {
	f := strings.Fields(readFileOr("/proc/loadavg", ""))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func readFileOr(path, def string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return def
	}
	return string(data)
}

// commandVersion is the first line a program prints for its version flag.
func commandVersion(ctx context.Context, prog string, args ...string) string {
	path, err := lookProgram(prog)
	if err != nil {
		return "not found"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
	if err != nil && len(out) == 0 {
		return "unknown (" + err.Error() + ")"
	}
	return VersionLine(string(out))
}

// VersionLine is the first line of a version output without the noise:
// the program's path ("/usr/sbin/mariadbd Ver ...") and a trailing URL
// ("HAProxy version 2.6.12 ... - https://haproxy.org/").
func VersionLine(out string) string {
	line := FirstLine(out)
	if f := strings.Fields(line); len(f) > 0 && strings.Contains(f[0], "/") {
		f[0] = f[0][strings.LastIndexByte(f[0], '/')+1:]
		line = strings.Join(f, " ")
	}
	if i := strings.Index(line, " - http"); i > 0 {
		line = line[:i]
	}
	return line
}

// FirstLine is the first non-empty line of s, with runs of spaces folded.
func FirstLine(s string) string {
	for _, line := range strings.Split(s, "\n") {
		if line = strings.Join(strings.Fields(line), " "); line != "" {
			return line
		}
	}
	return ""
}

// lookProgram finds a program on PATH or in the sbin directories that a
// root shell has and a sudo environment may not.
func lookProgram(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/usr/bin", "/sbin", "/usr/local/sbin", "/usr/local/bin"} {
		p := d + "/" + name
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
}
