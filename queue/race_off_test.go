//go:build !race

package queue

const raceOn = false
