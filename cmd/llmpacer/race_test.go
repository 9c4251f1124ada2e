//go:build race

package main

// raceFlags builds the command as the test binary was built, so that
// TestBinary's go build reuses the packages go test compiled: a build
// without -race compiled every dependency a second time (two minutes of a
// loaded CI run).
var raceFlags = []string{"-race"}
