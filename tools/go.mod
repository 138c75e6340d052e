module github.com/iop-gateway/iop/tools

go 1.26.8

require (
	github.com/bufbuild/protocompile v0.14.1
	github.com/planetscale/vtprotobuf v0.6.1-0.20240319094008-0393e58bdf10
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/aclements/go-moremath v0.0.0-20210112150236-f10218a38794 // indirect
	golang.org/x/perf v0.0.0-20260908200009-22c9c6c9d4da // indirect
	golang.org/x/sync v0.8.0 // indirect
)

tool golang.org/x/perf/cmd/benchstat
