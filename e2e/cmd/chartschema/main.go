// Command chartschema regenerates charts/berth's scheduler.plugins schema and
// templates/_plugins.tpl from the plugin table and the generated SecondaryScheduler CRD
// (hack/generate.sh runs it after controller-gen).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/berth-sched/berth/e2e/chart/pluginschema"
)

func main() {
	chart := flag.String("chart", "charts/berth", "the chart's directory")
	crd := flag.String("crd", "api/crds/berth.dev_secondaryschedulers.yaml", "the generated SecondaryScheduler CRD")
	flag.Parse()
	if err := run(*chart, *crd); err != nil {
		fmt.Fprintln(os.Stderr, "chartschema:", err)
		os.Exit(1)
	}
}

func run(chart, crdFile string) error {
	schemaFile := filepath.Join(chart, pluginschema.SchemaFile)
	schema, err := os.ReadFile(schemaFile)
	if err != nil {
		return err
	}
	crd, err := os.ReadFile(crdFile)
	if err != nil {
		return err
	}
	out, tpl, err := pluginschema.Generate(schema, crd)
	if err != nil {
		return err
	}
	if err := os.WriteFile(schemaFile, out, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(chart, pluginschema.TemplateFile), tpl, 0o644)
}
