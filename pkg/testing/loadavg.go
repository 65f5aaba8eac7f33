package testing

import (
	"os"
	"strings"
)

// LoadAverage is the machine's 1, 5 and 15 minute load average, as uptime prints it, or "?"
// when /proc/loadavg cannot be read. The harnesses (bench, chaos) print it beside their
// figures, which move with the machine's load.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
