package cmdutil

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

// Table writes byte for byte what tabwriter wrote for baton's tables.
func TestTable_WritesWhatTabwriterWrote(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("abcXYZ019-_.: é漢🙂")
	cell := func() string {
		n := rng.IntN(12)
		if rng.IntN(10) == 0 {
			n = 300 // wider than the padding buffer
		}
		var b strings.Builder
		for range n {
			b.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	for round := range 200 {
		cols := 1 + rng.IntN(9)
		rows := rng.IntN(30)
		header := make([]string, cols)
		for i := range header {
			header[i] = cell()
		}
		var want bytes.Buffer
		w := tabwriter.NewWriter(&want, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, strings.Join(header, "\t"))
		tab := NewTable(header...)
		for range rows {
			row := make([]string, cols)
			for i := range row {
				row[i] = cell()
			}
			fmt.Fprintln(w, strings.Join(row, "\t"))
			tab.Row(row...)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		n, err := tab.WriteTo(&got)
		if err != nil || n != int64(got.Len()) {
			t.Fatalf("round %d: wrote %d (%v), buffer has %d", round, n, err, got.Len())
		}
		if got.String() != want.String() {
			t.Fatalf("round %d: got\n%q\nwant\n%q", round, got.String(), want.String())
		}
		if tab.Len() != rows+1 {
			t.Fatalf("round %d: Len %d, want %d", round, tab.Len(), rows+1)
		}
	}
}

// A row added cell by cell, numbers included, is the row of those cells
// as strings.
func TestTable_AddIsRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	byRow, byCell := NewTable("A", "BB", "C", "D", "E"), NewTable("A", "BB", "C", "D", "E")
	for range 500 {
		i, u, s := rng.Int64N(1<<40)-1<<39, rng.Uint64(), strings.Repeat("é", rng.IntN(5))
		d := time.Duration(rng.Int64N(int64(200*time.Hour))) - 100*time.Hour
		if rng.IntN(2) == 0 {
			d /= 100000
		}
		byRow.Row(strconv.FormatInt(i, 10), strconv.FormatUint(u, 10), s, Describe(d), "")
		byCell.AddInt(i)
		byCell.AddUint(u)
		byCell.Add(s)
		byCell.AddDuration(d)
		byCell.Add("")
	}
	var a, b bytes.Buffer
	if _, err := byRow.WriteTo(&a); err != nil {
		t.Fatal(err)
	}
	if _, err := byCell.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() || byCell.Len() != 501 {
		t.Fatalf("cell by cell (%d rows):\n%s\nrow by row:\n%s", byCell.Len(), b.String(), a.String())
	}
}
