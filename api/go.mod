module github.com/berth-sched/berth/api

go 1.26.0
