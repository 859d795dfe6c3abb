//go:build !race

package standby_test

// raceOn says the race detector is built in (race_on_test.go).
const raceOn = false
