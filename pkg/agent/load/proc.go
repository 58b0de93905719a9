// Package load samples a node's CPU and memory utilisation from a /proc tree and keeps bounded
// per-window statistics over the samples.
package load

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CPUTimes is the aggregate "cpu" line of /proc/stat, reduced to what utilisation needs.
type CPUTimes struct {
	// Total is the sum of all jiffies counters, except guest and guest_nice, which the kernel
	// already counts inside user and nice.
	Total uint64
	// Idle is idle + iowait: time in which the CPU could have run more work.
	Idle uint64
	// CPUs is the number of per-CPU lines (cpu0, cpu1, ...): what converts a share of the node
	// into millicores.
	CPUs int
}

// ReadCPU parses <root>/stat.
func ReadCPU(root string) (CPUTimes, error) {
	b, err := os.ReadFile(filepath.Join(root, "stat"))
	if err != nil {
		return CPUTimes{}, err
	}
	return ParseStat(b)
}

// ParseStat extracts the aggregate CPU counters from the contents of /proc/stat.
func ParseStat(b []byte) (CPUTimes, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	var t CPUTimes
	found := false
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || !strings.HasPrefix(fields[0], "cpu") {
			continue
		}
		if fields[0] != "cpu" {
			if _, err := strconv.Atoi(fields[0][3:]); err == nil {
				t.CPUs++
			}
			continue
		}
		if found {
			continue
		}
		// Kernels before 2.6.11 had 4 counters; anything older is not a supported node.
		if len(fields) < 5 {
			return CPUTimes{}, fmt.Errorf("/proc/stat: cpu line has %d counters, want at least 4", len(fields)-1)
		}
		var vals [10]uint64
		n := len(fields) - 1
		if n > len(vals) {
			n = len(vals)
		}
		for i := 0; i < n; i++ {
			v, err := strconv.ParseUint(fields[i+1], 10, 64)
			if err != nil {
				return CPUTimes{}, fmt.Errorf("/proc/stat: cpu counter %d: %w", i, err)
			}
			vals[i] = v
		}
		// user nice system idle iowait irq softirq steal [guest guest_nice]
		for i := 0; i < 8 && i < n; i++ {
			t.Total += vals[i]
		}
		t.Idle = vals[3]
		if n > 4 {
			t.Idle += vals[4]
		}
		found = true
	}
	if err := sc.Err(); err != nil {
		return CPUTimes{}, err
	}
	if !found {
		return CPUTimes{}, errors.New("/proc/stat: no aggregate cpu line")
	}
	return t, nil
}

// CPUUtilisation is the busy share, in percent, between two readings. ok is false when the
// counters did not advance (or went backwards, e.g. a fixture rewritten or a counter reset), in
// which case there is no information and the caller must not record a sample.
func CPUUtilisation(prev, cur CPUTimes) (pct float64, ok bool) {
	if cur.Total <= prev.Total || cur.Idle < prev.Idle {
		return 0, false
	}
	dt := float64(cur.Total - prev.Total)
	di := float64(cur.Idle - prev.Idle)
	if di > dt {
		return 0, false
	}
	return 100 * (dt - di) / dt, true
}

// Memory is what utilisation needs from /proc/meminfo, in kB as the kernel reports it.
type Memory struct {
	TotalKB     uint64
	AvailableKB uint64
}

// Utilisation is the share of memory not available to new work, in percent.
func (m Memory) Utilisation() float64 {
	if m.TotalKB == 0 {
		return 0
	}
	return 100 * float64(m.TotalKB-min(m.AvailableKB, m.TotalKB)) / float64(m.TotalKB)
}

// ReadMemory parses <root>/meminfo.
func ReadMemory(root string) (Memory, error) {
	b, err := os.ReadFile(filepath.Join(root, "meminfo"))
	if err != nil {
		return Memory{}, err
	}
	return ParseMeminfo(b)
}

// ParseMeminfo extracts MemTotal and MemAvailable. Both are required: MemAvailable (Linux ≥ 3.14)
// is the kernel's own estimate including reclaimable cache; approximating it from MemFree would
// report a node with a big page cache as full.
func ParseMeminfo(b []byte) (Memory, error) {
	var m Memory
	var haveTotal, haveAvail bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, rest, found := strings.Cut(sc.Text(), ":")
		if !found {
			continue
		}
		var dst *uint64
		switch key {
		case "MemTotal":
			dst, haveTotal = &m.TotalKB, true
		case "MemAvailable":
			dst, haveAvail = &m.AvailableKB, true
		default:
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return Memory{}, fmt.Errorf("/proc/meminfo: %s has no value", key)
		}
		v, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("/proc/meminfo: %s: %w", key, err)
		}
		*dst = v
	}
	if err := sc.Err(); err != nil {
		return Memory{}, err
	}
	if !haveTotal || !haveAvail {
		return Memory{}, errors.New("/proc/meminfo: MemTotal or MemAvailable missing")
	}
	if m.TotalKB == 0 {
		return Memory{}, errors.New("/proc/meminfo: MemTotal is 0")
	}
	return m, nil
}
