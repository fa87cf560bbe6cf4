package cmdutil

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"text/tabwriter"
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
