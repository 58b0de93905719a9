package decisionrecord

import fwk "k8s.io/kube-scheduler/framework"

type named struct {
	fwk.Handle
	name string
}

func (n named) ProfileName() string { return n.name }

func profileHandle(name string) fwk.Handle { return named{name: name} }
