module github.com/accelsched/accelsched/tests/node/probe

go 1.26.0
