package bench

func init() {
	RegisterProfile(DecisionRecordDefaultProfile)
	RegisterProfile(DecisionRecordLoadAwareProfile)
}

// decisionRecordPoint enables DecisionRecord as one more multiPoint entry; decisionRecordArgs
// is its pluginConfig entry: the default 1000 records of 10 nodes, plus the Scheduled event's
// summary, so the benchmark measures the most the feature costs.
const (
	decisionRecordPoint = "      - name: DecisionRecord\n"
	decisionRecordArgs  = "  - name: DecisionRecord\n    args:\n      records: 1000\n      topNodes: 10\n      summary: Event\n"
)

// DecisionRecordDefaultProfile is BerthDefaultProfile with decision records on: compare the
// two rows for the cost of recording with upstream's default plugins.
func DecisionRecordDefaultProfile() Profile {
	p := BerthDefaultProfile()
	p.Name = "berth-scheduler (default plugins + DecisionRecord)"
	p.Profiles += "  plugins:\n    multiPoint:\n      enabled:\n" + decisionRecordPoint + "  pluginConfig:\n" + decisionRecordArgs
	return p
}

// DecisionRecordLoadAwareProfile is LoadAwareProfile with decision records on (the load-aware
// plugins then also report the utilisation they read for every scored node).
func DecisionRecordLoadAwareProfile() Profile {
	p, addr, err := syntheticLoadProfile()
	p.Name = "berth-scheduler (TargetLoadPacking + LoadVariationRiskBalancing + DecisionRecord)"
	p.Profiles = "- schedulerName: " + SchedulerName + "\n" + loadAwarePlugins(addr, decisionRecordPoint, decisionRecordArgs)
	_ = err // reported by Setup
	return p
}
