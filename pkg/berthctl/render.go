package berthctl

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"
)

// BarWidth is the width of the measured-against-requested bar, in cells of 5 %.
const BarWidth = 20

// Bar draws measured against requested, both in percent, as BarWidth cells of 5 %:
// '#' measured within requests, '-' requested but not measured (reserved and idle: the gap
// load-aware scoring fills), '+' measured beyond requests (use nobody asked for), '.' neither.
// Without a measurement it draws '?' up to the requests.
func Bar(measured *float64, requested float64) string {
	cells := func(p float64) int {
		c := int(math.Round(p / (100 / BarWidth)))
		return max(0, min(BarWidth, c))
	}
	r := cells(requested)
	var b strings.Builder
	b.WriteByte('[')
	if measured == nil {
		b.WriteString(strings.Repeat("?", r) + strings.Repeat(".", BarWidth-r))
	} else {
		m := cells(*measured)
		for i := range BarWidth {
			switch {
			case i < m && i < r:
				b.WriteByte('#')
			case i < r:
				b.WriteByte('-')
			case i < m:
				b.WriteByte('+')
			default:
				b.WriteByte('.')
			}
		}
	}
	b.WriteByte(']')
	return b.String()
}

func pct(f *float64) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", *f)
}

// Age prints a duration in seconds the way kubectl prints ages.
func Age(s *int64) string {
	if s == nil {
		return "-"
	}
	d := time.Duration(*s) * time.Second
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", *s)
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// WriteNodes prints view as table, wide, json or yaml.
func WriteNodes(w io.Writer, view *NodesView, output string) error {
	if done, err := writeStructured(w, view, output, "table, wide, json or yaml"); done {
		return err
	}
	wide := output == "wide"
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "NODE\tLOAD\tAGE\tCPU AVG\tCPU NOW\tCPU REQ\tMEM AVG\tMEM NOW\tMEM REQ\tCPU MEASURED/REQUESTED"
	if wide {
		head += "\tMEM MEASURED/REQUESTED\tCLASS\tIMAGES\tIMAGES AGE\tPLACED CPU"
	}
	fmt.Fprintln(tw, head)
	for _, n := range view.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.1f%%\t%s\t%s\t%.1f%%\t%s", n.Name, n.Load, Age(n.AgeSeconds),
			pct(n.CPU.Average), pct(n.CPU.Latest), n.CPU.RequestedPercent,
			pct(n.Memory.Average), pct(n.Memory.Latest), n.Memory.RequestedPercent,
			Bar(n.CPU.Average, n.CPU.RequestedPercent))
		if wide {
			class, imgs, imgAge := n.InstanceClass, "-", "-"
			if class == "" {
				class = "-"
			}
			if n.Images != nil {
				imgs = fmt.Sprint(n.Images.Count)
				if n.Images.Size != "" {
					imgs += " (" + n.Images.Size + ")"
				}
				imgAge = Age(n.Images.AgeSeconds)
			}
			fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s\t%s", Bar(n.Memory.Average, n.Memory.RequestedPercent), class, imgs, imgAge, placedCell(n.Placed))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	window := view.Watcher.Window
	if window == "" {
		window = "?"
	}
	_, err := fmt.Fprintf(w, "\nmeasured: %s average and latest sample from %s (source %s); requested: sum of pod requests over allocatable\nbar, 5%% a cell: # measured within requests, - requested but idle, + measured beyond requests, ? not measured\nplaced-pod estimate: %s\n",
		window, view.Watcher.From, view.Watcher.Source, view.PlacedPodEstimate)
	return err
}

// writeStructured prints v as json or yaml when output asks for them (done), refuses an output
// that is none of want (done, with the error), and leaves table and wide to the caller.
func writeStructured(w io.Writer, v any, output, want string) (bool, error) {
	switch output {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return true, err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return true, err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return true, err
		}
		_, err = w.Write(b)
		return true, err
	case "", "table", "wide":
		return false, nil
	default:
		return true, fmt.Errorf("--output %q: want %s", output, want)
	}
}
