package sysched

// NodeExS is KEP-399's extraneous-syscall count of one node: with H the union of the syscall
// sets of the pods on the node, it is Σ_q |H ∖ S_q|, the syscalls each pod is exposed to through
// its neighbours without needing them itself. Each element of pods is one pod's syscall names
// (duplicates are ignored). It is a plain function of its input, for harnesses and reports that
// evaluate a placement after the fact; the plugin itself keeps the same figure incrementally.
func NodeExS(pods [][]string) int {
	union := map[string]struct{}{}
	own := make([]int, len(pods))
	for i, p := range pods {
		seen := map[string]struct{}{}
		for _, s := range p {
			seen[s] = struct{}{}
			union[s] = struct{}{}
		}
		own[i] = len(seen)
	}
	total := 0
	for _, n := range own {
		total += len(union) - n
	}
	return total
}

// ClusterExS sums NodeExS over nodes (node name → its pods' syscall sets).
func ClusterExS(nodes map[string][][]string) int {
	total := 0
	for _, pods := range nodes {
		total += NodeExS(pods)
	}
	return total
}
