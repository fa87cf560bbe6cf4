package main

import (
	"fmt"
	"io"
	"strings"
)

// subject names what a goal's condition is about.
type subject int

const (
	ofBaton        subject = iota // the baton column
	ofBatonToFloor                // baton/floor
	ofBatonToEtcd                 // baton/etcd
	ofBatonVsFloor                // baton against limit × floor + plus
)

func (s subject) String() string {
	return [...]string{"baton", "baton/floor", "baton/etcd", "baton"}[s]
}

// cond is one condition of a goal: subject op limit, op one of ≤, ≥, =.
type cond struct {
	of    subject
	op    string
	limit float64
	// unit of the limit when it is about the baton column (a duration goal
	// prints as one).
	unit unit
	// plus is added to limit × floor (ofBatonVsFloor), in the row's unit.
	plus float64
}

func (c cond) holds(x float64) bool {
	switch c.op {
	case "≥":
		return x >= c.limit
	case "=":
		return x == c.limit
	default:
		return x <= c.limit
	}
}

// Goals, as the rows write them.
func toFloorAtMost(x float64) cond { return cond{of: ofBatonToFloor, op: "≤", limit: x} }
func toEtcdAtMost(x float64) cond  { return cond{of: ofBatonToEtcd, op: "≤", limit: x} }

// toFloorAtMostPlus is baton ≤ x × floor + plus (plus a duration, in ns).
func toFloorAtMostPlus(x, plus float64) cond {
	return cond{of: ofBatonVsFloor, op: "≤", limit: x, plus: plus, unit: unitDuration}
}
func toEtcdAtLeast(x float64) cond        { return cond{of: ofBatonToEtcd, op: "≥", limit: x} }
func toFloorAtLeast(x float64) cond       { return cond{of: ofBatonToFloor, op: "≥", limit: x} }
func batonAtMost(x float64, u unit) cond  { return cond{of: ofBaton, op: "≤", limit: x, unit: u} }
func batonAtLeast(x float64, u unit) cond { return cond{of: ofBaton, op: "≥", limit: x, unit: u} }
func batonIs(x float64, u unit) cond      { return cond{of: ofBaton, op: "=", limit: x, unit: u} }

func (c cond) String() string {
	limit := fmt.Sprintf("%g", c.limit)
	switch c.of {
	case ofBaton:
		limit = val(c.limit).format(c.unit)
	case ofBatonVsFloor:
		limit = fmt.Sprintf("%g×floor + %s", c.limit, val(c.plus).format(c.unit))
	}
	return fmt.Sprintf("%s %s %s", c.of, c.op, limit)
}

// row is one line of the results table.
type row struct {
	metric string
	unit   unit
	baton  value
	floor  value
	etcd   value
	// noRatios leaves the ratio columns empty where they mean nothing
	// (the values are ratios already, or counts of different things).
	noRatios bool
	goal     []cond
	// broken names an invariant the workload broke (two winners of one
	// slot, say): the goal is not met whatever the numbers.
	broken string
}

func (r row) toFloor() value {
	if r.noRatios {
		return missing("")
	}
	return ratio(r.baton, r.floor)
}

func (r row) toEtcd() value {
	if r.noRatios {
		return missing("")
	}
	return ratio(r.baton, r.etcd)
}

// met reports whether the row has a goal and whether every condition holds.
func (r row) met() (hasGoal, ok bool) {
	if len(r.goal) == 0 {
		return false, false
	}
	if r.broken != "" {
		return true, false
	}
	for _, c := range r.goal {
		var v value
		switch c.of {
		case ofBaton:
			v = r.baton
		case ofBatonToFloor:
			v = ratio(r.baton, r.floor)
		case ofBatonToEtcd:
			v = ratio(r.baton, r.etcd)
		case ofBatonVsFloor:
			if !r.baton.ok || !r.floor.ok {
				return true, false
			}
			if r.baton.x > c.limit*r.floor.x+c.plus {
				return true, false
			}
			continue
		}
		if !v.ok {
			return true, false
		}
		if !c.holds(v.x) {
			return true, false
		}
	}
	return true, true
}

func (r row) goalText() string {
	if len(r.goal) == 0 {
		return "reported"
	}
	parts := make([]string, len(r.goal))
	for i, c := range r.goal {
		parts[i] = c.String()
	}
	return strings.Join(parts, "; ")
}

func (r row) metText() string {
	has, ok := r.met()
	switch {
	case !has:
		return "—"
	case r.broken != "":
		return "no: " + r.broken
	case ok:
		return "yes"
	default:
		return "no"
	}
}

// writeTable prints rows as a markdown table.
func writeTable(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| metric | baton | floor | etcd | baton/floor | baton/etcd | goal | met |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.metric,
			r.baton.format(r.unit), r.floor.format(r.unit), r.etcd.format(r.unit),
			r.toFloor().format(unitRatio), r.toEtcd().format(unitRatio), r.goalText(), r.metText())
	}
}

// tally counts the rows with goals and those met.
func tally(rows []row) (met, goals int) {
	for _, r := range rows {
		if has, ok := r.met(); has {
			goals++
			if ok {
				met++
			}
		}
	}
	return met, goals
}
