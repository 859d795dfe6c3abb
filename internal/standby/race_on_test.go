//go:build race

package standby_test

// raceOn says the race detector is built in: its shadow memory (five to ten times what the program
// uses, per the Go race detector's documentation) makes resident memory no measure of the standby's.
const raceOn = true
