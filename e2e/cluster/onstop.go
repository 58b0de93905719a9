package cluster

// OnStop registers f to run when the cluster stops, after its processes have stopped and before
// its directory is removed, in reverse order of registration. Helpers that write into the
// cluster's directory from goroutines of the test process (fixture /proc writers) stop there,
// so nothing recreates files under a directory being removed.
func (c *Cluster) OnStop(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onStop = append(c.onStop, f)
}

func (c *Cluster) runOnStop() {
	c.mu.Lock()
	fs := c.onStop
	c.onStop = nil
	c.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
