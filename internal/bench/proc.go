package bench

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ClockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat:
// 100 on every Linux architecture Go supports (getconf CLK_TCK).
const ClockTicks = 100

// ProcCPU is the CPU a process has used so far, in clock ticks.
type ProcCPU struct {
	UTime, STime int64
}

// Ticks is user plus system time.
func (c ProcCPU) Ticks() int64 { return c.UTime + c.STime }

// Seconds is Ticks in seconds.
func (c ProcCPU) Seconds() float64 { return float64(c.Ticks()) / ClockTicks }

// ParseProcStat reads utime and stime (fields 14 and 15) from the content
// of /proc/PID/stat. The command name (field 2) is in parentheses and may
// itself contain spaces and parentheses, so fields are counted from the
// last ')'.
func ParseProcStat(data string) (ProcCPU, error) { return parseStatPair(data, 14, "utime", "stime") }

// ParseProcStatChildren reads cutime and cstime (fields 16 and 17): the
// CPU of the children the process has waited for (the mariadb-backup and
// mbstream an agent ran).
func ParseProcStatChildren(data string) (ProcCPU, error) {
	return parseStatPair(data, 16, "cutime", "cstime")
}

// parseStatPair reads fields n and n+1 of /proc/PID/stat.
func parseStatPair(data string, n int, first, second string) (ProcCPU, error) {
	i := strings.LastIndexByte(data, ')')
	if i < 0 {
		return ProcCPU{}, errors.New("proc stat: no command name")
	}
	f := strings.Fields(data[i+1:])
	// f[0] is field 3 (state), so field N is f[N-3].
	if len(f) < n-1 {
		return ProcCPU{}, fmt.Errorf("proc stat: %d fields after the command name, want at least %d", len(f), n-1)
	}
	u, err := strconv.ParseInt(f[n-3], 10, 64)
	if err != nil {
		return ProcCPU{}, fmt.Errorf("proc stat: %s: %w", first, err)
	}
	s, err := strconv.ParseInt(f[n-2], 10, 64)
	if err != nil {
		return ProcCPU{}, fmt.Errorf("proc stat: %s: %w", second, err)
	}
	return ProcCPU{UTime: u, STime: s}, nil
}

// ReadProcCPU reads the CPU used so far by a process (all its threads).
func ReadProcCPU(pid int) (ProcCPU, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcCPU{}, err
	}
	return ParseProcStat(string(data))
}

// ParseVmRSS reads VmRSS (KiB) from the content of /proc/PID/status.
func ParseVmRSS(data string) (int64, error) {
	sc := bufio.NewScanner(strings.NewReader(data))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 1 {
			break
		}
		if len(f) > 1 && f[1] != "kB" {
			return 0, fmt.Errorf("proc status: VmRSS unit %q", f[1])
		}
		return strconv.ParseInt(f[0], 10, 64)
	}
	return 0, errors.New("proc status: no VmRSS")
}

// ReadVmRSS reads the resident set size of a process in KiB.
func ReadVmRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return ParseVmRSS(string(data))
}

// cpuOf sums the CPU of several processes; a process that cannot be read
// makes the sum unknown (false).
func cpuOf(pids []int) (ProcCPU, bool) {
	var sum ProcCPU
	for _, pid := range pids {
		c, err := ReadProcCPU(pid)
		if err != nil {
			return ProcCPU{}, false
		}
		sum.UTime += c.UTime
		sum.STime += c.STime
	}
	return sum, len(pids) > 0
}
